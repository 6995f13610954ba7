"""The model's laws on a noisy quadratic with H ∝ I and constant noise.

Problem: d = 10 directions, h = 1, c = 1, E[θ²(0)] = 1, target = L(0)/R with R = 100,
so at the target m_T = 1/R and B_noise(target) = c / (h² m_T) = 100 exactly.

Small-lr analysis (continuous time, valid when a·h ≪ 1, i.e. at small B): with
x = m_∞/m_T, the tuned steps are S(B) = (B_noise_T / (4x*B))·ln((R - x*)/(1 - x*)), so
E_min = B·S = (B_noise_T/4)·f*, f* = min_x ln((R-x)/(1-x))/x, and the best rate is
a*(B) = 2x*·B/(h·B_noise_T): proportional to B (eq. 2.6 at B ≪ B_noise). At large B the
noise vanishes and a = 1/h reaches the target in one step: S_min = 1, a → ε_max = 1/h.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares

from empirical_batch.simulate import NoisyQuadratic, greedy_run
from empirical_batch.tradeoff import Tradeoff

R = 100.0
H, C, D = 1.0, 1.0, 10
B_NOISE_T = C / (H**2 * (1.0 / R))  # = 100


@pytest.fixture(scope="module")
def iso():
    nq = NoisyQuadratic(np.full(D, H), C, 1.0)
    target = nq.initial_loss() / R
    bs = 2.0 ** np.arange(0, 15)
    # rate grid ratio 1.0194: a tuned rate is known to within ±1%
    lrs = np.geomspace(1e-5, 1.0 / H, 600)
    return nq, target, bs, nq.best_lr(target, bs, lrs)


def f_star():
    x = np.linspace(1e-4, 1 - 1e-4, 200_001)
    f = np.log((R - x) / (1 - x)) / x
    return f.min(), x[f.argmin()]


def fit_hyperbola(bs, steps):
    """Least squares of log S = log(S_min + E_min/B) over (log S_min, log E_min)."""
    res = least_squares(
        lambda p: np.log(np.exp(p[0]) + np.exp(p[1]) / bs) - np.log(steps), x0=[0.0, 5.0]
    )
    return tuple(np.exp(res.x))


def test_tuned_steps_follow_the_tradeoff(iso):
    _nq, _target, bs, best = iso
    s = best.steps
    fstar, _ = f_star()
    # small-B branch: S = E_min/B; B·S constant to within integer rounding of S (S ≥ 48)
    small = bs <= 4
    e_small = bs[small] * s[small]
    assert np.ptp(e_small) / e_small.mean() < 0.02
    # E_min agrees with the analytic small-lr value; 2% covers the rate grid (±1% in a
    # moves S by < 0.1% at the flat optimum) plus O(a h) = 2% discreteness at B = 1
    e_min = e_small.mean()
    assert e_min == pytest.approx(B_NOISE_T / 4 * fstar, rel=0.02)
    # large-B branch: S_min = 1 step (noise-free, a = 1/h)
    assert np.all(s[bs >= 8 * B_NOISE_T] == 1)
    s_min = 1.0
    # B_crit = E_min/S_min against the noise scale at the target: the analysis above
    # gives B_crit / B_noise(target) = f*/4 (≈ 1.91 for R = 100), i.e. B_noise predicts
    # B_crit to within a factor 2, as the paper states.
    tr = Tradeoff(s_min=s_min, e_min=e_min)
    assert tr.b_crit / B_NOISE_T == pytest.approx(fstar / 4, rel=0.02)
    assert 0.5 < tr.b_crit / B_NOISE_T < 2.0
    # the whole curve: between the corner max(S_min, E_min/B) of the two limits and
    # the hyperbola S_min(1 + B_crit/B), up to one step of integer rounding. (This
    # problem reaches the target in one step at large B, so its knee is sharp: the
    # hyperbola is an upper envelope here, not an exact law.)
    corner = np.maximum(s_min, e_min / bs)
    assert np.all(s >= corner - 1.0)
    assert np.all(s <= tr.steps(bs) + 1.0)
    # a least-squares fit of the hyperbola to the whole curve (as a user would fit a
    # sweep): the sharp knee makes the fit trade S_min against E_min (both come out
    # ~15-20% low), but B_crit = E_min/S_min, where the two asymptotes meet, is pinned
    # by the data: within 10% of the analytic f*/4·B_noise(target)
    s_fit, e_fit = fit_hyperbola(bs, s)
    assert e_fit / s_fit == pytest.approx(fstar / 4 * B_NOISE_T, rel=0.10)
    assert 0.5 < e_fit / s_fit / B_NOISE_T < 2.0


def test_best_lr_grows_linearly_then_saturates(iso):
    """ε_opt(B) = ε_max/(1 + B_noise/B): ∝ B at small B, → ε_max = 1/h at large B."""
    _nq, _target, bs, best = iso
    lr = best.learning_rate
    _, xstar = f_star()
    slope = 2 * xstar / (H * B_NOISE_T)
    small = bs <= 4
    # 2% for the rate grid spacing (1.9%) plus the discreteness correction, first order in
    # a·h (the continuous-time analysis drops O(a·h) terms of ln(1 - a h)^2 = -2ah - (ah)^2...)
    dev = np.abs(lr[small] / (bs[small] * slope) - 1)
    assert np.all(dev <= 0.02 + 2 * lr[small] * H)
    assert dev[0] < 0.03  # at B = 1, a·h ≈ 0.017: the limit law itself
    big = bs >= 8 * B_NOISE_T
    assert np.all((lr[big] > 0.5 / H) & (lr[big] <= 1.0 / H))
    assert np.all(np.diff(lr[bs <= B_NOISE_T]) > 0)


def test_greedy_rate_gives_the_exact_hyperbola():
    """With the model's per-step ε_opt(B) on H ∝ I: 1/m_{t+1} = 1/m_t + B h²/c, so
    S(B) = ceil((B_noise(target) - B_noise(0))/B): S_min = 1 and
    B_crit = E_min/S_min = B_noise(target) - B_noise(0), the noise scale at the target
    up to the initial value."""
    nq = NoisyQuadratic(np.full(D, H), C, 1.0)
    target = nq.initial_loss() / R
    bs = 2.0 ** np.arange(0, 12)
    run = greedy_run(nq, target, bs)
    b_noise_0 = C / H**2  # m(0) = 1
    e = B_NOISE_T - b_noise_0
    # rounding of R·m_T in floats can move the crossing by one step
    assert np.all(np.abs(run["steps"] - np.ceil(e / bs)) <= 1)
    assert greedy_run(nq, target, [np.inf])["steps"][0] == 1
    tr = Tradeoff(s_min=1.0, e_min=e)
    # S(B) = ceil(B_crit/B) vs S_min(1 + B_crit/B): at most one step apart
    assert np.max(np.abs(run["steps"] - tr.steps(bs))) <= 1.0 + 1e-9


def test_noise_scales_along_a_run_step_and_progress_averages():
    import numpy as np

    from empirical_batch.simulate import NoisyQuadratic
    from empirical_batch.simulate.traces import noise_scales_along_run

    nq = NoisyQuadratic.zhang(200)
    lr, b, k = 0.5, 8.0, 400
    tr = nq.noise_scales(lr, b, np.arange(k))
    by_step = noise_scales_along_run(nq, lr, b, k)
    by_progress = noise_scales_along_run(nq, lr, b, k, average="progress", b_crit=50.0)
    assert by_step["b_noise"].iloc[2] == pytest.approx(np.mean(tr.b_noise))
    w = 1 / (1 + tr.b_noise / b)
    assert by_progress["b_noise"].iloc[2] == pytest.approx(np.sum(w * tr.b_noise) / np.sum(w))
    # B_noise grows along the run and late steps make less progress: a lower average
    assert by_progress["b_noise"].iloc[2] < by_step["b_noise"].iloc[2]
    assert by_progress["b_crit_over_b_noise"].tolist() == pytest.approx(
        (50.0 / by_progress["b_noise"]).tolist())
    with pytest.raises(ValueError, match="average"):
        noise_scales_along_run(nq, lr, b, k, average="tokens")
