"""Saved state round-trips and is checked before it is loaded; numbers outside a
parameter's declared domain (booleans, complex, huge integers, NaN, overflow) are
refused naming the parameter, or answered finitely."""

from __future__ import annotations

import copy
import inspect
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch import estimators, one_step, params
from empirical_batch.errors import InputError, NotFoundError
from empirical_batch.estimators import GNSEstimator, gns_two_batch
from empirical_batch.params import DOMAINS, check, removed_keywords
from empirical_batch.schedule.scheduler import BatchSizeScheduler
from empirical_batch.tradeoff import Tradeoff

# --------------------------------------------------------------------- state


def _run(est, n, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        est.update(2 + 40 / 4 + rng.normal(0, 1) ** 2, 4, 2 + 40 / 16, 16)


def test_state_dict_keeps_dataset_size_and_resumes_exactly():
    rng = np.random.default_rng(3)
    stream = [(12 + rng.normal(0, 1) ** 2, 4, 4.5 + rng.normal(0, 0.1) ** 2, 16)
              for _ in range(20)]
    whole = GNSEstimator(beta=0.9, dataset_size=64)
    first = GNSEstimator(beta=0.9, dataset_size=64)
    for row in stream:
        whole.update(*row)
    for row in stream[:10]:
        first.update(*row)
    state = first.state_dict()
    assert state["dataset_size"] == 64
    resumed = GNSEstimator()  # a fresh estimator, as after a restart
    resumed.load_state_dict(state)
    assert resumed.dataset_size == 64
    for row in stream[10:]:
        resumed.update(*row)
    assert resumed.b_simple == whole.b_simple
    assert resumed.history()["g2"].tolist() == whole.history()["g2"].tolist()


BAD_ENTRIES = [
    ("steps", -1), ("steps", 2.5), ("steps", True), ("w", -1.0), ("w2", -0.5),
    ("mean_s", math.nan), ("mean_g", math.inf), ("css", -1.0), ("beta", 1.0),
    ("beta", "0.9"), ("keep_history", "yes"), ("max_history", 0), ("dataset_size", 1),
    ("mean_g", 1 + 2j), ("history", [1, 2]), ("w", 10**400),
]


@pytest.mark.parametrize(("key", "value"), BAD_ENTRIES)
def test_load_state_dict_refuses_bad_entries_and_changes_nothing(key, value):
    est = GNSEstimator(beta=0.5)
    _run(est, 5)
    state = est.state_dict()
    target = GNSEstimator(beta=0.7, dataset_size=1000)
    _run(target, 3, seed=1)
    before = copy.deepcopy(target.__dict__)
    state[key] = value
    with pytest.raises(InputError, match=key.split("_")[0]):
        target.load_state_dict(state)
    assert target.__dict__.keys() == before.keys()
    for k, v in before.items():
        if k == "_history":
            assert {c: list(d) for c, d in target._history.items()} == {
                c: list(d) for c, d in v.items()}
        else:
            assert target.__dict__[k] == v, k


def test_load_state_dict_refuses_missing_entries_and_ragged_history():
    est = GNSEstimator()
    _run(est, 3)
    state = est.state_dict()
    del state["mean_s"]
    with pytest.raises(NotFoundError, match="mean_s"):
        GNSEstimator().load_state_dict(state)
    state = est.state_dict()
    state["history"]["g2"].append(1.0)
    with pytest.raises(InputError, match="length"):
        GNSEstimator().load_state_dict(state)
    with pytest.raises(InputError, match="dict"):
        GNSEstimator().load_state_dict([1, 2])


def test_scheduler_load_state_dict_checks_first():
    sched = BatchSizeScheduler.__new__(BatchSizeScheduler)  # the state alone matters here
    sched.examples, sched.steps = 96.0, 3
    sched._apply = lambda: None
    for bad in ({"examples": -5.0, "steps": 1}, {"examples": 1.0, "steps": -1},
                {"examples": "x", "steps": 1}, {"steps": 1}, {"examples": 1.0, "steps": 1.5}):
        with pytest.raises(InputError):
            sched.load_state_dict(bad)
        assert (sched.examples, sched.steps) == (96.0, 3)
    sched.load_state_dict({"examples": 128, "steps": 4})
    assert (sched.examples, sched.steps) == (128.0, 4)


def test_every_load_state_dict_in_the_library_is_checked():
    """A load_state_dict added later must validate too: this lists them all."""
    import pathlib

    root = pathlib.Path(estimators.__file__).parent
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if "def load_state_dict" in p.read_text())
    assert found == ["estimators.py", "integrations/adaptive.py", "integrations/engine.py",
                     "integrations/lightning.py", "integrations/steps.py", "measure/_common.py",
                     "schedule/scheduler.py"]


