"""The shared-rate fast path of the exact crossing search against exact arithmetic.

``first_crossing_affine`` finds the smallest integer k with
P_r(k) = sum_i (a_i + c_r s_i) rho_i^k <= y_r for many runs r that share the rates.
P is decreasing (weights >= 0), so an answer k is exact iff P(k - 1) > y >= P(k);
both sides are checked here in 60-digit arithmetic (mpmath) with rho_i = exp(logrho_i),
the rates the function is documented to use. A run may come back NaN (left to the
general path) only when the target is within the documented rounding margin of P at
the answer; anything else is a failure.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch.simulate import NoisyQuadratic, search
from empirical_batch.simulate import _crossing as cr
from empirical_batch.simulate._crossing import (
    NEG_BIG,
    Workspace,
    first_crossing,
    first_crossing_affine,
    nonneg_rows,
)

MP = mpmath.MPContext()  # a private 60-digit context: the global mpmath one is untouched
MP.dps = 60
U = np.finfo(float).eps / 2


def exact_p(a, s, c, logrho, k):
    """P(k) in 60-digit arithmetic; a rate of 0 (logrho = NEG_BIG) is exactly 0."""
    tot = MP.mpf(0)
    for ai, si, li in zip(a, s, logrho, strict=True):
        w = MP.mpf(float(ai)) + MP.mpf(float(c)) * MP.mpf(float(si))
        if li <= NEG_BIG:
            rk = MP.mpf(1) if k == 0 else MP.mpf(0)
        else:
            rk = MP.exp(MP.mpf(float(li)) * k)
        tot += w * rk
    return tot


def margin(a, s, c, logrho, k):
    """Above the documented decision margin at k, (d + 3000) u (A + |c| S), for d >= 1."""
    pos = exact_p(a, np.zeros_like(s), 0.0, logrho, k) + abs(c) * exact_p(
        s, np.zeros_like(s), 0.0, logrho, k
    )
    return 4 * (len(a) + 1600) * U * pos + MP.mpf(1e-300)


def check(a, s, c, y, logrho, got):
    """got is exact, or NaN with the target within the margin of P near the answer."""
    y = MP.mpf(float(y))
    if np.isnan(got):
        # find the exact answer by doubling + bisection on the exact P
        lo, hi = 0, 1
        while exact_p(a, s, c, logrho, hi) > y:
            lo, hi = hi, 2 * hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if exact_p(a, s, c, logrho, mid) <= y else (mid, hi)
        near = [k for k in (hi - 2, hi - 1, hi, hi + 1) if k >= 0]
        assert any(
            abs(exact_p(a, s, c, logrho, k) - y) <= margin(a, s, c, logrho, k) for k in near
        ), f"NaN although the answer {hi} is clear of the rounding margin"
        return "nan"
    k = int(got)
    assert got == k and k >= 0
    assert exact_p(a, s, c, logrho, k) <= y, f"P({k}) > y: answer too small"
    if k > 0:
        assert exact_p(a, s, c, logrho, k - 1) > y, f"P({k - 1}) <= y: answer too large"
    return "exact"


rates = st.one_of(
    st.just(0.0),
    st.floats(0.0, 0.9),
    st.floats(0.9, 0.999),
    st.floats(0.999, 0.99995),
)


@st.composite
def shared_problems(draw):
    d = draw(st.integers(1, 5))
    rho = np.array(draw(st.lists(rates, min_size=d, max_size=d)))
    a = np.array(draw(st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0, 3.0]),
                               min_size=d, max_size=d)))
    s = np.array(draw(st.lists(st.sampled_from([0.0, 0.05, 0.5, 1.0]),
                               min_size=d, max_size=d)))
    if not np.any((a > 0) | (s > 0)):
        a[0] = 1.0
    pos = s > 0
    q = float(np.min(a[pos] / s[pos])) if pos.any() else 10.0
    n = draw(st.integers(1, 6))
    # c in [-q, q]: weights a + c s stay >= 0 (c = -q puts a weight exactly at 0)
    c = np.array(draw(st.lists(st.floats(-1.0, 1.0), min_size=n, max_size=n))) * q
    c[0] = -q if draw(st.booleans()) else c[0]
    frac = np.array(draw(st.lists(st.floats(1e-6, 1.5), min_size=n, max_size=n)))
    return a, s, c, frac, rho


def logs(rho):
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(rho), NEG_BIG)


@settings(max_examples=60, deadline=None)
@given(shared_problems())
def test_affine_fast_path_is_exact(prob):
    a, s, c, frac, rho = prob
    ok = nonneg_rows(a, s, c)
    c = c[ok]
    p0 = a.sum() + c * s.sum()
    y = frac[ok] * p0
    keep = y > 0
    c, y = c[keep], y[keep]
    lr = logs(rho)
    got = first_crossing_affine(a, s, c, y, lr, rho)
    for r in range(c.size):
        check(a, s, c[r], y[r], lr, got[r])


@settings(max_examples=40, deadline=None)
@given(shared_problems(), st.integers(1, 400), st.sampled_from([-1, 0, 1]))
def test_affine_fast_path_at_the_rounding_boundary(prob, k_t, ulps):
    """Target = P(k_t) rounded to a double, nudged by an ulp: exact or NaN, never wrong."""
    a, s, c, _frac, rho = prob
    c = c[nonneg_rows(a, s, c)][:1]
    lr = logs(rho)
    if c.size == 0:
        return
    y = float(exact_p(a, s, c[0], lr, k_t))
    if ulps:
        y = np.nextafter(y, np.inf * ulps)
    if not y > 0:
        return
    got = first_crossing_affine(a, s, c, np.array([y]), lr, rho)
    check(a, s, c[0], y, lr, got[0])


@pytest.mark.parametrize("scale", [1e-3, 0.3, 3.0, 30.0])
def test_affine_fast_path_recovers_from_bad_estimates(monkeypatch, scale):
    """Estimates far off (either side): the float64 windows and Newton rounds still give
    the exact answer (or NaN); with a sane spectrum they settle every run."""
    rng = np.random.default_rng(7)
    d = 40
    rho = np.sort(rng.uniform(0.5, 0.9995, d))
    a, s = rng.uniform(0, 1, d), rng.uniform(0, 1, d)
    c = -rng.uniform(0, 1, 12) * float(np.min(a / s))
    y = rng.uniform(1e-3, 0.5, 12) * (a.sum() + c * s.sum())
    lr = logs(rho)
    honest = first_crossing_affine(a, s, c, y, lr, rho)
    real = cr._grid_estimate
    monkeypatch.setattr(cr, "_grid_estimate", lambda *args: real(*args) * scale)
    got = first_crossing_affine(a, s, c, y, lr, rho)
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(got, honest)
    for r in range(c.size):
        assert check(a, s, c[r], y[r], lr, got[r]) == "exact"


def test_affine_fast_path_agrees_with_general_path_and_reuses_workspace():
    """Zhang-like spectrum, many runs: same answers as first_crossing (per-run weights),
    with and without a workspace reused across calls of different sizes."""
    d = 2000
    h = 1.0 / np.arange(1, d + 1)
    work = Workspace()
    for lr_, n in [(0.05, 9), (0.9, 4), (1.3, 11)]:
        r = 1 - lr_ * h
        rho, lr = r * r, logs(r * r)
        a = 0.5 * h
        s = 0.5 * h * lr_ / (2 - lr_ * h)
        bs = 2.0 ** np.arange(n)
        c = -1.0 / bs
        ok = nonneg_rows(a, s, c)
        y = 0.1 * a.sum() - s.sum() / bs
        sel = ok & (y > 0)
        got = first_crossing_affine(a, s, c[sel], y[sel], lr, rho, work=work)
        fresh = first_crossing_affine(a, s, c[sel], y[sel], lr, rho)
        w = a[None, :] + c[sel, None] * s[None, :]
        ref = first_crossing(np.zeros(sel.sum()), w, np.broadcast_to(lr, w.shape), y[sel])
        np.testing.assert_array_equal(got, fresh)
        np.testing.assert_array_equal(got, ref)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1e-3, 0.2, 1.0, 7.0]), min_size=1, max_size=5),
    st.lists(st.sampled_from([0.0, 1e-3, 0.5, 2.0]), min_size=1, max_size=5),
    st.lists(st.floats(-5.0, 5.0), min_size=1, max_size=8),
)
def test_nonneg_rows_against_exact_arithmetic(a, s, c):
    from fractions import Fraction

    m = min(len(a), len(s))
    a, s = np.array(a[:m]), np.array(s[:m])
    c = np.array(c)
    pos = s > 0
    if pos.any():  # the boundary c = -min(a/s) itself and values just either side
        q = float(np.min(a[pos] / s[pos]))
        c = np.append(c, -q * (1.0 + np.array([0.0, 1e-15, -1e-15, 1e-9, -1e-9, 1e-3])))
    ok = nonneg_rows(a, s, c)
    for r, cr_ in enumerate(c):
        exact = [Fraction(ai) + Fraction(cr_) * Fraction(si) for ai, si in zip(a, s, strict=True)]
        floats = a + cr_ * s
        if ok[r]:  # claimed nonnegative: so it is in floats, and exactly up to rounding
            assert np.all(floats >= 0)
            assert all(e >= -Fraction(4 * U) * Fraction(ai) for e, ai in zip(exact, a,
                                                                            strict=True))
        else:  # claimed mixed: a weight is negative
            assert any(e < 0 for e in exact) or np.any(floats < 0)


def brute_sweep(nq, target, lr, bs, kmax):
    """First k with loss <= target by the recursion m <- rho m + a^2 c / B, per B."""
    m = np.broadcast_to(nq.init, (bs.size, nq.dims)).copy()
    out = np.full(bs.size, np.inf)
    r2 = (1 - lr * nq.curvature) ** 2
    q = lr**2 * nq.noise / bs[:, None]
    for k in range(kmax + 1):
        loss = 0.5 * m @ nq.curvature
        out[np.isinf(out) & (loss <= target)] = k
        m = r2 * m + q
    return out


@pytest.fixture(params=["grouped", "general"])
def plain_path(request, monkeypatch):
    """Force one of the two exact plain-SGD paths (steps_to_target picks by problem size)."""
    threshold = 0 if request.param == "grouped" else np.inf
    monkeypatch.setattr(search, "GROUPED_MIN_WORK", threshold)
    return request.param


@pytest.mark.parametrize(
    ("h", "lr"),
    [
        (1.0 / np.arange(1, 61), 0.3),  # Zhang-like spectrum
        (1.0 / np.arange(1, 61), 1.0),  # lr h_1 = 1: a rate exactly 0
        (np.array([1.0, 0.5, 0.02, 0.02, 0.001]), 1.5),  # fast mode oscillates
    ],
)
def test_sweep_over_batch_sizes_equals_recursion(h, lr, plain_path):
    """Many batch sizes at one rate (the fast path's case, duplicate answers included)."""
    nq = NoisyQuadratic(h, h, 1.0)
    bs = 2.0 ** np.arange(0, 14)
    target = 0.3 * nq.initial_loss()
    got = nq.steps_to_target(target, lr, bs)
    want = brute_sweep(nq, target, lr, bs, 6000)
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[fin], want[fin])
    assert np.all(got[~fin] > 6000)


