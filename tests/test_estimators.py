"""Numpy GNS estimators: exact inversions, bias on synthetic gradients, EMA, uncertainty."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from empirical_batch.estimators import (
    GNSEstimator,
    ema,
    gns_many,
    gns_regression,
    gns_two_batch,
)

pos = st.floats(1e-3, 1e3)


# ------------------------------------------------------------ exact inversions
@given(g2=pos, tr=pos, bs=st.integers(1, 500), ratio=st.integers(2, 64))
def test_two_batch_inverts_expectation(g2, tr, bs, ratio):
    bb = bs * ratio
    got = gns_two_batch(g2 + tr / bs, bs, g2 + tr / bb, bb)
    # exact algebra up to float rounding of a 2x2 solve
    assert got[0] == pytest.approx(g2, rel=1e-9, abs=1e-9 * tr)
    assert got[1] == pytest.approx(tr, rel=1e-9, abs=1e-9 * g2 * bb)


@given(g2=pos, tr=pos, sizes=st.lists(st.integers(1, 4096), min_size=3, max_size=8, unique=True))
def test_regression_inverts_expectation(g2, tr, sizes):
    b = np.array(sizes, float)
    got = gns_regression(g2 + tr / b, b)
    assert got[0] == pytest.approx(g2, rel=1e-7, abs=1e-7 * tr)
    assert got[1] == pytest.approx(tr, rel=1e-7, abs=1e-7 * g2 * b.max())


def test_regression_with_two_sizes_equals_two_batch():
    rng = np.random.default_rng(0)
    y = rng.uniform(1, 5, size=(10, 2))
    a = gns_regression(y, [4, 32])
    b = gns_two_batch(y[:, 0], 4, y[:, 1], 32)
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_broadcasting_and_scalars():
    g2, tr = gns_two_batch(np.array([12.0, 7.0]), 4, 4.5, np.array([[16.0], [8.0]]))
    assert g2.shape == tr.shape == (2, 2)
    g2, tr = gns_two_batch(12.0, 4, 4.5, 16)
    assert isinstance(g2, float) and isinstance(tr, float)


def test_many_equals_two_batch():
    rng = np.random.default_rng(1)
    sq = rng.uniform(5, 10, size=(3, 6))
    mean = rng.uniform(1, 2, size=3)
    np.testing.assert_allclose(gns_many(sq, mean, 8), gns_two_batch(sq.mean(-1), 8, mean, 48))
    np.testing.assert_allclose(gns_many(sq.mean(-1), mean, 8, n=6), gns_many(sq, mean, 8))
    with pytest.raises(ValueError, match="n must be >= 2"):
        gns_many(1.0, 1.0, 8, n=1)


# ----------------------------------------------------- bias on synthetic data
def _draw(rng, n_draws, b, n, g, chol):
    """Per-example gradients g_i ~ N(G, Σ): returns (n_draws, n, b, d)."""
    z = rng.standard_normal((n_draws, n, b, g.size))
    return g + z @ chol.T


@pytest.fixture(scope="module")
def synthetic():
    rng = np.random.default_rng(42)
    d = 6
    g = rng.normal(size=d) * 0.5
    a = rng.normal(size=(d, d))
    sigma = a @ a.T / d + np.diag(rng.uniform(0.5, 2, d))
    per = _draw(rng, 4000, 4, 8, g, np.linalg.cholesky(sigma))  # 8 micro-batches of 4
    return g, sigma, per


def _check_unbiased(est, truth, name):
    est = np.asarray(est)
    se = est.std(ddof=1) / math.sqrt(est.size)
    # 4 Monte Carlo standard errors: a true-zero-bias failure rate of ~6e-5
    assert abs(est.mean() - truth) < 4 * se, (name, est.mean(), truth, se)


def test_bias_every_path(synthetic):
    g, sigma, per = synthetic
    g2_true, tr_true = g @ g, np.trace(sigma)
    micro = per.mean(axis=2)  # (draws, 8, d): micro-batch means, b = 4
    big = micro.mean(axis=1)  # batch of 32
    sq_micro = np.sum(micro**2, -1)
    sq_big = np.sum(big**2, -1)
    # two batches, nested: the first micro-batch inside the big batch
    paths = {
        "two_batch": gns_two_batch(sq_micro[:, 0], 4, sq_big, 32),
        "many": gns_many(sq_micro, sq_big, 4),
        "per_example": gns_many(np.sum(per[:, 0] ** 2, -1), np.sum(micro[:, 0] ** 2, -1), 1),
    }
    # regression over batch sizes 4, 8, 16, 32 (nested prefixes)
    sizes = np.array([4, 8, 16, 32])
    ys = np.stack([np.sum(micro[:, : s // 4].mean(1) ** 2, -1) for s in sizes], -1)
    paths["regression"] = gns_regression(ys, sizes)
    for name, (eg2, etr) in paths.items():
        _check_unbiased(eg2, g2_true, name)
        _check_unbiased(etr, tr_true, name)
    # EMA of the many-sample path converges to the true B_simple
    est = GNSEstimator(beta=0.999)
    for s, bg in zip(sq_micro.mean(1), sq_big, strict=True):
        est.update(s, 4, bg, 32)
    e = est.estimate()
    assert abs(e.b_simple - tr_true / g2_true) < 4 * e.b_simple_se


def test_ema_online_equals_offline():
    rng = np.random.default_rng(3)
    est = GNSEstimator(beta=0.9)
    for _ in range(50):
        s = rng.uniform(10, 20)
        est.update(s, 4, rng.uniform(1, s), 64)
    df = est.to_frame()
    assert list(df.columns) == list(GNSEstimator._COLUMNS)
    assert est.trace_sigma == pytest.approx(ema(df.trace_sigma, 0.9)[-1], rel=1e-12)
    assert est.g2 == pytest.approx(ema(df.g2, 0.9)[-1], rel=1e-12)


def test_uncertainty_coverage():
    """Delta-method SE and Fieller interval on i.i.d. synthetic steps."""
    rng = np.random.default_rng(7)
    g2, tr, bs, bb = 1.0, 64.0, 8, 128
    reps, steps = 300, 120
    # per-step squared norms with the right expectations and correlated noise
    noise = rng.standard_normal((reps, steps, 2))
    sq_s = g2 + tr / bs + 3.0 * noise[..., 0]
    sq_b = g2 + tr / bb + 0.6 * (0.5 * noise[..., 0] + noise[..., 1])
    truth = tr / g2
    hits, r, se = 0, [], []
    for i in range(reps):
        est = GNSEstimator(beta=0.97)
        for t in range(steps):
            est.update(max(sq_s[i, t], 0.0), bs, max(sq_b[i, t], 0.0), bb)
        e = est.estimate(level=0.9)
        hits += e.b_simple_interval.low <= truth <= e.b_simple_interval.high
        r.append(e.b_simple)
        se.append(e.b_simple_se)
    cover = hits / reps
    # binomial sd of the coverage at 300 reps is 0.017: accept 0.9 ± 3 sd
    assert 0.85 <= cover <= 0.95, cover
    # the reported SE matches the spread across replicates within 20% (sampling
    # error of a sd from 300 reps is ~4%; the delta method adds a few % of bias)
    assert np.median(se) == pytest.approx(np.std(r), rel=0.2)


def test_negative_g2_reported_not_clamped():
    est = GNSEstimator(beta=0.5)
    est.update(10.0, 4, 1.0, 8)  # |G|^2 = (8 - 40)/4 < 0
    assert est.g2 < 0 and est.b_simple < 0
    est2 = GNSEstimator(beta=0.0)
    est2.update(4.0, 1, 2.0, 2)  # g2 = 0 exactly, tr > 0
    assert est2.g2 == 0.0 and est2.b_simple == math.inf


def test_interval_unbounded_when_g2_unresolved():
    rng = np.random.default_rng(5)
    est = GNSEstimator(beta=0.9)
    for _ in range(30):  # |G|^2 = 0 exactly: noise only
        s = 16 + rng.normal()
        est.update(s, 1, 1 + rng.normal() * 0.5, 16)
    lo, hi = est.b_simple_interval()
    assert (lo, hi) == (-math.inf, math.inf) or not (lo <= 0 <= hi) or hi - lo > 100


def test_the_estimators_interval_is_the_estimates_interval():
    from empirical_batch.result import Interval

    rng = np.random.default_rng(2)
    est = GNSEstimator(beta=0.9)
    for _ in range(20):
        est.update(6 + rng.normal(), 2, 3 + 0.1 * rng.normal(), 32)
    ci = est.b_simple_interval(0.9)
    assert isinstance(ci, Interval) and ci.level == 0.9
    assert ci == est.estimate(0.9).b_simple_interval


def test_state_dict_bit_identical():
    rng = np.random.default_rng(11)
    data = [(rng.uniform(5, 9), rng.uniform(0.5, 4)) for _ in range(40)]
    a = GNSEstimator(beta=0.95)
    for s, b in data[:20]:
        a.update(s, 2, b, 32)
    state = pickle.loads(pickle.dumps(a.state_dict()))
    b_ = GNSEstimator(beta=0.1)
    b_.load_state_dict(state)
    for s, b in data[20:]:
        a.update(s, 2, b, 32)
        b_.update(s, 2, b, 32)
    assert a.state_dict() == b_.state_dict()
    assert a.estimate() == b_.estimate()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((1.0, 0, 1.0, 8), "b_small"),
        ((1.0, 4, 1.0, -8), "b_big"),
        ((1.0, 8, 1.0, 8), "b_small must be < b_big"),
        ((math.nan, 4, 1.0, 8), "sq_norm_small"),
        ((1.0, 4, math.inf, 8), "sq_norm_big"),
        ((-1.0, 4, 1.0, 8), "sq_norm_small"),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        gns_two_batch(*args)
    with pytest.raises(ValueError, match=match):
        GNSEstimator().update(*args)


def test_bad_input_other():
    with pytest.raises(ValueError, match="beta"):
        GNSEstimator(beta=1.0)
    with pytest.raises(RuntimeError, match="no steps"):
        _ = GNSEstimator().b_simple
    with pytest.raises(ValueError, match=">= 2 micro-batches"):
        gns_many([1.0], 1.0, 4)
    with pytest.raises(ValueError, match="two distinct"):
        gns_regression([1.0, 2.0, 3.0], [4, 4, 4])
    with pytest.raises(ValueError, match="entries"):
        gns_regression([1.0, 2.0], [4, 8, 16])
    with pytest.raises(ValueError, match="sq_norm_small must be a scalar"):
        GNSEstimator().update(np.ones(2), 4, 1.0, 8)


@given(values=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=40),
       beta=st.floats(0.0, 0.999))
def test_online_mean_is_offline_ema(values, beta):
    """The West-form online mean equals the textbook bias-corrected EMA."""
    est = GNSEstimator(beta=beta)
    for v in values:
        est._fold(v, 1.0)  # the numerator path alone; the denominator is constant
    ref = ema(values, beta)[-1]
    scale = max(1.0, max(abs(v) for v in values))
    assert est.trace_sigma == pytest.approx(ref, rel=1e-9, abs=1e-9 * scale)