# ----------------------------------------------------------- declared domains

# (function, keyword arguments that are valid, the parameter checked against DOMAINS)
CORE = [
    (one_step.eps_opt, {"batch_size": 8.0, "eps_max": 1.0, "b_noise": 4.0}, "batch_size"),
    (one_step.eps_opt, {"batch_size": 8.0, "eps_max": 1.0, "b_noise": 4.0}, "eps_max"),
    (one_step.eps_opt, {"batch_size": 8.0, "eps_max": 1.0, "b_noise": 4.0}, "b_noise"),
    (one_step.eps_opt, {"batch_size": 8.0, "eps_max": 1.0, "b_noise": 4.0,
                        "momentum": 0.5}, "momentum"),
    (one_step.dl_opt, {"batch_size": 8.0, "dl_max": 1.0, "b_noise": 4.0}, "dl_max"),
    (one_step.effective_learning_rate, {"eps": 0.1, "momentum": 0.5}, "eps"),
    (one_step.effective_learning_rate, {"eps": 0.1, "momentum": 0.5}, "momentum"),
    (one_step.inverse_batch, {"batch_size": 1.0, "dataset_size": 100}, "dataset_size"),
    (Tradeoff, {"s_min": 100.0, "e_min": 800.0}, "s_min"),
    (Tradeoff, {"s_min": 100.0, "e_min": 800.0}, "e_min"),
    (Tradeoff(100.0, 800.0).steps, {"batch_size": 8.0}, "batch_size"),
    (Tradeoff(100.0, 800.0).examples, {"batch_size": 8.0}, "batch_size"),
    (Tradeoff.from_b_crit, {"b_crit": 8.0, "s_min": 10.0}, "b_crit"),
    (gns_two_batch, {"sq_norm_small": 12.0, "b_small": 4.0, "sq_norm_big": 4.5,
                     "b_big": 16.0}, "sq_norm_small"),
    (gns_two_batch, {"sq_norm_small": 12.0, "b_small": 4.0, "sq_norm_big": 4.5,
                     "b_big": 16.0}, "b_small"),
    (gns_two_batch, {"sq_norm_small": 12.0, "b_small": 1.0, "sq_norm_big": 4.5,
                     "b_big": 2.0, "dataset_size": 64}, "dataset_size"),
    (GNSEstimator, {"beta": 0.9}, "beta"),
]


def _power_law(level):
    from empirical_batch.fit import fit_power_law

    return fit_power_law([1, 2, 4, 8], [3.0, 6.1, 11.9, 24.0], level=level)


def _interval(level):
    est = GNSEstimator()
    est.update(12.0, 4, 4.5, 16)
    est.update(13.0, 4, 4.4, 16)
    return est.b_simple_interval(level)


CORE += [(_power_law, {"level": 0.9}, "level"), (_interval, {"level": 0.9}, "level")]


def _edges(dom):
    """Values just inside and just outside the declared domain."""
    inside, outside = [], [math.nan, math.inf, True, 1 + 1j, "1"]
    lo, hi = dom.low, dom.high
    if math.isfinite(lo):
        (outside if dom.low_open else inside).append(lo)
        outside.append(lo - 1.0)
        inside.append(lo + (1.0 if dom.integer else min(0.5, (hi - lo) / 2)))
    if math.isfinite(hi):
        (outside if dom.high_open else inside).append(hi)
        outside.append(hi + 1.0)
    if dom.integer:
        outside.append(lo + 1.5 if math.isfinite(lo) else 0.5)
    return inside, outside


@pytest.mark.parametrize(("func", "kwargs", "name"), CORE)
def test_declared_domains_and_validation_agree(func, kwargs, name):
    """Every value the declaration refuses, the function refuses naming the parameter;
    every value it allows (at and next to the ends) the function accepts."""
    inside, outside = _edges(DOMAINS[name])
    for v in inside:
        func(**{**kwargs, name: v})
    for v in outside:
        with pytest.raises(InputError, match=name):
            func(**{**kwargs, name: v})


