"""Fixed-budget optimal batch and learning rate on simulated grids with a known answer."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from empirical_batch.budget import fit_fixed_budget

BETA, GAMMA = 0.33, -0.125  # the simulated truth: B_opt ∝ C^0.33, lr_opt ∝ C^-0.125


def grid(seed, sigma=0.003):
    """Final losses L0(C) (1 + 0.02 log²(B/B*) + 0.03 log²(lr/lr*)) + noise, on a grid of
    powers of two and 25 learning rates, 9 budgets."""
    rng = np.random.default_rng(seed)
    c = np.geomspace(1e17, 1e21, 9)[:, None, None]
    b = (2.0 ** np.arange(8, 26))[None, :, None]
    lr = np.geomspace(1e-5, 1, 25)[None, None, :]
    b_star, lr_star = 0.3 * c**BETA, 0.3 * c**GAMMA
    loss = (2 + 5 * c**-0.05) * (1 + 0.02 * np.log(b / b_star) ** 2
                                 + 0.03 * np.log(lr / lr_star) ** 2)
    loss = loss + sigma * rng.standard_normal(loss.shape)
    cc, bb, ll = np.broadcast_arrays(c, b, lr)
    return pd.DataFrame({"compute": cc.ravel(), "batch_size": bb.ravel(),
                         "learning_rate": ll.ravel(), "loss": loss.ravel()})


def test_exponents_recovered_within_their_intervals():
    """95 % intervals over 20 noisy grids: the truth inside at least 16 times (the
    residual bootstrap with 9 budgets under-covers a little; 16/20 is < 1 % likely at
    the nominal rate and ~20 % at a true 85 %)."""
    hits_b = hits_lr = 0
    for s in range(20):
        f = fit_fixed_budget(grid(s), n_boot=500, seed=s)
        hits_b += f.b_opt_exponent_interval[0] <= BETA <= f.b_opt_exponent_interval[1]
        hits_lr += f.lr_opt_exponent_interval[0] <= GAMMA <= f.lr_opt_exponent_interval[1]
        assert abs(f.b_opt.exponent - BETA) < 0.08 and abs(f.lr_opt.exponent - GAMMA) < 0.05
    assert hits_b >= 16 and hits_lr >= 16, (hits_b, hits_lr)


def test_band_and_optima():
    f = fit_fixed_budget(grid(0), tolerance=0.0025, n_boot=0)
    assert len(f.optima) == 9 and (f.optima["n_band"] >= 1).all()
    best = f.optima.set_index("compute")["best_loss"]
    for c, sub in f.band.groupby("compute"):
        assert (sub["loss"] <= best[c] * 1.0025 + 1e-12).all()
    assert np.isnan(f.b_opt_exponent_interval[0])
    assert len(repr(f)) < 300 and "compute^" in repr(f)
    cmp = f.compare(b_crit=1e6, budget=1e19)
    assert cmp["b_opt_over_b_crit"] == pytest.approx(float(f.b_opt(1e19)) / 1e6)


def test_diverged_runs_are_inf_not_errors():
    g = grid(1)
    g.loc[g.index[::7], "loss"] = np.inf
    f = fit_fixed_budget(g, n_boot=100)
    assert np.isfinite(f.b_opt.exponent)


@pytest.mark.parametrize(
    "change, word",
    [
        (lambda g: g.drop(columns=["loss"]), "loss"),
        (lambda g: g.assign(compute=-1.0), "compute"),
        (lambda g: g.assign(batch_size=np.nan), "non-finite"),
        (lambda g: g.assign(learning_rate="x"), "numeric"),
        (lambda g: g.assign(loss=np.nan), "missing"),
        (lambda g: g[g.compute < 1e18], "at least 3 budgets"),
        (lambda g: g.assign(loss=np.where(g.compute == g.compute.min(), np.inf, g.loss)),
         "diverged"),
    ],
)
def test_bad_tables_are_refused(change, word):
    with pytest.raises(ValueError, match=word):
        fit_fixed_budget(change(grid(0)), n_boot=0)


@pytest.mark.parametrize("kw, word", [(dict(tolerance=-0.1), "tolerance"),
                                      (dict(level=1.0), "level"), (dict(n_boot=-1), "n_boot")])
def test_bad_options_are_refused(kw, word):
    with pytest.raises(ValueError, match=word):
        fit_fixed_budget(grid(0), **kw)


@pytest.mark.parametrize("kw, word", [({"b_crit": -5.0, "budget": 1e19}, "b_crit must be > 0"),
                                      ({"b_crit": 0.0, "budget": 1e19}, "b_crit must be > 0"),
                                      ({"b_crit": 1e6, "budget": 0.0}, "budget must be > 0"),
                                      ({"b_crit": math.inf, "budget": 1e19}, "b_crit must be"),
                                      ({"b_crit": 1e-320, "budget": 1e19}, "past the float")])
def test_compare_refuses_what_no_batch_or_budget_is(kw, word):
    f = fit_fixed_budget(grid(0), tolerance=0.0025, n_boot=0)
    with pytest.raises(ValueError, match=word):
        f.compare(**kw)
