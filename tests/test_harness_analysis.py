"""The analysis parts of the harness on problems with a known answer."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.fit.targets import choose_targets, clear_of, reach_count  # noqa: E402
from empirical_batch.harness.config import OneStepSpec  # noqa: E402
from empirical_batch.harness.tasks.base import Task  # noqa: E402
from empirical_batch.validation.experiments.noise import (  # noqa: E402
    averaged_scale,
    measure_scales,
    scales_at_losses,
    start_value,
)
from empirical_batch.validation.experiments.one_step import one_step_at  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@dataclass(frozen=True)
class _LinOptions:
    n: int = 256
    dim: int = 6


class _Linear(Task):
    """Least squares with a linear model: the loss is exactly quadratic in the weights."""

    name = "linear_test"
    Options = _LinOptions

    @classmethod
    def validate(cls, o):
        pass

    def _build(self):
        g = torch.Generator().manual_seed(0)
        scales = torch.linspace(0.3, 2.0, self.options.dim, dtype=torch.float64)
        x = torch.randn(self.options.n, self.options.dim, generator=g, dtype=torch.float64)
        x = x * scales
        y = x @ torch.ones(self.options.dim, 1, dtype=torch.float64) + torch.randn(
            self.options.n, 1, generator=g, dtype=torch.float64)
        self._data = (x.to(self.device, self.dtype), y.to(self.device, self.dtype))

    def make_model(self):
        return torch.nn.Linear(self.options.dim, 1, bias=False)

    def loss_fn(self, outputs, targets):
        return 0.5 * ((outputs - targets) ** 2).mean()

    def _sample(self, generator, batch_size):
        idx = torch.randint(self.options.n, (batch_size,), generator=generator)
        return self._data[0][idx], self._data[1][idx]

    def _eval_data(self):
        return self._data

    def _objective_data(self):
        return self._data


def test_one_step_recovers_the_quadratic_model_exactly_where_it_holds():
    task = _Linear().to("cpu", torch.float64)
    state = {"weight": torch.zeros(1, task.options.dim, dtype=torch.float64)}
    spec = OneStepSpec(batch_sizes=(1, 4, 16, 64, 256), n_batches=1024, n_eps=24,
                       n_checkpoints=1, n_examples=256, n_boot=200)
    res = one_step_at(task, state, spec, learning_rate=0.1, key=1)
    s = res.summary
    # the fitted constants against the Hessian-vector-product values at the same weights:
    # the loss is exactly quadratic, so only the batch sampling (1,024 batches per B)
    # separates them; allow 4 bootstrap standard errors (from the 95% interval)
    se = (s["b_noise_fit_high"] - s["b_noise_fit_low"]) / (2 * 1.96)
    assert abs(s["b_noise_fit"] - s["b_noise_hvp"]) < 4 * se
    assert se < 0.3 * s["b_noise_hvp"]  # the test has power: the interval is informative
    t = res.table
    pred = t["eps_opt_pred_hvp"]
    inside = (t["eps_opt_low"] <= pred) & (pred <= t["eps_opt_high"])
    assert inside.sum() >= 4  # 95% intervals, 5 batch sizes: at most one miss expected
    # ε_opt grows with B and saturates at ε_max (eq. 2.6)
    assert np.all(np.diff(t["eps_opt"]) > 0)
    assert t["eps_opt"].iloc[-1] < s["eps_max_hvp"] * 1.1


def test_library_paths_agree_on_b_simple():
    task = _Linear().to("cpu", torch.float64)
    model = task.init_model(0).double()
    m = measure_scales(task, model, 256)
    n = m["n_examples"]
    pop = (n / (n - 1) * m["trace_sigma"]) / (m["g2"] - m["trace_sigma"] / (n - 1))
    # per-example norms + two-batch estimator vs the Hessian path's traces: the same
    # algebra; per_example_sq_norms accumulates in float32 (~6e-8 relative), hence 1e-6
    assert m["b_simple_collector"] == pytest.approx(pop, rel=1e-6)


def _scales():
    return pd.DataFrame({
        "step": [0, 10, 20, 40],
        "eval_loss": [2.0, 1.0, 0.5, 0.4],
        "b_simple": [10.0, 20.0, 40.0, 80.0],
        "b_noise": [5.0, 10.0, -1.0, 40.0],
    })


def test_scales_at_losses_interpolates_at_first_crossing():
    at = scales_at_losses(_scales(), [2.5, 1.5, 0.75, 0.1], columns=("b_simple", "b_noise"))
    assert at.loc[0, "b_simple"] == 10.0  # reached at the first point
    assert at.loc[1, "b_simple"] == pytest.approx(np.sqrt(10 * 20))  # halfway: geometric mean
    assert at.loc[2, "b_simple"] == pytest.approx(np.sqrt(20 * 40))
    assert np.isnan(at.loc[2, "b_noise"])  # a negative bracketing value is not interpolated
    assert not at.loc[3, "reached"] and np.isnan(at.loc[3, "b_simple"])


def test_averaged_scale_weights_by_steps():
    s = _scales()
    # trapezoid over steps 0..20: (10+20)/2·10 + (20+40)/2·10 = 450 over 20 steps
    assert averaged_scale(s, "b_simple", 0.5) == pytest.approx(22.5)
    assert np.isnan(averaged_scale(s, "b_noise", 0.4))


def test_averaged_scale_weights_by_progress():
    # B_noise = B at every checkpoint: ds = dt/2 everywhere, the same mean as by steps
    s = _scales().assign(batch_size=10, b_noise_pop=10.0)
    assert averaged_scale(s, "b_simple", 0.5, weight="progress") == pytest.approx(22.5)
    # weights 1/(1 + B_noise/B) = 1/2, 1/3, 1/5 at steps 0, 10, 20 (B = 10):
    # ∫ v w dt = 10 (10/2 + 20/3)/2 + 10 (20/3 + 40/5)/2, ∫ w dt = 10 (1/2 + 1/3)/2 + ...
    s = _scales().assign(batch_size=10, b_noise_pop=[10.0, 20.0, 40.0, 80.0])
    num = 5 * (5 + 20 / 3) + 5 * (20 / 3 + 8)
    den = 5 * (1 / 2 + 1 / 3) + 5 * (1 / 3 + 1 / 5)
    assert averaged_scale(s, "b_simple", 0.5, weight="progress") == pytest.approx(num / den)
    # progress weighting discounts the late, noisy steps: below the step-weighted mean
    assert num / den < averaged_scale(s, "b_simple", 0.5)
    with pytest.raises(ValueError, match="weight"):
        averaged_scale(s, "b_simple", 0.5, weight="examples")
    assert np.isnan(averaged_scale(s.assign(b_noise_pop=-1.0), "b_simple", 0.5,
                                   weight="progress"))


def test_start_value_is_measured_at_step_0_where_defined():
    s = _scales()
    assert start_value(s, "b_simple") == (10.0, 0)
    assert start_value(s.assign(b_noise=[-1.0, 7.0, 3.0, 2.0]), "b_noise") == (7.0, 10)
    v, step = start_value(s.assign(b_noise=np.nan), "b_noise")
    assert np.isnan(v) and step == -1


def test_averaged_scale_without_numpy_2_trapezoid(monkeypatch):
    # pyproject allows numpy 1.26, which has no np.trapezoid (a GPU image may ship it)
    monkeypatch.delattr(np, "trapezoid", raising=False)
    assert averaged_scale(_scales(), "b_simple", 0.5) == pytest.approx(22.5)


def _target_frame():
    rows = []
    for b, best in ((1, 0.5), (2, 0.3), (4, 0.2), (8, 0.4)):
        for lr, extra in ((0.1, 0.0), (0.2, 0.05)):
            for seed, lucky in ((0, 0.0), (1, -0.15)):  # seed 1 luckier: not what all reach
                rows += [{"batch_size": b, "learning_rate": lr, "seed": seed, "step": 0,
                          "metric": 2.0},
                         {"batch_size": b, "learning_rate": lr, "seed": seed, "step": 5,
                          "metric": best + extra + lucky}]
    return pd.DataFrame(rows)


def test_choose_targets_rule():
    frame = _target_frame()
    # best loss every seed reaches, per batch size: 0.5, 0.3, 0.2, 0.4 (worst seed, best lr)
    # K = min(n, max(5, ceil(n/2))) = all 4 batch sizes: L_K = 0.5, L_hard = 1.02 × 0.5
    t = choose_targets(frame, (0.5, 0.0))
    l_hard = 1.02 * 0.5
    np.testing.assert_allclose(t, [l_hard + 0.5 * (2.0 - l_hard), l_hard])
    # with K = 2 (min_reach=2): the 2nd lowest best loss, 0.3, plus the margin
    t2 = choose_targets(frame, (0.0,), min_reach=2, margin=0.1)
    np.testing.assert_allclose(t2, [0.33])
    with pytest.raises(ValueError, match="no training progress"):
        choose_targets(frame.assign(metric=2.0), (0.5,))
    with pytest.raises(ValueError, match="margin > 2"):
        choose_targets(frame, (0.0,), margin=0.001, clearance=0.001)


def test_targets_keep_clear_of_every_configurations_best_loss():
    frame = _target_frame()
    # (B=2, lr=0.2) stops reaching at 0.3 + 0.05 = 0.35; put the hardest target there:
    # margin 1/6 above L_K = 0.3 (K = 2) is exactly 0.35, a knife edge
    t = choose_targets(frame, (0.0,), min_reach=2, margin=0.35 / 0.3 - 1)
    assert t[0] == pytest.approx(0.35 * (1 + 2e-3))
    assert clear_of(0.35, [0.35, 0.3507, 0.5], 1e-3) == pytest.approx(0.3507 * 1.002)
    assert clear_of(0.36, [0.35, 0.5], 1e-3) == 0.36
    assert [reach_count(n) for n in (3, 5, 8, 11, 20)] == [3, 5, 5, 6, 10]


def test_one_step_batch_gradients_in_chunks_change_nothing(monkeypatch):
    # the full preset splits the batch gradients into vmap chunks to bound GPU memory;
    # chunks of 14 and 3 batches (of 16 batches of B = 16, 64) give the same numbers
    from empirical_batch.validation.experiments import scales as library

    task = _Linear().to("cpu", torch.float64)
    state = {"weight": 0.3 * torch.ones(1, task.options.dim, dtype=torch.float64)}
    spec = OneStepSpec(batch_sizes=(1, 16, 64), n_batches=16, n_eps=8, n_checkpoints=1,
                       n_examples=256, n_boot=20)
    whole = one_step_at(task, state, spec, learning_rate=0.1, key=2)
    model = task.init_model(0).double()
    x, y = task.objective_data()
    per = library.saved_bytes_per_example(model, task.loss_fn, x, y)
    monkeypatch.setattr(library, "SAVED_BYTES", int(3.5 * per * 64))
    chunked = one_step_at(task, state, spec, learning_rate=0.1, key=2)
    # same batches, same arithmetic per batch; only vmap's kernel batching differs
    cols = ["a", "b", "eps_opt", "dl_opt", "eps_opt_low", "dl_opt_high"]
    np.testing.assert_allclose(chunked.table[cols], whole.table[cols], rtol=1e-10)


def test_hvp_chunk_shrinks_with_activation_memory_and_changes_nothing(monkeypatch):
    from empirical_batch.validation.experiments import scales as library

    task = _Linear().to("cpu", torch.float64)
    model = task.init_model(0).double()
    x, y = task.objective_data()
    per = library.saved_bytes_per_example(model, task.loss_fn, x, y)
    # a linear model saves at least its float64 input row per example
    assert per >= 8 * task.options.dim
    assert library.hvp_chunk(model, task.loss_fn, x, y) == library.HVP_CHUNK  # tiny model
    whole = library.hessian_scales(model, task.loss_fn, x, y)
    monkeypatch.setattr(library, "SAVED_BYTES", int(3.5 * per * x.shape[0]))
    assert library.hvp_chunk(model, task.loss_fn, x, y) == 3
    chunked = library.hessian_scales(model, task.loss_fn, x, y)
    # same HVPs in chunks of 3 instead of 64: round-off only
    for key in ("b_noise", "b_simple", "trace_h_sigma", "ghg"):
        assert chunked[key] == pytest.approx(whole[key], rel=1e-10)


def test_degenerate_one_step_fits_give_nan_not_an_error():
    from empirical_batch.validation.experiments.one_step import curvature_line, fit_step_quadratic

    eps = np.array([0.1, 0.2, 0.4, 0.8, 1.6])
    dl = 2.0 * eps - 2.5 * eps**2
    a, b = fit_step_quadratic(eps, np.where(eps > 1, -np.inf, dl))  # the largest diverged
    assert a == pytest.approx(2.0) and b == pytest.approx(5.0)
    assert np.isnan(fit_step_quadratic(eps, np.array([np.nan] * 3 + [1.0, -np.inf]))).all()
    bs = np.array([1.0, 4.0, 16.0])
    assert np.isnan(curvature_line(bs, 1 + 2 / bs, np.ones(3), np.zeros(3))).all()
    assert np.isnan(curvature_line(bs, 1 + 2 / bs, np.ones(3), [1.0, np.nan, 1.0])).all()
    a_bar, c, d = curvature_line(bs, 1 + 2 / bs, np.ones(3), np.ones(3))
    assert (a_bar, c, d) == (pytest.approx(1.0), pytest.approx(1.0), pytest.approx(2.0))
    # one batch per batch size: no spread, so no weights; the experiment reports NaN
    task = _Linear().to("cpu", torch.float64)
    state = {"weight": 0.3 * torch.ones(1, task.options.dim, dtype=torch.float64)}
    spec = OneStepSpec(batch_sizes=(1, 16), n_batches=1, n_eps=8, n_checkpoints=1,
                       n_examples=64, n_boot=3)
    res = one_step_at(task, state, spec, learning_rate=0.1)
    assert np.isnan(res.summary["b_noise_fit"]) and np.isfinite(res.summary["b_noise_hvp"])


def test_grad_chunk_and_the_memory_budget(monkeypatch):
    from empirical_batch.validation.experiments import scales as library

    task = _Linear().to("cpu", torch.float64)
    model = task.init_model(0).double()
    x, y = task.objective_data()
    per = library.saved_bytes_per_example(model, task.loss_fn, x, y)
    assert library.saved_bytes_budget("cpu") == library.SAVED_BYTES
    assert library.grad_chunk(model, task.loss_fn, x, y) == x.shape[0]  # all at once
    assert library.grad_chunk(model, task.loss_fn, x, y, budget=5 * per) == 5
    assert library.grad_chunk(model, task.loss_fn, x, y, budget=1) == 1
    assert library.hvp_chunk(model, task.loss_fn, x, y, budget=3 * per * x.shape[0]) == 3


@pytest.mark.gpu
def test_the_budget_on_cuda_is_a_share_of_the_device():
    from empirical_batch.validation.experiments import scales as library

    total = torch.cuda.get_device_properties(0).total_memory
    want = max(library.SAVED_BYTES, int(total * library.CUDA_MEMORY_FRACTION))
    assert library.saved_bytes_budget("cuda") == want


def _noise_and_one_step(device):
    task = _Linear().to(device, torch.float64)
    state = {"weight": 0.3 * torch.ones(1, task.options.dim, dtype=torch.float64)}
    spec = OneStepSpec(batch_sizes=(1, 16, 64), n_batches=16, n_eps=8, n_checkpoints=1,
                       n_examples=256, n_boot=20)
    one = one_step_at(task, state, spec, learning_rate=0.1, key=2)
    scales = measure_scales(task, task.init_model(0), 128)
    return one, scales


@pytest.mark.gpu
def test_noise_and_one_step_on_cuda_match_cpu():
    (one_c, sc_c), (one_g, sc_g) = _noise_and_one_step("cpu"), _noise_and_one_step("cuda")
    # the same data, examples and batches (drawn on the CPU) in float64 on both devices:
    # summation order only; ΔL = L(θ) − L(θ − εG) cancels up to ~4 digits at the
    # smallest ε, so the fitted a, b and ε_opt agree to ~1e-12 × 1e4, well inside 1e-6
    cols = ["a", "b", "eps_opt", "dl_opt", "eps_opt_pred_hvp", "dl_opt_pred_hvp"]
    np.testing.assert_allclose(one_g.table[cols], one_c.table[cols], rtol=1e-6)
    for key in ("b_noise", "b_simple", "b_noise_pop", "g2", "ghg"):
        assert sc_g[key] == pytest.approx(sc_c[key], rel=1e-9), key
    # per_example_sq_norms accumulates in float32 (~1e-6 relative)
    assert sc_g["b_simple_collector"] == pytest.approx(sc_c["b_simple_collector"], rel=1e-5)


def test_crossing_step_is_the_rule_of_steps_to_target():
    from empirical_batch.fit import steps_to_target
    from empirical_batch.validation.experiments.noise import crossing_step

    steps = np.array([0, 1, 2, 4, 8, 16, 32])
    loss = np.array([3.0, 2.6, 2.2, 1.9, 1.5, 1.2, 1.0])
    frame = pd.DataFrame({"run": "r", "batch_size": 4, "learning_rate": 0.1, "step": steps,
                          "examples": 4 * steps, "metric": loss})
    for target in (2.8, 2.0, 1.7, 1.3, 1.0, 3.5):
        want = steps_to_target(frame, target).to_frame()["steps"].iloc[0]
        assert crossing_step(steps, loss, target) == pytest.approx(want, rel=1e-12)
    assert np.isnan(crossing_step(steps, loss, 0.9))


def test_an_average_ends_at_the_interpolated_crossing_of_the_logged_curve():
    # checkpoints at 0, 10, 40 (where the noise is measured); the logged curve is denser
    # and crosses L = 1.5 at step 20 exactly. The average must be the mean over [0, 20]
    # of the integrand interpolated linearly in step between the checkpoints, not the
    # mean up to the next checkpoint (40) nor up to 10.
    s = pd.DataFrame({"step": [0, 10, 40], "eval_loss": [3.0, 2.0, 1.0],
                      "b_simple": [10.0, 20.0, 80.0], "batch_size": 8,
                      "b_noise_pop": [8.0, 8.0, 8.0]})
    curve = (np.array([0, 5, 10, 20, 40]), np.array([3.0, 2.5, 2.0, 1.5, 1.0]))
    # brute force: the integrand on a fine grid of [0, 20]
    grid = np.linspace(0, 20, 200001)
    want = float(np.mean(np.interp(grid, s["step"], s["b_simple"])))
    got = averaged_scale(s, "b_simple", 1.5, curve=curve)
    assert got == pytest.approx(want, rel=1e-6)
    assert got == pytest.approx(averaged_scale(s, "b_simple", 1.5, curve=curve,
                                               weight="progress"))
    # without the curve the checkpoints' own losses give the crossing: between 10
    # and 40, at 10 * 4 ** 0.5 = 20 as well (loss linear in log step)
    assert averaged_scale(s, "b_simple", 1.5) == pytest.approx(want, rel=1e-6)
    # a target the checkpoints never reach but the curve does (between logged points)
    s2 = s.assign(eval_loss=[3.0, 2.0, 1.6])
    curve2 = (curve[0], np.array([3.0, 2.5, 2.0, 1.5, 1.6]))
    grid = np.linspace(0, 20, 200001)
    assert averaged_scale(s2, "b_simple", 1.5, curve=curve2) == pytest.approx(
        float(np.mean(np.interp(grid, s2["step"], s2["b_simple"]))), rel=1e-6)


class _LinearSet(_Linear):
    """_Linear whose batches are drawn with replacement from its n examples."""

    name = "linear_set_test"

    @property
    def population_size(self) -> float:
        return float(self.options.n)


def test_noise_scales_follow_the_tasks_sampling_design():
    from empirical_batch.validation.experiments.noise import with_population

    model = _Linear().to("cpu", torch.float64).init_model(0).double()
    unbounded = measure_scales(_Linear().to("cpu", torch.float64), model, 64)
    finite = measure_scales(_LinearSet().to("cpu", torch.float64), model, 64)
    whole = measure_scales(_LinearSet().to("cpu", torch.float64), model, 256)
    assert unbounded["population_size"] == np.inf and finite["population_size"] == 256
    # a sample of 64 of the 256: the finite-population correction (1/n - 1/D), by the
    # Hessian path and the collector path alike
    n, big_d = 64, 256
    trs = unbounded["trace_sigma"] * n / (n - 1)
    want = trs * (big_d - 1) / big_d / (unbounded["g2"] - trs * (1 / n - 1 / big_d))
    assert finite["b_simple_pop"] == pytest.approx(want, rel=1e-10)
    assert finite["b_simple_collector"] == pytest.approx(want, rel=1e-6)
    assert finite["b_simple_pop"] != pytest.approx(unbounded["b_simple_pop"], rel=1e-3)
    # the whole set measured: the plug-in (uncorrected) values
    assert whole["b_noise_pop"] == pytest.approx(whole["b_noise"], rel=1e-10)
    assert whole["b_simple_collector"] == pytest.approx(whole["b_simple"], rel=1e-6)
    # a table written before the design was recorded, converted afterwards
    old = pd.DataFrame([{k: v for k, v in unbounded.items() if k != "population_size"}])
    conv = with_population(old, big_d).iloc[0]
    for col in ("b_noise_pop", "b_simple_pop", "b_simple_collector"):
        assert conv[col] == pytest.approx(finite[col], rel=1e-9)
    assert conv["population_size"] == big_d
    assert with_population(old, np.inf).iloc[0]["b_noise_pop"] == unbounded["b_noise_pop"]


def test_digits_declares_its_training_set_as_the_population():
    pytest.importorskip("sklearn")
    from empirical_batch.harness.tasks.digits import Digits
    from empirical_batch.harness.tasks.teacher_student import TeacherStudent

    task = Digits()
    assert task.population_size == task.train_size == 1437
    assert TeacherStudent().population_size == np.inf


def _one_step_scales():
    """Checkpoints with the one-step scalars; at step 20 a step at η = 0.5 overshoots
    (η > 2 ε_opt(B)), so the model predicts a loss increase there."""
    return pd.DataFrame({
        "step": [0, 10, 20, 40], "eval_loss": [2.0, 1.0, 0.5, 0.4],
        "b_simple": [10.0, 20.0, 40.0, 80.0], "b_noise_pop": [4.0, 8.0, 16.0, 32.0],
        "batch_size": 8, "learning_rate": 0.5,
        "g2": [1.0, 1.0, 0.5, 0.5], "ghg": [1.0, 1.0, 2.0, 1.0],
        "trace_sigma": [10.0, 20.0, 20.0, 40.0], "trace_h_sigma": [4.0, 8.0, 32.0, 32.0],
    })


def test_rate_weight_is_the_one_step_progress_at_the_runs_rate():
    from empirical_batch.validation.experiments.noise import negative_progress, rate_progress

    s = _one_step_scales()
    eta, b = 0.5, 8
    want = eta * s["g2"] - 0.5 * eta**2 * (s["ghg"] + s["trace_h_sigma"] / b)  # eq. 2.5
    np.testing.assert_allclose(rate_progress(s), want, rtol=1e-12)
    assert want[2] < 0 < want[0] and want[1] > 0
    # the window to L = 0.5 is [0, 20]; the negative weight at step 20 counts as 0
    w = np.clip(want.to_numpy()[:3], 0, None)
    v = s["b_simple"].to_numpy()[:3]
    num = 5 * (v[0] * w[0] + v[1] * w[1]) + 5 * (v[1] * w[1] + v[2] * w[2])
    den = 5 * (w[0] + w[1]) + 5 * (w[1] + w[2])
    assert averaged_scale(s, "b_simple", 0.5, weight="rate") == pytest.approx(num / den)
    # ... and it is said where
    np.testing.assert_array_equal(negative_progress(s, 0.5, "rate"), [20.0])
    assert negative_progress(s, 1.0, "rate").size == 0
    # not the App. D (ε_opt) weight
    assert averaged_scale(s, "b_simple", 0.5, weight="rate") != pytest.approx(
        averaged_scale(s, "b_simple", 0.5, weight="progress"))
    # where the model is undefined (GᵀHG ≤ 0) at a checkpoint the window uses: NaN
    assert np.isnan(averaged_scale(s.assign(ghg=[1.0, -1.0, 2.0, 1.0]), "b_simple", 0.5,
                                   weight="rate"))
    # every checkpoint overshooting: no progress at all, NaN rather than a mean
    assert np.isnan(averaged_scale(s.assign(learning_rate=10.0), "b_simple", 0.5,
                                   weight="rate"))


def test_loss_weight_is_the_runs_own_loss_decrease():
    from empirical_batch.validation.experiments.noise import negative_progress

    s = _one_step_scales()
    # the logged curve falls 3.0 → 1.0 over [0, 40], rising once (into step 15)
    curve = (np.array([0, 5, 10, 15, 20, 40]), np.array([3.0, 2.4, 2.0, 2.2, 1.5, 1.0]))
    s = s.assign(eval_loss=[3.0, 2.0, 1.5, 1.0])
    got = averaged_scale(s, "b_simple", 1.5, weight="loss", curve=curve)
    t = curve[0][:5]
    v = np.interp(t, s["step"], s["b_simple"])
    dl = -np.diff(curve[1][:5])  # 0.6, 0.4, -0.2, 0.7: the rise counts negatively
    assert got == pytest.approx(np.sum(0.5 * (v[1:] + v[:-1]) * dl) / (3.0 - 1.5))
    np.testing.assert_array_equal(negative_progress(s, 1.5, "loss", curve=curve), [15.0])
    # a window ending between logged points ends at the target's loss
    got = averaged_scale(s, "b_simple", 1.2, weight="loss", curve=curve)
    end = 20 * 2 ** ((1.5 - 1.2) / (1.5 - 1.0))  # loss linear in log step on [20, 40]
    t = np.append(curve[0][:5], end)
    loss = np.append(curve[1][:5], 1.2)
    v = np.interp(t, s["step"], s["b_simple"])
    assert got == pytest.approx(np.sum(0.5 * (v[1:] + v[:-1]) * -np.diff(loss)) / 1.8)