def test_domain_table_lists_every_declaration():
    rows = params.domain_table()
    assert [r[0] for r in rows] == sorted(DOMAINS)
    assert dict((r[0], r[1]) for r in rows)["momentum"] == "real in [0, 1)"
    assert str(DOMAINS["batch_size"]) == "positive real"
    with pytest.raises(NotFoundError, match="declared"):
        check("no_such_parameter", 1.0)


def test_removed_keywords_name_their_replacement():
    @removed_keywords(ci="level")
    def f(*, level=0.95):
        return level

    with pytest.raises(TypeError, match=r"f\(\): the keyword ci= was removed in 0\.4; use level="):
        f(ci=0.9)
    with pytest.raises(InputError, match="ci= was removed"):
        f(ci=0.9, level=0.9)
    assert f(level=0.8) == 0.8
    assert inspect.signature(f).parameters.keys() == {"level"}


# --------------------------------------------------------------- numeric domain

odd = st.one_of(
    st.booleans(), st.complex_numbers(allow_nan=False, allow_infinity=False).filter(
        lambda z: z.imag != 0),
    st.integers(min_value=2**1024, max_value=2**1100), st.just(math.nan),
    st.just(math.inf), st.just(-math.inf), st.text(max_size=3), st.none(),
)


@settings(max_examples=60, deadline=None)
@given(v=odd, which=st.sampled_from(["batch_size", "eps_max", "b_noise"]))
def test_odd_numbers_are_refused_naming_the_parameter(v, which):
    kwargs = {"batch_size": 8.0, "eps_max": 1.0, "b_noise": 4.0, which: v}
    with pytest.raises(InputError, match=which):
        one_step.eps_opt(**kwargs)
    with pytest.raises(InputError, match="batch_size"):
        Tradeoff(1.0, 2.0).steps(v if which == "batch_size" else [v])


