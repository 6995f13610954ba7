"""Unequal and weighted micro-batches in `GradientNoiseScale.step` (sizes n_j, weights c_j).

Synthetic per-example (per-token) gradients with a known mean G and covariance Σ: each
micro-batch j of n_j draws enters ``.grad`` as c_j times its mean, as under a loss
summed over tokens and divided by the token count N of the accumulated batch
(c_j = n_j / N). Averaged over many steps, the per-step estimates must be unbiased for
|G|² and tr Σ; ignoring the weights is not.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.measure import GradientNoiseScale  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

G = np.array([0.6, -0.4, 0.5, 0.3, -0.2])
SD = np.array([2.0, 1.0, 3.0, 0.5, 1.5])  # Σ = diag(SD²)
G2, TRACE = float(G @ G), float(SD @ SD)


def _run(sizes_fn, weights_fn, steps, seed, *, pass_weights=True):
    """Per-step (g2, trace_sigma) of the tracker fed with synthetic micro-batches."""
    rng = np.random.default_rng(seed)
    theta = torch.nn.Parameter(torch.zeros(G.size, dtype=torch.float64))
    model = torch.nn.Module()
    model.theta = theta
    gns = GradientNoiseScale(model, micro_batch_size=1, accumulation_steps=3, beta=0.0)
    for _ in range(steps):
        sizes = sizes_fn(rng)
        c = weights_fn(sizes)
        for n, cj in zip(sizes, c, strict=True):
            x = torch.from_numpy(G + SD * rng.standard_normal((n, G.size)))
            (cj * (x @ theta).mean()).backward()  # gradient c_j * mean of the n draws
        gns.step(list(sizes), weights=list(c) if pass_weights else None)
        theta.grad = None
    hist = gns.estimator.history()
    return hist["g2"], hist["trace_sigma"]


def _assert_unbiased(g2, tr):
    for values, truth in ((g2, G2), (tr, TRACE)):
        se = values.std(ddof=1) / np.sqrt(values.size)
        assert abs(values.mean() - truth) < 4 * se, (values.mean(), truth, se)


def _token_weights(sizes):
    n = np.asarray(sizes, float)
    return n / n.sum()


def test_token_weighted_micro_batches_are_unbiased():
    """c_j = n_j/N with padded (unequal) micro-batches of 5, 1 and 2 tokens."""
    g2, tr = _run(lambda rng: (5, 1, 2), _token_weights, 4000, 0)
    _assert_unbiased(g2, tr)


def test_random_sizes_and_weights_are_unbiased():
    """Any known positive weights and sizes per step, drawn afresh every step."""
    g2, tr = _run(lambda rng: tuple(int(v) for v in rng.integers(1, 7, 3)),
                  lambda sizes: np.random.default_rng(sum(sizes)).uniform(0.2, 2.0, 3),
                  4000, 1)
    _assert_unbiased(g2, tr)


def test_ignoring_the_token_weights_is_biased():
    """The same steps read as equal weights (the plain mean/k accumulation): tr Σ is off
    by far more than its standard error, so the weights are what makes it unbiased."""
    _, tr = _run(lambda rng: (5, 1, 2), _token_weights, 4000, 0, pass_weights=False)
    se = tr.std(ddof=1) / np.sqrt(tr.size)
    assert abs(tr.mean() - TRACE) > 10 * se


def test_equal_weights_give_the_harmonic_mean_sizes():
    theta = torch.nn.Parameter(torch.ones(2))
    model = torch.nn.Module()
    model.theta = theta
    gns = GradientNoiseScale(model, micro_batch_size=4, accumulation_steps=2, beta=0.0)
    for n in (4, 1):
        (0.5 * (theta * n).sum()).backward()
    gns.step([4, 1])
    hist = gns.estimator.history()
    assert hist["b_small"][0] == 2 / (1 / 4 + 1) and hist["b_big"][0] == 2 * hist["b_small"][0]
    for n in (4, 1):
        ((n / 5) * (theta * n).sum()).backward()
    gns.step([4, 1], weights=[0.8, 0.2])  # token weights: b_small = Σn²/N, b_big = N
    hist = gns.estimator.history()
    assert hist["b_small"][1] == pytest.approx(17 / 5) and hist["b_big"][1] == pytest.approx(5)


@pytest.mark.parametrize("weights, match", [([1.0], "2 backward passes"),
                                            ([1.0, 0.0], "finite and > 0"),
                                            ([1.0, float("nan")], "finite and > 0"),
                                            ("ab", "sequence")])
def test_bad_weights_are_refused(weights, match):
    theta = torch.nn.Parameter(torch.ones(2))
    model = torch.nn.Module()
    model.theta = theta
    gns = GradientNoiseScale(model, micro_batch_size=4, accumulation_steps=2)
    for _ in range(2):
        theta.sum().backward()
    with pytest.raises(ValueError, match=match):
        gns.step(weights=weights)


def test_skip_discards_and_counts_the_step():
    theta = torch.nn.Parameter(torch.ones(2))
    model = torch.nn.Module()
    model.theta = theta
    gns = GradientNoiseScale(model, micro_batch_size=4, accumulation_steps=2)
    for _ in range(2):
        theta.sum().backward()
    assert gns.step(skip="unknown_sizes") is None
    assert gns.skipped["unknown_sizes"] == 1 and gns.estimator.steps == 0