def test_target_equal_to_initial_loss_takes_zero_steps(plain_path):
    """L(0) = initial loss for every rate and batch size; the tie L(0) = target is 0 steps
    on the fast path (small B: weights of one sign) and the general one (large rates)."""
    nq = NoisyQuadratic(1.0 / np.arange(1, 9), 0.3, [1.0, 0.0, 2.0, 1.0, 0.5, 0.0, 1.0, 3.0])
    lrs = np.array([0.01, 0.5, 1.2, 1.9])
    bs = np.array([1.0, 2.0, 64.0])
    got = nq.steps_to_target(nq.initial_loss(), lrs[None, :], bs[:, None])
    np.testing.assert_array_equal(got, 0.0)
    # just below L(0) at least one step is needed
    below = np.nextafter(nq.initial_loss(), 0.0)
    assert np.all(nq.steps_to_target(below, lrs[None, :], bs[:, None]) >= 1)


def test_fast_path_equals_the_step_by_step_reference():
    """300 random runs with decaying terms of both signs: the fast search and the
    obviously-correct reference (simulate/crossing_reference.py) give the same step."""
    from empirical_batch.simulate.crossing_reference import first_crossing_reference

    rng = np.random.default_rng(7)
    n, d = 300, 6
    logrho = np.log(rng.uniform(0.5, 0.995, size=(n, d)))
    w = rng.lognormal(size=(n, d)) * np.where(rng.random((n, d)) < 0.2, -0.3, 1.0)
    l_inf = rng.uniform(0.0, 1.0, size=n)
    p0 = l_inf + w.sum(1)
    target = l_inf + rng.uniform(0.0, 1.0, size=n) * (p0 - l_inf)
    fast = first_crossing(l_inf, w, logrho, target)
    ref = first_crossing_reference(l_inf, w, logrho, target, max_steps=5000)
    reached = np.isfinite(ref)
    assert reached.mean() > 0.9
    np.testing.assert_array_equal(fast[reached], ref[reached])
    assert np.all(fast[~reached] > 5000)