big = st.floats(min_value=1e-300, max_value=1.7e308, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(s_min=big, e_min=big, b=big)
def test_tradeoff_near_the_float_limits_is_finite_or_refused(s_min, e_min, b):
    try:
        t = Tradeoff(s_min, e_min)
    except InputError as exc:
        assert "s_min" in str(exc) or "e_min" in str(exc)
        return
    for method, exact in ((t.steps, s_min + e_min / b), (t.examples, e_min + s_min * b)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                value = method(b)
            except InputError as exc:  # only where the exact answer is beyond a float
                assert "batch_size" in str(exc) and exact > 1e307
                continue
        assert math.isfinite(value) and math.isclose(value, exact, rel_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(s=big, g=big, bs=st.floats(1e-300, 1e300), ratio=st.floats(1.001, 1e6))
def test_two_batch_estimates_do_not_overflow_in_intermediates(s, g, bs, ratio):
    bb = bs * ratio
    try:
        g2, tr = gns_two_batch(s, bs, g, bb)
    except InputError as exc:
        assert "overflow" in str(exc)
        return
    assert math.isfinite(g2) and math.isfinite(tr)
    est = GNSEstimator(beta=0.0)
    assert est.update(s, bs, g, bb) == (g2, tr)


def test_shape_mismatch_and_huge_batches_name_the_parameters():
    with pytest.raises(InputError, match="b_small"):
        gns_two_batch([1.0, 2.0], [1.0, 2.0, 3.0], 0.5, 8.0)
    with pytest.raises(InputError, match="batch_size"):
        one_step.eps_opt([1.0, 2.0], [1.0, 2.0, 3.0], 1.0)
    # a batch size past int64 is a float like any other
    assert one_step.eps_opt(2**70, 1.0, 1.0) == pytest.approx(1.0)
    with pytest.raises(InputError, match="batch_size"):
        one_step.eps_opt(10**400, 1.0, 1.0)
    with pytest.raises(InputError, match="noise_std"):
        one_step.sign_descent_eps_opt(4.0, [1.0, 1.0], np.eye(2), [1.0, 1.0, 1.0])


def test_sign_descent_without_positive_curvature_has_no_optimal_rate():
    with pytest.raises(InputError, match="hessian has curvature <= 0"):
        one_step.sign_descent_eps_opt(16.0, [1.0, -0.5], -np.eye(2), 1.0)


# ------------------------------------------------------ planner and simulator
from empirical_batch.planning import Hardware, plan  # noqa: E402
from empirical_batch.simulate import NoisyQuadratic, greedy_run, simulate_sweep  # noqa: E402

odd_count = st.one_of(
    odd, st.integers(min_value=2**54, max_value=2**80), st.just(1e308),
    st.floats(0.1, 0.9), st.integers(max_value=0))


def _refused_or_finite(call, name):
    """The call answers with finite numbers (no warning) or refuses naming ``name``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            out = call()
        except InputError as exc:
            assert name in str(exc), (name, str(exc))
            return None
    return out


@settings(max_examples=80, deadline=None)
@given(v=odd_count, which=st.sampled_from(["batch_sizes", "devices"]))
def test_planner_counts_are_refused_or_planned(v, which):
    t = Tradeoff(100.0, 6400.0)
    df = _refused_or_finite(lambda: plan(t, **{which: [v]}).frame, which)
    if df is not None:
        assert np.isfinite(df[["steps", "wall_hours", "cost"]].to_numpy()).all()


@settings(max_examples=60, deadline=None)
@given(v=odd_count, which=st.sampled_from(["max_devices", "max_device_batch"]))
def test_hardware_counts_are_refused_or_kept(v, which):
    _refused_or_finite(lambda: plan(Tradeoff(100.0, 6400.0), Hardware(**{which: v})), which)


@settings(max_examples=60, deadline=None)
@given(v=odd_count)
def test_simulator_step_counts_are_refused_naming_them(v):
    nq = NoisyQuadratic([1.0, 0.1], 1.0, 1.0)
    out = _refused_or_finite(lambda: simulate_sweep(nq, [2, 4], [0.1, 0.5], v, n_points=5),
                             "max_steps")
    if out is not None:
        assert isinstance(v, int) and 1 <= v <= 2**53


@settings(max_examples=60, deadline=None)
@given(v=st.one_of(odd, st.just(2**70), st.just(1e300)),
       which=st.sampled_from(["curvature", "noise", "init"]))
def test_noisy_quadratic_near_the_float_limits(v, which):
    kwargs = {"curvature": [1.0, 0.1], "noise": 1.0, "init": 1.0}
    kwargs[which] = v if which != "curvature" else [v, 0.1]
    q = _refused_or_finite(lambda: NoisyQuadratic(**kwargs), which)
    if q is not None:
        r = _refused_or_finite(lambda: greedy_run(q, 0.01, np.array([2.0, 8.0]),
                                                  max_steps=50), "target")
        assert r is None or np.all(np.isfinite(r["examples"]) | np.isinf(r["steps"]))


def test_greedy_run_batch_sizes_are_real_numbers():
    q = NoisyQuadratic([1.0, 0.1], 1.0, 1.0)
    for bad in ([True, 4.0], [1 + 1j], ["8"], [10**400], [math.nan]):
        with pytest.raises(InputError, match="batch"):
            greedy_run(q, 0.1, bad, max_steps=10)
    assert greedy_run(q, 0.1, [math.inf, 4], max_steps=100)["steps"][0] >= 1


def test_removed_keywords_fail_naming_the_new_one():
    from empirical_batch.budget import fit_fixed_budget
    from empirical_batch.fit import (
        critical_batch_curve,
        fit_lr_scaling,
        fit_power_law,
        fit_tradeoff,
    )
    from empirical_batch.simulate import monte_carlo_sgd
    from empirical_batch.simulate import simulate_sweep as sweep

    for func in (fit_power_law, fit_tradeoff, fit_lr_scaling, critical_batch_curve,
                 fit_fixed_budget):
        with pytest.raises(TypeError, match=r"ci= was removed in 0\.4; use level="):
            func(None, ci=0.9)
        assert "ci" not in inspect.signature(func).parameters
    nq = NoisyQuadratic([1.0, 0.1], 1.0, 1.0)
    for func in (sweep, monte_carlo_sgd):
        with pytest.raises(TypeError, match=r"seeds= was removed in 0\.4; use n_seeds="):
            func(nq, [2, 4], [0.1], 10, seeds=1)
        assert "seeds" not in inspect.signature(func).parameters
    law = fit_power_law([1, 2, 4, 8], [3.0, 6.1, 11.9, 24.0], level=0.9)
    assert law.level == 0.9


def test_the_api_reference_shows_the_declared_domains():
    import pathlib

    api = (pathlib.Path(__file__).parents[1] / "docs" / "api"
           / "empirical_batch.params.md").read_text()
    assert params.markdown_table() in api


@settings(max_examples=150, deadline=None)
@given(scale_y=st.floats(1e-300, 1e300), scale_b=st.floats(1e-300, 1e300))
def test_regression_and_many_estimates_at_any_scale(scale_y, scale_b):
    """|G|^2 = 2, tr(Σ) = 40 at B = 4, 8, 16, rescaled: exact up to rounding, or
    refused as an overflow, never inf or a warning."""
    from empirical_batch.estimators import gns_many, gns_regression

    b = np.array([4.0, 8.0, 16.0]) * scale_b
    y = (2 + 40 / np.array([4.0, 8.0, 16.0])) * scale_y
    for call in (lambda: gns_regression(y, b),
                 lambda: gns_many(y[0], y[1], b[0], n=2)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                g2, tr = call()
            except InputError as exc:
                assert "overflow" in str(exc)
                continue
        assert g2 == pytest.approx(2 * scale_y, rel=1e-9, abs=0)
        assert math.isfinite(tr)


def test_collector_and_callback_states_are_checked_before_loading():
    torch = pytest.importorskip("torch")
    from empirical_batch.measure._common import checked_skipped

    good = {"estimator": GNSEstimator().state_dict(), "skipped": {"non_finite": 2}}
    assert checked_skipped(good) == {"non_finite": 2}
    for bad in ({"estimator": {}}, {"estimator": {}, "skipped": {"non_finite": -1}},
                {"estimator": {}, "skipped": {"non_finite": 1.5}}, [1]):
        with pytest.raises((InputError, NotFoundError)):
            checked_skipped(bad)
    pytest.importorskip("lightning")
    from empirical_batch.integrations.lightning import NoiseScaleCallback

    cb = NoiseScaleCallback(8)
    state = {"estimator": GNSEstimator().state_dict(), "skipped": {"non_finite": 0}}
    state["estimator"]["steps"] = -3
    with pytest.raises(InputError, match="steps"):
        cb.load_state_dict(state)
    assert cb.state_dict() == {}
    del torch


@settings(max_examples=100, deadline=None)
@given(g=st.floats(1e-150, 1e300), h=st.floats(1e-150, 1e300), c=st.floats(0, 1e300))
def test_quadratic_model_near_the_float_limits(g, h, c):
    from empirical_batch.theory import QuadraticModel

    m = _refused_or_finite(lambda: QuadraticModel([g, 1.0], [h, 2.0], [c, 1.0]), "rescale")
    if m is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            values = (m.b_noise, m.b_simple, m.eps_max, m.eps_opt(4.0), m.dl_opt(4.0))
        assert all(math.isfinite(v) and v >= 0 for v in values)


def test_step_counters_and_batch_growth_states_are_checked_first():
    pytest.importorskip("torch")
    from empirical_batch.integrations.steps import StepAccount

    acc = StepAccount()
    before = acc.state_dict()
    for bad in ({"examples": -1}, {"steps": 1.5}, {"unit": "bytes"}, {"unit_fixed": "yes"},
                {"token_rule": "half"}, {"secret": 1}, {"examples": 3, "tokens": True}):
        with pytest.raises(InputError):
            acc.load_state_dict(bad)
        assert acc.state_dict() == before
    acc.load_state_dict({**before, "examples": 12, "steps": 3})
    assert (acc.examples, acc.steps) == (12, 3)
    from empirical_batch.integrations.adaptive import BatchGrowth

    growth = BatchGrowth.__new__(BatchGrowth)  # the state alone matters here
    growth.accumulation, growth.last_change_at, growth.changes = 2, 5, []
    for bad in ({"accumulation": 0, "last_change_at": 0, "changes": []},
                {"accumulation": 2, "last_change_at": -1, "changes": []},
                {"accumulation": 2.5, "last_change_at": 0, "changes": []},
                {"accumulation": 2, "last_change_at": 0, "changes": "none"},
                {"accumulation": 2}):
        with pytest.raises(InputError):
            growth.load_state_dict(bad)
        assert (growth.accumulation, growth.last_change_at, growth.changes) == (2, 5, [])


def test_shape_mismatches_in_the_planner_and_tradeoff_name_the_parameters():
    with pytest.raises(InputError, match=r"batch_size .* devices"):
        Hardware().step_seconds([1, 2], [1, 2, 4])
    with pytest.raises(InputError, match=r"steps .* examples"):
        Tradeoff(1.0, 2.0).residual([3.0, 4.0], [5.0, 6.0, 7.0])
    with pytest.raises(InputError, match="dataset_size must be one number"):
        one_step.inverse_batch([1.0, 2.0], dataset_size=[3, 4, 5])
