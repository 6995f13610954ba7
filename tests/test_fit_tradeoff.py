"""fit_tradeoff on synthetic data from a known Tradeoff: exact recovery, bias,
interval coverage, diagnostics and bad input."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize

from empirical_batch.fit import TradeoffFit, fit_tradeoff
from empirical_batch.tradeoff import Tradeoff
from tests._synth_fit import synthetic_table

TRUE = Tradeoff(s_min=1000.0, e_min=64000.0)  # B_crit = 64
B = 2.0 ** np.arange(2, 13)  # 4 … 4096, B_crit in the middle


@given(
    st.floats(1.0, 1e6), st.floats(1.0, 1e4),
    st.integers(-2, 2), st.integers(4, 10),
)
def test_exact_data_recovered(s_min, b_crit, offset, n):
    t = Tradeoff(s_min, s_min * b_crit)
    b = b_crit * 2.0 ** (np.arange(n) - n // 2 + offset)
    fit = fit_tradeoff(pd.DataFrame({"batch_size": b, "steps": t.steps(b)}), n_boot=20)
    # the point fit minimises to xatol 1e-10 in log B_crit
    assert fit.b_crit == pytest.approx(b_crit, rel=1e-6)
    assert fit.s_min == pytest.approx(s_min, rel=1e-6)
    assert fit.e_min == pytest.approx(s_min * b_crit, rel=1e-6)
    assert fit.log_rmse < 1e-6


def test_point_fit_matches_independent_least_squares():
    """Same minimum as scipy's least_squares on (log S_min, log B_crit), unconstrained."""
    rng = np.random.default_rng(3)
    for _ in range(5):
        t = synthetic_table(TRUE, B, sigma=0.2, rng=rng)
        y, lb = np.log(t["steps"].to_numpy()), np.log(t["batch_size"].to_numpy())

        def resid(p, y=y, lb=lb):
            return y - p[0] - np.log1p(np.exp(p[1] - lb))

        res = optimize.least_squares(resid, x0=[np.log(900), np.log(50)],
                                     xtol=1e-15, ftol=1e-15, gtol=1e-15)
        fit = fit_tradeoff(t, n_boot=0)
        assert math.log(fit.b_crit) == pytest.approx(res.x[1], abs=1e-6)
        assert math.log(fit.s_min) == pytest.approx(res.x[0], abs=1e-6)


def test_examples_column_equivalent_to_steps():
    t = synthetic_table(TRUE, B, sigma=0.1, rng=1)
    a = fit_tradeoff(t, n_boot=50, seed=0)
    b = fit_tradeoff(pd.DataFrame({"batch_size": t["batch_size"],
                                   "examples": t["steps"] * t["batch_size"]}), n_boot=50, seed=0)
    assert a.b_crit == pytest.approx(b.b_crit, rel=1e-12)
    assert tuple(a.b_crit_interval) == pytest.approx(tuple(b.b_crit_interval), rel=1e-12)


def test_unbiased_under_multiplicative_noise():
    """Mean log error over 300 noisy sweeps is zero within 4 standard errors."""
    errs = {"b": [], "s": [], "e": []}
    for seed in range(300):
        f = fit_tradeoff(synthetic_table(TRUE, B, sigma=0.15, rng=seed), n_boot=0)
        errs["b"].append(math.log(f.b_crit / TRUE.b_crit))
        errs["s"].append(math.log(f.s_min / TRUE.s_min))
        errs["e"].append(math.log(f.e_min / TRUE.e_min))
    for v in errs.values():
        v = np.asarray(v)
        assert abs(v.mean()) < 4 * v.std() / math.sqrt(len(v)) + 0.005


@pytest.mark.parametrize(("n_seeds", "mode"), [(5, "seeds"), (1, "residuals")])
def test_interval_coverage_near_nominal(n_seeds, mode):
    """90 % intervals over 200 independent sweeps (15 % log-noise). The count of
    covering intervals is Binomial(200, p): SE = sqrt(0.9·0.1/200) = 0.021, so a
    correct 90 % interval lands in [0.836, 0.964] (3 SE) with probability > 0.99."""
    hits = 0
    for seed in range(200):
        tab = synthetic_table(TRUE, B, n_seeds=n_seeds, sigma=0.15, rng=seed)
        f = fit_tradeoff(tab, level=0.9, n_boot=200, seed=seed + 1000)
        assert f.bootstrap == mode
        hits += f.b_crit_interval[0] <= TRUE.b_crit <= f.b_crit_interval[1]
    assert 0.836 <= hits / 200 <= 0.964


def test_bootstrap_reproducible_and_seeded():
    t = synthetic_table(TRUE, B, n_seeds=3, sigma=0.1, rng=5)
    a = fit_tradeoff(t, seed=1, n_boot=100)
    b = fit_tradeoff(t, seed=1, n_boot=100)
    c = fit_tradeoff(t, seed=np.random.default_rng(2), n_boot=100)
    assert a == b
    assert a.b_crit == c.b_crit and a.s_min_interval != c.s_min_interval


