"""Exact expected dynamics of the noisy quadratic against independent computations."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from empirical_batch.simulate import NoisyQuadratic, search
from empirical_batch.theory import QuadraticModel

pos = st.floats(0.05, 5.0)


@st.composite
def problems(draw, max_dims=4, options=False):
    d = draw(st.integers(1, max_dims))
    h = np.array(draw(st.lists(pos, min_size=d, max_size=d)))
    c = np.array(draw(st.lists(st.sampled_from([0.0, 0.3, 1.0, 2.5]), min_size=d, max_size=d)))
    m0 = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=d, max_size=d)))
    kw = {}
    if options:
        kw["momentum"] = draw(st.sampled_from([0.0, 0.5, 0.9]))
        kw["ema"] = draw(st.sampled_from([None, 0.5, 0.9]))
    kw["precondition"] = draw(st.sampled_from([0.0, 0.5, 1.0]))
    return NoisyQuadratic(h, c, m0, **kw)


def iterate_plain(nq, lr, b, k):
    """Step-by-step recursion m <- (1 - a p h)^2 m + a^2 p^2 c / B (independent code)."""
    p = nq.curvature ** (-nq.precondition)
    m = nq.init.copy()
    out = [0.5 * nq.curvature @ m]
    for _ in range(k):
        m = (1 - lr * p * nq.curvature) ** 2 * m + lr**2 * p**2 * nq.noise / b
        out.append(0.5 * nq.curvature @ m)
    return np.array(out)


def iterate_general(nq, lr, b, k):
    """Momentum and EMA by explicit scalar recursions on the second moments.

    x = E θ_t², y = E θ_t θ_{t-1}, z = E θ_{t-1}², and with the average v:
    e = E θ_t v_t, f = E θ_{t-1} v_t, g = E v_t² (written out by hand, not via A⊗A).
    """
    beta = nq.momentum
    gam = nq.ema if nq.ema is not None else 0.0
    p = nq.curvature ** (-nq.precondition)
    hp, s2 = p * nq.curvature, p**2 * nq.noise / b
    u = 1 + beta - lr * hp
    x = y = z = e = f = g = nq.init.copy()
    out = []
    for _ in range(k + 1):
        out.append(0.5 * nq.curvature @ (g if nq.ema is not None else x))
        # θ' = u θ - β θ_ - a ξ ;  v' = γ v + (1-γ) θ'
        x1 = u * u * x - 2 * u * beta * y + beta**2 * z + lr**2 * s2
        y1 = u * x - beta * y
        z1 = x
        e1 = gam * (u * e - beta * f) + (1 - gam) * x1  # E θ' v'
        f1 = gam * e + (1 - gam) * y1  # E θ_t v_{t+1}
        g1 = gam**2 * g + 2 * gam * (1 - gam) * (u * e - beta * f) + (1 - gam) ** 2 * x1
        x, y, z, e, f, g = x1, y1, z1, e1, f1, g1
    return np.array(out)


@settings(max_examples=40, deadline=None)
@given(problems(), st.floats(0.01, 1.2), st.sampled_from([1.0, 3.0, 64.0]))
def test_closed_form_equals_recursion(nq, lr_scale, b):
    lr = lr_scale / float(np.max(nq.curvature ** (1 - nq.precondition)))
    ks = np.array([0, 1, 2, 7, 40])
    ref = iterate_plain(nq, lr, b, ks.max())[ks]
    got = nq.expected_loss(lr, b, ks)
    # rounding only: the closed form and the loop differ by a few ulps per step
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-13)


@settings(max_examples=30, deadline=None)
@given(problems(max_dims=3, options=True), st.floats(0.01, 0.9), st.sampled_from([1.0, 8.0]))
def test_momentum_ema_closed_form_equals_recursion(nq, lr_scale, b):
    lr = lr_scale / float(np.max(nq.curvature ** (1 - nq.precondition)))
    ks = np.array([0, 1, 3, 10, 33])
    ref = iterate_general(nq, lr, b, ks.max())[ks]
    got = nq.expected_loss(lr, b, ks)
    # repeated squaring vs a plain loop: rounding only (relative to the loss scale)
    scale = max(np.max(np.abs(ref)), 1e-12)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-11 * scale)


def test_momentum_three_by_three_matches_docstring_recursion():
    nq = NoisyQuadratic([2.0, 0.5], [1.0, 0.2], [1.0, 4.0], momentum=0.8)
    ref = iterate_general(nq, 0.3, 4.0, 200)
    np.testing.assert_allclose(nq.expected_loss(0.3, 4.0, np.arange(201)), ref, rtol=1e-9)
    # stationary loss: the limit of the recursion
    assert nq.stationary_loss(0.3, 4.0) == pytest.approx(
        iterate_general(nq, 0.3, 4.0, 3000)[-1], rel=1e-9
    )


def test_plain_stationary_loss_formula():
    h, c = np.array([1.0, 0.2]), np.array([0.5, 2.0])
    nq = NoisyQuadratic(h, c, 1.0)
    a, b = 0.7, 5.0
    want = 0.5 * np.sum(h * a * c / (b * h * (2 - a * h)))
    assert nq.stationary_loss(a, b) == pytest.approx(want, rel=1e-12)
    assert nq.stationary_loss(2.5, b) == np.inf


def brute_steps(nq, target, lr, b, kmax):
    """First k with loss <= target by iteration; inf for runs that diverge."""
    p = nq.curvature ** (-nq.precondition)
    act = (nq.init > 0) | (nq.noise > 0)
    if np.any(act & (np.abs(1 - lr * p * nq.curvature) >= 1)):
        return np.inf
    losses = iterate_plain(nq, lr, b, kmax)
    hit = np.flatnonzero(losses <= target)
    return float(hit[0]) if hit.size else np.inf


@settings(max_examples=40, deadline=None)
@given(problems(max_dims=5), st.floats(0.02, 2.5), st.sampled_from([1.0, 2.0, 10.0, 100.0]),
       st.floats(0.01, 1.5))
def test_steps_to_target_equals_brute_force(nq, lr_scale, b, tfrac):
    """Covers weights of both signs (directions starting below their stationary level)."""
    lr = lr_scale / float(np.max(nq.curvature ** (1 - nq.precondition)))
    # at |1 - a p h| = 1 exactly (lr_scale = 2) rounding decides between "diverges" and
    # "stable", and this reference computes a p h differently from the library
    x = lr * nq.curvature ** (-nq.precondition) * nq.curvature
    assume(np.all(np.abs(np.abs(1 - x) - 1) > 1e-9))
    target = tfrac * max(nq.initial_loss(), 0.05)
    kmax = 1500
    ref = brute_steps(nq, target, lr, b, kmax)
    for threshold in (0, np.inf):  # both exact paths: grouped by rate, and general
        with mock.patch.object(search, "GROUPED_MIN_WORK", threshold):
            got = nq.steps_to_target(target, lr, b)
        if np.isinf(ref):
            # not reached within kmax: the exact answer must be beyond it (or inf)
            assert got > kmax
        else:
            assert got == ref


def test_steps_to_target_nonmonotone_first_crossing():
    """Loss dips below the target and rises again: the first crossing is found."""
    # fast direction starts high and decays; slow noisy direction starts at 0 and rises
    nq = NoisyQuadratic([1.0, 0.01], [0.0, 1.0], [1.0, 0.0])
    losses = iterate_plain(nq, 0.5, 1.0, 4000)
    assert losses.min() < losses[-1]  # non-monotone by construction
    target = 0.5 * (losses.min() + losses[-1])
    want = float(np.flatnonzero(losses <= target)[0])
    assert nq.steps_to_target(target, 0.5, 1.0) == want
    # above the stationary level the limit is reached only transiently -> still the first
    assert nq.stationary_loss(0.5, 1.0) > target


def test_steps_to_target_broadcasts_and_inf():
    nq = NoisyQuadratic.zhang(30)
    t = 0.2 * nq.initial_loss()
    lrs = np.array([0.01, 0.1, 1.0, 2.5])
    bs = np.array([1.0, 16.0, 256.0])
    k = nq.steps_to_target(t, lrs[None, :], bs[:, None])
    assert k.shape == (3, 4)
    assert np.all(np.isinf(k[:, 3]))  # lr > 2/h_max diverges
    # brute force, all runs at once: m <- (1 - a h)^2 m + a^2 c / B
    a, b = lrs[None, :3, None], bs[:, None, None]
    m = np.broadcast_to(nq.init, (3, 3, nq.dims)).copy()
    ref = np.full((3, 3), np.inf)
    for step in range(20000):
        loss = 0.5 * m @ nq.curvature
        ref[np.isinf(ref) & (loss <= t)] = step
        m = (1 - a * nq.curvature) ** 2 * m + a**2 * nq.noise / b
    np.testing.assert_array_equal(k[:, :3], ref)
    # a target below the stationary loss is never reached
    assert nq.steps_to_target(1e-3 * nq.stationary_loss(1.0, 1.0), 1.0, 1.0) == np.inf
    assert nq.steps_to_target(t, 0.1, 16.0, max_steps=5) == np.inf


def test_best_lr_is_grid_argmin():
    nq = NoisyQuadratic.zhang(20)
    t = 0.3 * nq.initial_loss()
    lrs = np.geomspace(0.01, 1.5, 30)
    res = nq.best_lr(t, [1.0, 32.0], lrs)
    grid = nq.steps_to_target(t, lrs[None, :], np.array([1.0, 32.0])[:, None])
    np.testing.assert_array_equal(res.steps, grid.min(axis=1))
    np.testing.assert_array_equal(res.learning_rate, lrs[grid.argmin(axis=1)])
    frame = res.to_frame()
    assert list(frame.columns) == ["batch_size", "learning_rate", "steps", "examples"]
    none = nq.best_lr(1e-9, 1.0, lrs)
    assert np.isnan(none.learning_rate) and none.steps == np.inf


def test_noise_scales_along_trajectory():
    h = np.array([1.0, 0.3, 0.1])
    c = np.array([0.5, 0.5, 0.5])
    nq = NoisyQuadratic(h, c, [1.0, 2.0, 3.0])
    tr = nq.noise_scales(0.4, 8.0, [0, 5, 50])
    m = nq.second_moment(0.4, 8.0, np.array([0, 5, 50]))
    for i in range(3):
        qm = QuadraticModel(gradient=h * np.sqrt(m[i]), hessian=h, noise_cov=c)
        # the ratio-of-expectations choice: E|G|^2 = Σ h² m, E[GᵀHG] = Σ h³ m
        assert tr.b_noise[i] == pytest.approx(qm.b_noise, rel=1e-12)
        assert tr.b_simple[i] == pytest.approx(qm.b_simple, rel=1e-12)
    assert np.all(np.diff(tr.b_noise) > 0)  # the noise scale grows as the loss falls
    # H ∝ I: B_noise = B_simple = c / (h² m) exactly
    iso = NoisyQuadratic(np.full(4, 2.0), 1.0, 1.0)
    tr = iso.noise_scales(0.1, 4.0, [0, 10])
    m = iso.second_moment(0.1, 4.0, np.array([0, 10]))[:, 0]
    np.testing.assert_allclose(tr.b_noise, 1.0 / (4.0 * m), rtol=1e-12)
    np.testing.assert_allclose(tr.b_simple, tr.b_noise, rtol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"curvature": [1.0, 0.0], "noise": 1.0}, "curvature"),
        ({"curvature": [1.0, -1.0], "noise": 1.0}, "curvature"),
        ({"curvature": [1.0], "noise": -0.1}, "noise"),
        ({"curvature": [np.nan], "noise": 1.0}, "curvature"),
        ({"curvature": [1.0], "noise": np.inf}, "noise"),
        ({"curvature": [1.0], "noise": 1.0, "init": -1.0}, "init"),
        ({"curvature": [1.0, 2.0], "noise": [1.0, 2.0, 3.0]}, "noise"),
        ({"curvature": [1.0], "noise": 1.0, "momentum": 1.0}, "momentum"),
        ({"curvature": [1.0], "noise": 1.0, "ema": -0.5}, "ema"),
    ],
)
def test_bad_problem_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NoisyQuadratic(**kwargs)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda nq: nq.expected_loss(0.0, 1, 1), "lr"),
        (lambda nq: nq.expected_loss(-0.1, 1, 1), "lr"),
        (lambda nq: nq.expected_loss(np.nan, 1, 1), "lr"),
        (lambda nq: nq.expected_loss(0.1, 0, 1), "batch_size"),
        (lambda nq: nq.expected_loss(0.1, 1, -1), "steps"),
        (lambda nq: nq.expected_loss(0.1, 1, 1.5), "steps"),
        (lambda nq: nq.steps_to_target(0.0, 0.1, 1), "target"),
        (lambda nq: nq.steps_to_target(-1.0, 0.1, 1), "target"),
        (lambda nq: nq.steps_to_target(np.inf, 0.1, 1), "target"),
        (lambda nq: nq.steps_to_target(0.1, np.inf, 1), "lr"),
        (lambda nq: nq.best_lr(0.1, 1, [0.1, -0.2]), "lrs"),
        (lambda nq: nq.best_lr(0.0, 1, [0.1]), "target"),
    ],
)
def test_bad_arguments_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call(NoisyQuadratic([1.0, 0.5], 1.0))


@pytest.mark.parametrize(
    "options", [{"momentum": 0.7}, {"ema": 0.9}, {"momentum": 0.5, "ema": 0.5}]
)
def test_momentum_ema_steps_to_target_equals_scan(options):
    nq = NoisyQuadratic([1.0, 0.1, 0.02], [0.2, 0.5, 0.1], [1.0, 2.0, 1.0], **options)
    for lr, b in [(0.1, 4.0), (0.5, 32.0)]:
        losses = iterate_general(nq, lr, b, 3000)
        for frac in (0.5, 0.1, 0.03):
            target = frac * losses[0]
            hit = np.flatnonzero(losses <= target)
            want = float(hit[0]) if hit.size else np.inf
            got = nq.steps_to_target(target, lr, b, max_steps=3000)
            assert got == want


def test_inactive_direction_at_the_stability_edge():
    """A direction with no initial error and no noise may sit at a·h = 2: it is ignored.

    (Hypothesis found a 0/0 there; RuntimeWarnings from the library are errors in tests.)
    """
    nq = NoisyQuadratic([1.0, 0.5], [0.0, 0.3], [0.0, 1.0])
    got = nq.steps_to_target(0.5 * nq.initial_loss(), 2.0, 4.0)
    assert got == brute_steps(NoisyQuadratic([0.5], [0.3], [1.0]), 0.125, 2.0, 4.0, 100)


def _loss_from_moments(nq, lr, b, k):
    """The expected loss through the per-direction second moments of every configuration
    (the formulation the sums affine in 1/B replace)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return 0.5 * nq.second_moment(lr, b, k) @ nq.curvature


