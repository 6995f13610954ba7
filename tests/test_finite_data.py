"""Finite data: sampling a batch of B without replacement from D examples scales the
batch-mean covariance by 1/B - 1/D (Sigma Bessel-corrected). Checked by exact
enumeration of every batch of a small data set, in the simulator and the estimators."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from empirical_batch.estimators import gns_many, gns_two_batch
from empirical_batch.simulate import NoisyQuadratic

D = 8


def _pool(d_dims=3, seed=0):
    """D per-example noise vectors, centred, and their Bessel-corrected variances."""
    xi = np.random.default_rng(seed).normal(size=(D, d_dims))
    xi -= xi.mean(0)
    return xi, xi.var(0, ddof=1)


@pytest.mark.parametrize("b", [1, 2, 3, 5, 8])
def test_simulator_one_step_matches_enumeration_without_replacement(b):
    """E[theta_1^2] after one SGD step, every B-subset of the pool equally likely."""
    xi, c = _pool()
    h = np.array([1.0, 0.3, 0.05])
    theta0, lr = np.array([1.0, -2.0, 0.5]), 0.4
    nq = NoisyQuadratic(h, noise=c, init=theta0**2, dataset_size=D)
    moments = []
    for idx in itertools.combinations(range(D), b):
        theta1 = theta0 - lr * (h * theta0 + xi[list(idx)].mean(0))
        moments.append(theta1**2)
    exact = np.mean(moments, axis=0)
    np.testing.assert_allclose(nq.second_moment(lr, b, 1), exact, rtol=1e-12)
    if b == D:  # the whole data set: no noise at all
        assert nq.expected_loss(lr, D, 1) == pytest.approx(0.5 * h @ (theta0 * (1 - lr * h)) ** 2)


def test_simulator_refuses_a_batch_larger_than_the_pool():
    nq = NoisyQuadratic([1.0], noise=1.0, dataset_size=D)
    with pytest.raises(ValueError, match="dataset_size"):
        nq.expected_loss(0.1, D + 1, 3)
    with pytest.raises(ValueError, match="dataset_size"):
        NoisyQuadratic([1.0], noise=1.0, dataset_size=1)


def _grads(seed=1):
    g = np.random.default_rng(seed).normal(size=(D, 4)) + np.array([1.0, -0.5, 0.2, 0.0])
    G = g.mean(0)
    return g, G @ G, np.sum(g.var(0, ddof=1))


@pytest.mark.parametrize("bs, bb", [(1, 4), (2, 4), (2, 8), (3, 6)])
def test_two_batch_estimator_is_exact_on_enumerated_expectations(bs, bb):
    g, g2, tr = _grads()

    def e_sq(b):
        return np.mean([np.sum(g[list(i)].mean(0) ** 2)
                        for i in itertools.combinations(range(D), b)])

    s, big = e_sq(bs), e_sq(bb)
    est_g2, est_tr = gns_two_batch(s, bs, big, bb, dataset_size=D)
    assert est_g2 == pytest.approx(g2, rel=1e-10)
    assert est_tr == pytest.approx(tr, rel=1e-10)
    # without the correction |G|^2 is biased by -tr(Sigma)/D (the without-replacement term)
    naive_g2, naive_tr = gns_two_batch(s, bs, big, bb)
    assert naive_tr == pytest.approx(tr, rel=1e-10)
    assert naive_g2 == pytest.approx(g2 - tr / D, rel=1e-10)


def test_many_batches_with_dataset_size():
    g, g2, _ = _grads()
    b = 2
    e_small = np.mean([np.sum(g[list(i)].mean(0) ** 2)
                       for i in itertools.combinations(range(D), b)])
    e_big = np.mean([np.sum(g[list(i)].mean(0) ** 2)
                     for i in itertools.combinations(range(D), 4 * b)])
    assert gns_many(e_small, e_big, b, n=4, dataset_size=D)[0] == pytest.approx(g2)
    with pytest.raises(ValueError, match="dataset_size"):
        gns_two_batch(1.0, 2, 0.5, 16, dataset_size=8)


def test_gns_estimator_with_dataset_size():
    from empirical_batch.estimators import GNSEstimator

    g, g2, tr = _grads()
    e = {b: np.mean([np.sum(g[list(i)].mean(0) ** 2)
                     for i in itertools.combinations(range(D), b)]) for b in (2, 8)}
    est = GNSEstimator(beta=0.5, dataset_size=D)
    for _ in range(3):
        est.update(e[2], 2, e[8], 8)
    assert est.g2 == pytest.approx(g2) and est.trace_sigma == pytest.approx(tr)
    with pytest.raises(ValueError, match="dataset_size"):
        GNSEstimator(dataset_size=1)


@pytest.mark.parametrize("kw, word", [({"dataset_size": float("inf")}, "dataset_size=None"),
                                      ({"dataset_size": 10**400}, "dataset_size must be"),
                                      ({"dataset_size": 1}, "dataset_size must be")])
def test_a_pool_size_that_is_no_count_is_refused_in_words(kw, word):
    from empirical_batch.simulate import NoisyQuadratic, monte_carlo_sgd

    with pytest.raises(ValueError, match=word):
        NoisyQuadratic([1.0, 0.5], 1.0, 1.0, **kw)
    with pytest.raises(ValueError, match=word):
        monte_carlo_sgd(NoisyQuadratic([1.0, 0.5], 1.0, 1.0), [4], [0.1], steps=3, **kw)
    with pytest.raises(ValueError, match="dims must be"):
        NoisyQuadratic.zhang(float("inf"))
    from empirical_batch.quadratic_model import QuadraticModel

    if kw["dataset_size"] != 1:  # a single example is a pool of the quadratic model
        with pytest.raises(ValueError, match=word):
            QuadraticModel(np.ones(2), np.eye(2), np.eye(2), **kw)