def test_f_interval_needs_no_bootstrap():
    """interval="f" uses the F quantile, not the draws: the same with and without them."""
    t = synthetic_table(TRUE, B, n_seeds=1, sigma=0.1, rng=7)
    without = fit_tradeoff(t, interval="f", n_boot=0)
    with_draws = fit_tradeoff(t, interval="f", n_boot=200, seed=0)
    assert all(math.isfinite(v) for v in without.b_crit_interval)
    assert without.b_crit_interval == with_draws.b_crit_interval
    assert all(math.isnan(v) for v in without.s_min_interval)  # those do need draws


def test_result_object():
    f = fit_tradeoff(synthetic_table(TRUE, B, sigma=0.1, rng=0), n_boot=50)
    assert isinstance(f, TradeoffFit)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.b_crit = 1.0
    assert f.tradeoff.b_crit == pytest.approx(f.b_crit)
    d = f.to_dict()
    assert d["b_crit"] == f.b_crit and len(d["log_residuals"]) == len(B)
    frame = f.to_frame()
    np.testing.assert_allclose(np.log(frame["steps"] / frame["steps_fit"]), f.log_residuals)
    assert f.n_below + f.n_above == len(B) and not f.extrapolation
    assert "B_crit" in str(f)
    for interval in ("f", "percentile"):
        g = fit_tradeoff(synthetic_table(TRUE, B, sigma=0.1, rng=0), n_boot=50,
                         interval=interval)
        assert g.b_crit_interval[0] < g.b_crit < g.b_crit_interval[1]


def test_extrapolation_flagged():
    b = np.array([512.0, 1024, 2048, 4096])  # all far above B_crit = 64
    f = fit_tradeoff(pd.DataFrame({"batch_size": b, "steps": TRUE.steps(b)}), n_boot=20)
    assert f.extrapolation and f.n_below == 0 and f.n_above == 4


def test_unbounded_range_reported_as_infinite():
    """Flat S(B) with noise: B_crit is not bounded above by the data... or below."""
    b = np.array([512.0, 1024, 2048, 4096])
    s = np.array([1000.0, 1010, 990, 1005])
    f = fit_tradeoff(pd.DataFrame({"batch_size": b, "steps": s}), n_boot=200)
    assert f.b_crit_interval[0] == 0.0 and f.extrapolation


def test_bounded_fit_respects_constraints():
    for seed in range(20):
        t = synthetic_table(TRUE, B, sigma=0.2, rng=seed)
        f = fit_tradeoff(t, n_boot=20, bounded=True)
        assert f.s_min <= t["steps"].min() * (1 + 1e-12)
        assert f.e_min <= (t["steps"] * t["batch_size"]).min() * (1 + 1e-12)
        u = fit_tradeoff(t, n_boot=20)
        if u.s_min > t["steps"].min():
            assert f.bound != "none" and "s_min > min S" in u.bound


def test_unreached_rows_listed_not_fitted():
    t = pd.DataFrame({"batch_size": B, "steps": TRUE.steps(B), "reached": True})
    t.loc[t.index[-1], ["steps", "reached"]] = [np.nan, False]
    f = fit_tradeoff(t, n_boot=10)
    assert f.unreached_batch_sizes == (4096.0,) and f.n_batch_sizes == len(B) - 1


@pytest.mark.parametrize(
    ("table", "kwargs", "exc", "pattern"),
    [
        ([1, 2], {}, TypeError, "DataFrame"),
        (pd.DataFrame({"batch_size": [1, 2, 3]}), {}, ValueError, "'steps' or 'examples'"),
        (pd.DataFrame({"batch_size": [1, 2, 3], "steps": [3, 2, 1]}), {"level": 1.5},
         ValueError, "level must be"),
        (pd.DataFrame({"batch_size": [1, 2, 3], "steps": [3, 2, 1]}), {"n_boot": -1},
         ValueError, "n_boot"),
        (pd.DataFrame({"batch_size": [1, 2, 3], "steps": [3, -2, 1]}), {}, ValueError,
         "finite and > 0"),
        (pd.DataFrame({"batch_size": [0, 2, 3], "steps": [3, 2, 1]}), {}, ValueError,
         "batch_size"),
        (pd.DataFrame({"batch_size": [1, 2, 3], "steps": [3, 2, 1]}),
         {"bootstrap": "seeds"}, ValueError, "at least 2 seeds"),
        (pd.DataFrame({"batch_size": [1, 2, 3], "steps": [3, 2, 1]}), {"combine": "max"},
         ValueError, "combine"),
        (pd.DataFrame({"batch_size": [1, 2, 3], "steps": [3, 2, 1]}), {"interval": "x"},
         ValueError, "interval"),
    ],
)
def test_bad_input(table, kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        fit_tradeoff(table, **kwargs)