@settings(max_examples=40, deadline=None)
@given(problems(max_dims=6, options=True), st.floats(0.01, 2.5),
       st.sampled_from([None, 64]))
def test_expected_loss_grid_equals_moments(nq, lr_scale, dataset_size):
    """On a (B, lr, step) grid the expected loss (sums affine in 1/B for plain SGD) is
    the loss of the per-direction moments, diverging runs included (momentum too; with
    an EMA the reported loss is the average's, not the raw iterate's)."""
    assume(nq.ema is None)
    if dataset_size is not None:
        nq = NoisyQuadratic(nq.curvature, nq.noise, nq.init, momentum=nq.momentum,
                            ema=nq.ema, precondition=nq.precondition,
                            dataset_size=dataset_size)
    lr = lr_scale / float(np.max(nq.curvature ** (1 - nq.precondition)))
    lrs = lr * np.array([0.1, 0.5, 1.0, 2.0])
    bs = np.array([1.0, 3.0, 16.0, 64.0])
    ks = np.array([0, 1, 2, 7, 40, 1000, 10**6])
    grid = (lrs[None, :, None], bs[:, None, None], ks[None, None, :])
    got = np.asarray(nq.expected_loss(*grid))
    ref = _loss_from_moments(nq, *grid)
    assert got.shape == ref.shape == (4, 4, 7)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(ref))
    fin = np.isfinite(ref)
    # powers below the smallest normal double count as 0 in the sums: atol covers them
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-12, atol=1e-300)


def test_expected_loss_memory_does_not_grow_with_configurations():
    """The exact loss of a 16 x 16 x 40 grid on 20000 directions (2.6e8 direction-steps,
    2 GB as moments) stays within a few chunks of scratch."""
    import tracemalloc

    nq = NoisyQuadratic.zhang(20_000)
    lrs, bs = np.geomspace(0.01, 1.9, 16), 2.0 ** np.arange(16)
    ks = np.unique(np.geomspace(1, 1e4, 40).round())
    tracemalloc.start()
    try:
        loss = nq.expected_loss(lrs[None, :, None], bs[:, None, None], ks[None, None, :])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert loss.shape == (16, 16, ks.size) and np.all(np.isfinite(loss))
    assert peak < 100e6, f"peak {peak / 1e6:.0f} MB"
