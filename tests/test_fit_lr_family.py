"""Learning-rate law families (power, SGD closed form, surge), model selection, and the
surge law against sign descent (Li et al. 2024)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empirical_batch.fit import fit_lr_scaling
from empirical_batch.simulate.sign import (
    correlated_quadratic,
    sign_descent_sweep,
    sign_step_monte_carlo,
)
from empirical_batch.theory import eps_opt, sign_descent_eps_opt, surge_eps_opt

B = 2.0 ** np.arange(0, 13)
LAWS = {
    "sgd": lambda b: eps_opt(b, eps_max=0.5, b_noise=64.0),
    "surge": lambda b: surge_eps_opt(b, eps_max=0.01, b_noise=64.0),
    "power": lambda b: 0.3 / (1 + 64.0 / b) ** 0.5,
}


def _table(family, sigma=0.0, seed=0):
    rng = np.random.default_rng(seed)
    lr = LAWS[family](B) * np.exp(sigma * rng.standard_normal(B.size))
    return pd.DataFrame({"batch_size": B, "learning_rate": lr})


@pytest.mark.parametrize("family", ["sgd", "surge", "power"])
def test_each_family_recovers_its_parameters_from_exact_data(family):
    f = fit_lr_scaling(_table(family), family=family, n_boot=0)
    assert f.family == family
    assert f.b_star == pytest.approx(64.0, rel=1e-6)
    np.testing.assert_allclose(f.learning_rate(B), LAWS[family](B), rtol=1e-6)


@pytest.mark.parametrize("family", ["sgd", "surge", "power"])
def test_model_selection_picks_the_generating_family(family):
    """Exact data: always. With 5 % log-noise over 10 seeds: surge and power (which the
    others cannot imitate) every time; the SGD law (nested in the power law, which AIC
    prefers by chance when the extra parameter cuts the RSS by more than exp(2/n) -
    about 16 % of the time for one nested parameter) at least 7 of 10."""
    assert fit_lr_scaling(_table(family), family="auto", n_boot=0).family == family
    picks = [fit_lr_scaling(_table(family, 0.05, s), family="auto", n_boot=0).family
             for s in range(10)]
    need = 7 if family == "sgd" else 10
    assert picks.count(family) >= need, picks
    sel = fit_lr_scaling(_table(family, 0.05, 0), family="auto", n_boot=0).selection
    assert {r[0] for r in sel} == {"sgd", "surge", "power"}


def test_surge_intervals_contain_the_truth_on_noisy_data():
    f = fit_lr_scaling(_table("surge", 0.05, 3), family="surge", n_boot=1000, seed=0)
    assert f.b_star_interval[0] < 64.0 < f.b_star_interval[1]
    assert f.eps_star_interval[0] < 0.01 < f.eps_star_interval[1]
    rec = f.recommend(64.0)
    assert rec.learning_rate_interval[0] < rec.learning_rate < rec.learning_rate_interval[1]


def test_sign_descent_closed_form_against_monte_carlo():
    g, h, s = correlated_quadratic(30, correlation=0.5, noise=10.0)
    for b in (1.0, 8.0, 64.0, 1024.0):
        mc = sign_step_monte_carlo(g, h, s, b, n_samples=40_000, seed=1)
        assert mc.eps_opt == pytest.approx(float(sign_descent_eps_opt(b, g, h, s)), rel=0.02)


def test_sign_descent_has_a_plateau_and_a_diagonal_hessian_has_no_surge():
    g, h, s = correlated_quadratic(20, correlation=0.5, noise=10.0)
    plateau = np.abs(g).sum() / h.sum()
    assert float(sign_descent_eps_opt(1e14, g, h, s)) == pytest.approx(plateau, rel=1e-6)
    e = sign_descent_eps_opt(np.geomspace(1, 1e6, 50), g, np.diag(np.diag(h)), s)
    assert np.all(np.diff(e) >= 0)  # uncoupled coordinates: the rate only rises


@pytest.mark.parametrize("rho", [0.7, 0.9])
def test_surge_fit_on_sign_descent_sweeps_recovers_peak_and_max(rho):
    """Monte Carlo sign-descent sweeps over B_peak/10 .. 10 B_peak: the surge law's
    B_noise and eps_max land within 10 % of the exact curve's peak and maximum. (With
    weak coupling, rho <= 0.5, the large-batch plateau is over a third of the peak and
    the simplified law misplaces the peak by 16-54 %: use sign_descent_eps_opt there.)"""
    g, h, s = correlated_quadratic(50, correlation=rho, noise=10.0)
    grid = np.geomspace(0.1, 1e4, 2000)
    exact = sign_descent_eps_opt(grid, g, h, s)
    b_peak, e_max = grid[np.argmax(exact)], exact.max()
    sweep = sign_descent_sweep(g, h, s, np.geomspace(b_peak / 10, b_peak * 10, 11),
                               n_samples=4000, seed=1)
    f = fit_lr_scaling(sweep, family="surge", n_boot=0)
    assert f.b_star == pytest.approx(b_peak, rel=0.10)
    assert f.eps_star == pytest.approx(e_max, rel=0.10)


@pytest.mark.parametrize(
    "kw, word",
    [(dict(family="cubic"), "family"), (dict(family="surge", alpha=0.5), "alpha"),
     (dict(level=1.5), "level"), (dict(level=0.0), "level"), (dict(n_boot=-1), "n_boot"),
     (dict(n_boot=2.5), "n_boot")],
)
def test_bad_options(kw, word):
    with pytest.raises(ValueError, match=word):
        fit_lr_scaling(_table("sgd"), **kw)
