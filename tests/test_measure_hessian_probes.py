"""hessian_noise_scale with subsampled probes: exact moments by enumerating every probe
set, the stated standard error against the spread over draws, and the delta method."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"  # raised inside torch.func
)
from test_measure_hessian import Quadratic, _mean  # noqa: E402

from empirical_batch.errors import InputError  # noqa: E402
from empirical_batch.measure import HessianNoiseScale, hessian_noise_scale  # noqa: E402


def _problem(n: int, d: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    h = a @ a.T + np.eye(d)
    x = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, d)
    x[0] *= 4.0  # one large deviation: the probes' q_i spread widely
    model = Quadratic(*(torch.tensor(v) for v in (h, rng.normal(size=d), rng.normal(size=d))))
    return model, torch.tensor(x), torch.zeros(n, dtype=torch.float64), h, x


def test_all_probes_is_the_exact_path():
    model, x, y, *_ = _problem(9)
    exact = hessian_noise_scale(model, _mean, x, y)
    for m in (None, 9, 50):
        r = hessian_noise_scale(model, _mean, x, y, n_probes=m, seed=3)
        assert r == exact
        assert r.n_probes == 9 and r.trace_h_sigma_se == 0.0 and r.b_noise_se == 0.0


def test_moments_equal_those_of_every_probe_set():
    """Over all C(n, m) probe sets (numpy, from the closed-form q_i of the quadratic),
    the expansion estimate's mean is the exact tr(HΣ) and its variance is Cochran's
    n²(1 − m/n) S²/m; the library's draws over many seeds match both, and its stated
    se² averages to that variance (the variance estimator is unbiased)."""
    n, m = 8, 3
    model, x, y, h, xn = _problem(n)
    dev = xn - xn.mean(0)
    q = np.einsum("id,de,ie->i", dev, h, dev)  # the per-example gradients differ by x_i
    exact = q.sum() / n  # ddof=0: tr(HΣ) = Σ q_i / n, estimated by mean(q_S)
    sets = np.array([q[list(s)].mean() for s in itertools.combinations(range(n), m)])
    assert sets.mean() == pytest.approx(exact, rel=1e-12)
    var = (1 - m / n) * q.var(ddof=1) / m  # n²(1 − m/n) S²/m for the sum, over n²
    assert sets.var() == pytest.approx(var, rel=1e-12)

    # 600 draws: the sample variance of the draws spreads by about 6-10 % around its mean
    draws = [hessian_noise_scale(model, _mean, x, y, n_probes=m, seed=s) for s in range(600)]
    t = np.array([r.trace_h_sigma for r in draws])
    # each draw is one of the enumerated values
    assert np.isin(np.round(t, 9), np.round(sets, 9)).all()
    k = len(t)
    assert abs(t.mean() - exact) < 4 * math.sqrt(var / k)
    assert t.var() == pytest.approx(var, rel=0.25)
    se2 = np.array([r.trace_h_sigma_se**2 for r in draws])
    assert se2.mean() == pytest.approx(var, rel=0.25)
    assert all(r.b_noise_se == pytest.approx(r.trace_h_sigma_se / r.ghg, rel=1e-12)
               for r in draws[:20])


def test_unbiased_carries_the_se_by_the_delta_method():
    base = dict(g2=2.0, ghg=3.0, trace_sigma=40.0, trace_h_sigma=90.0, n_examples=64,
                n_probes=16, trace_h_sigma_se=5.0, b_noise=30.0, b_simple=20.0)
    for pop in (None, 200.0):
        def b_noise(t, pop=pop):
            return HessianNoiseScale(**{**base, "trace_h_sigma": t}).unbiased(pop).b_noise

        u = HessianNoiseScale(**base).unbiased(pop)
        step = 1e-4
        slope = (b_noise(90.0 + step) - b_noise(90.0 - step)) / (2 * step)
        assert u.b_noise_se == pytest.approx(abs(slope) * 5.0, rel=1e-7)
        # the trace's se scales with the trace itself
        assert u.trace_h_sigma_se / 5.0 == pytest.approx(u.trace_h_sigma / 90.0, rel=1e-12)
        assert u.n_probes == 16


@pytest.mark.parametrize("bad", [0, 1, 1.5, True, "4"])
def test_bad_probe_counts_are_refused(bad):
    model, x, y, *_ = _problem(6)
    with pytest.raises(InputError, match="n_probes"):
        hessian_noise_scale(model, _mean, x, y, n_probes=bad)
