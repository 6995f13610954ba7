"""GradientNoiseScale: exact per-step norms, unbiased recovery, AMP, Adam, errors."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.measure import GradientNoiseScale  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402

B, K = 8, 4


def _run(tracker, m, x, y, steps, seed=0, scale=1.0, inf_at=None, sizes=None):
    """Accumulate K micro-batches of B (drawn with replacement) per step; return indices."""
    rng = np.random.default_rng(seed)
    drawn = []
    for t in range(steps):
        idx = rng.integers(0, orc.N, size=(K, B))
        drawn.append(idx)
        for j in range(K):
            loss = orc.loss_fn(m(x[idx[j]]), y[idx[j]]) / K * scale
            if inf_at == t and j == 1:
                loss = loss * float("inf")
            loss.backward()
        tracker.step(loss_scale=scale if scale != 1.0 else None)
        m.zero_grad()
    return drawn


@pytest.fixture
def setup():
    x, y = orc.dataset()
    return orc.model(), x, y


def test_per_step_norms_are_exact(setup):
    m, x, y = setup
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.9)
    drawn = _run(gns, m, x, y, steps=3)
    g = orc.per_example_grads(m, x, y)
    df = gns.to_frame()
    for t, idx in enumerate(drawn):
        micro = g[idx].mean(1)  # (K, D+1)
        np.testing.assert_allclose(df.sq_norm_small[t], np.mean(np.sum(micro**2, 1)), rtol=1e-10)
        np.testing.assert_allclose(df.sq_norm_big[t], np.sum(micro.mean(0) ** 2), rtol=1e-10)
        assert df.b_small[t] == B and df.b_big[t] == B * K


def test_recovers_exact_b_simple(setup):
    m, x, y = setup
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.99)
    _run(gns, m, x, y, steps=600, seed=1)
    g2, tr = orc.exact(m, x, y)
    orc.check_recovers(gns.to_frame(), g2, tr)
    # the EMA itself (n_eff ≈ 200) lands within 4 of its own standard errors
    assert abs(gns.b_simple - tr / g2) < 4 * gns.b_simple_se


def test_loss_convention_mean(setup):
    """Plain micro-batch means (no /k) with loss_convention="mean" give the same norms."""
    m, x, y = setup
    a = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K)
    drawn = _run(a, m, x, y, steps=2, seed=3)
    a.remove()
    b = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, loss_convention="mean")
    for idx in drawn:
        for j in range(K):
            orc.loss_fn(m(x[idx[j]]), y[idx[j]]).backward()
        b.step()
        m.zero_grad()
    fa, fb = a.to_frame(), b.to_frame()
    for col in ("sq_norm_small", "sq_norm_big"):
        np.testing.assert_allclose(fb[col], fa[col], rtol=1e-12)


class FakeScaler:
    """GradScaler-like: multiplies the loss by a power of two."""

    def __init__(self, scale):
        self.scale = scale

    def is_enabled(self):
        return True

    def get_scale(self):
        return self.scale


def test_amp_scale_equals_unscaled_and_skips_inf(setup):
    m, x, y = setup
    ref = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.9)
    _run(ref, m, x, y, steps=5, seed=4)
    ref.remove()
    scaled = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.9,
                                scaler=FakeScaler(2.0**12))
    rng = np.random.default_rng(4)
    for t in range(6):
        idx = rng.integers(0, orc.N, size=(K, B)) if t != 2 else np.zeros((K, B), int)
        for j in range(K):
            loss = orc.loss_fn(m(x[idx[j]]), y[idx[j]]) / K * 2.0**12
            if t == 2 and j == 0:
                loss = loss * float("nan")
            loss.backward()
        scaled.step()
        m.zero_grad()
    assert scaled.skipped == {"non_finite": 1, "no_optimizer_state": 0, "single_backward": 0,
                              "accumulation_mismatch": 0}
    assert scaled.skipped_steps == 1
    # power-of-two scale: unscaling is exact, so the estimates agree to rounding
    assert scaled.estimator.steps == ref.estimator.steps == 5
    assert scaled.b_simple == pytest.approx(ref.b_simple, rel=1e-12)
    assert scaled.g2 == pytest.approx(ref.g2, rel=1e-12)


def test_ragged_step_uses_harmonic_mean(setup):
    m, x, y = setup
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K)
    sizes = [8, 8, 8, 3]
    for s in sizes:
        (orc.loss_fn(m(x[:s]), y[:s]) / K).backward()
    gns.step(micro_batch_size=sizes)
    row = gns.to_frame().iloc[0]
    hm = 4 / sum(1 / s for s in sizes)
    assert row.b_small == pytest.approx(hm) and row.b_big == pytest.approx(4 * hm)
    with pytest.raises(ValueError, match="4 backward passes"):
        for s in sizes:
            (orc.loss_fn(m(x[:s]), y[:s]) / K).backward()
        gns.step(micro_batch_size=[8, 8])


def test_preconditioned_matches_numpy(setup):
    m, x, y = setup
    opt = torch.optim.Adam(m.parameters(), lr=0.0, eps=1e-3)
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, optimizer=opt,
                             preconditioned=True)
    _run(gns, m, x, y, steps=1, seed=5)  # no Adam state yet: skipped
    assert gns.skipped["no_optimizer_state"] == 1 and gns.estimator.steps == 0
    gns.remove()
    for j in range(K):
        (orc.loss_fn(m(x[j * B:(j + 1) * B]), y[j * B:(j + 1) * B]) / K).backward()
    opt.step()  # lr = 0: parameters unchanged, state created
    m.zero_grad()
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, optimizer=opt,
                             preconditioned=True)
    st = [opt.state[p] for p in (m.weight, m.bias)]
    beta2 = opt.param_groups[0]["betas"][1]
    denom = np.concatenate([
        (s["exp_avg_sq"].numpy().ravel() / (1 - beta2 ** float(s["step"]))) ** 0.5 + 1e-3
        for s in st])
    drawn = _run(gns, m, x, y, steps=2, seed=6)
    g = orc.per_example_grads(m, x, y) / denom
    df = gns.to_frame()
    for t, idx in enumerate(drawn):
        micro = g[idx].mean(1)
        np.testing.assert_allclose(df.sq_norm_small[t], np.mean(np.sum(micro**2, 1)), rtol=1e-10)
        np.testing.assert_allclose(df.sq_norm_big[t], np.sum(micro.mean(0) ** 2), rtol=1e-10)


def test_params_subset(setup):
    m, x, y = setup
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, params=["bias"])
    drawn = _run(gns, m, x, y, steps=1, seed=7)
    g = orc.per_example_grads(m, x, y)[:, -1:]
    micro = g[drawn[0]].mean(1)
    np.testing.assert_allclose(gns.to_frame().sq_norm_small[0], np.mean(np.sum(micro**2, 1)),
                               rtol=1e-10)


def test_state_dict_round_trip(setup):
    m, x, y = setup
    a = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.9)
    _run(a, m, x, y, steps=4, seed=8)
    state = a.state_dict()
    a.remove()
    b = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.5)
    b.load_state_dict(state)
    _run(b, m, x, y, steps=3, seed=9)
    b.remove()
    c = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.9)
    _run(c, m, x, y, steps=4, seed=8)
    _run(c, m, x, y, steps=3, seed=9)
    assert b.state_dict() == c.state_dict()


def test_bad_input(setup):
    m, x, y = setup
    with pytest.raises(ValueError, match="accumulation_steps must be >= 1"):
        GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=0)
    with pytest.raises(ValueError, match="accumulation_steps must be >= 2"):
        GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=1)
    with pytest.raises(ValueError, match="micro_batch_size must be >= 1"):
        GradientNoiseScale(m, micro_batch_size=0, accumulation_steps=2)
    with pytest.raises(TypeError, match="micro_batch_size"):
        GradientNoiseScale(m, micro_batch_size=2.5, accumulation_steps=2)
    with pytest.raises(ValueError, match="loss_convention"):
        GradientNoiseScale(m, micro_batch_size=2, accumulation_steps=2, loss_convention="sum")
    frozen = orc.model()
    frozen.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        GradientNoiseScale(frozen, micro_batch_size=2, accumulation_steps=2)
    with pytest.raises(TypeError, match="optimizer"):
        GradientNoiseScale(m, micro_batch_size=2, accumulation_steps=2, preconditioned=True)
    gns = GradientNoiseScale(m, micro_batch_size=2, accumulation_steps=2)
    with pytest.raises(RuntimeError, match="before any backward"):
        gns.step()
    orc.loss_fn(m(x[:2]), y[:2]).backward()
    assert gns.step() is None and gns.skipped["single_backward"] == 1  # skipped, counted
    with pytest.raises(ValueError, match="loss_scale"):
        for _ in range(2):
            orc.loss_fn(m(x[:2]), y[:2]).backward()
        gns.step(loss_scale=-1.0)


def _scaler_run(device, dtype_model, autocast):
    """Train-loop shape with a real torch.amp.GradScaler; returns the estimator frame."""
    x, y = orc.dataset()
    m = orc.model().to(device=device, dtype=dtype_model)
    x, y = x.to(device, dtype_model), y.to(device, dtype_model)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0**14)
    opt = torch.optim.SGD(m.parameters(), lr=0.0)
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, scaler=scaler)
    rng = np.random.default_rng(12)
    for _ in range(4):
        idx = rng.integers(0, orc.N, size=(K, B))
        for j in range(K):
            with torch.autocast(device.type, enabled=autocast):
                loss = orc.loss_fn(m(x[idx[j]]), y[idx[j]]) / K
            scaler.scale(loss).backward()
        gns.step()  # before unscale_/step: .grad still scaled
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    return gns.to_frame()


def test_real_grad_scaler_cpu():
    scaled = _scaler_run(torch.device("cpu"), torch.float32, autocast=False)
    x, y = orc.dataset()
    m = orc.model().float()
    ref = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K)
    rng = np.random.default_rng(12)
    for _ in range(4):
        idx = rng.integers(0, orc.N, size=(K, B))
        for j in range(K):
            (orc.loss_fn(m(x[idx[j]].float()), y[idx[j]].float()) / K).backward()
        ref.step()
        m.zero_grad()
    # power-of-two scale in float32: unscaling is exact up to float32 rounding of the
    # scaled backward (~1e-6 relative)
    for col in ("sq_norm_small", "sq_norm_big"):
        np.testing.assert_allclose(scaled[col], ref.to_frame()[col], rtol=1e-5)


@pytest.mark.gpu
def test_autocast_fp16_cuda_matches_fp32():
    amp = _scaler_run(torch.device("cuda"), torch.float32, autocast=True)
    full = _scaler_run(torch.device("cuda"), torch.float32, autocast=False)
    # fp16 matmuls: ~1e-3 relative error per gradient entry
    for col in ("sq_norm_small", "sq_norm_big"):
        np.testing.assert_allclose(amp[col], full[col], rtol=1e-2)


def test_preconditioned_collector_measures_p_sigma_p(setup):
    """preconditioned=True estimates tr(PΣP)/|PG|² (the noise of the update PG_est), not
    the App. C scale tr(PΣ)/GᵀPG of docs/concepts.md; with Adam's scales spread over
    orders of magnitude the two differ, and the collector lands on the first."""
    m, x, y = setup
    opt = torch.optim.Adam(m.parameters(), lr=0.0, eps=1e-3)
    for j in range(K):
        (orc.loss_fn(m(x[j * B:(j + 1) * B]), y[j * B:(j + 1) * B]) / K).backward()
    opt.step()  # lr = 0: parameters unchanged, state created
    m.zero_grad()
    beta2 = opt.param_groups[0]["betas"][1]
    spread = np.logspace(-2, 2, orc.D + 1)  # the second moments, one per parameter
    opt.state[m.weight]["exp_avg_sq"].copy_(torch.tensor(spread[:-1]).reshape(1, -1))
    opt.state[m.bias]["exp_avg_sq"].copy_(torch.tensor(spread[-1:]))
    step = float(opt.state[m.weight]["step"])
    p = 1.0 / ((spread / (1 - beta2 ** step)) ** 0.5 + 1e-3)
    g = orc.per_example_grads(m, x, y)
    mean = g.mean(0)
    cov_diag = ((g - mean) ** 2).mean(0)
    pg2, tr_psp = float(np.sum((p * mean) ** 2)), float(np.sum(p**2 * cov_diag))
    app_c = float(np.sum(p * cov_diag) / np.sum(p * mean**2))  # tr(PΣ)/GᵀPG
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, optimizer=opt,
                             preconditioned=True)
    _run(gns, m, x, y, steps=600, seed=11)
    frame = gns.to_frame()
    orc.check_recovers(frame, pg2, tr_psp)
    estimate = frame["trace_sigma"].mean() / frame["g2"].mean()
    assert abs(estimate - app_c) > 0.5 * app_c, (estimate, tr_psp / pg2, app_c)
