"""A value the data do not determine is NaN or a bound with a status, in every table,
repr and JSON; fits on top of fits use the identified rows only."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch.fit import FitWarning, critical_batch_curve, fit_power_law, fit_tradeoff
from empirical_batch.tradeoff import Tradeoff
from tests._synth_fit import synthetic_sweep

B = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], dtype=float)


def _quiet(func, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return func(*args, **kw)


def _halving(seed=0, sigma=0.03):
    steps = 1e6 / B * np.exp(sigma * np.random.default_rng(seed).normal(size=B.size))
    return pd.DataFrame({"batch_size": B, "steps": steps})


@settings(max_examples=15, deadline=None)
@given(data_seed=st.integers(0, 10_000), s1=st.integers(0, 10_000), s2=st.integers(0, 10_000))
def test_a_lower_bound_does_not_move_with_the_random_stream(data_seed, s1, s2):
    # the status itself can tip with the draws at the border between a bound and an
    # identified B_crit (benchmarks/bound_stability.py counts how often); the bound, once
    # reported, depends on the data only
    frame = _halving(data_seed)
    a = _quiet(fit_tradeoff, frame, n_boot=200, seed=s1)
    b = _quiet(fit_tradeoff, frame, n_boot=200, seed=s2)
    if a.status == b.status == "lower_bound":
        assert a.b_crit_bound == b.b_crit_bound
        assert 0 < a.b_crit_bound < 0.5 * 1000 * B.max()  # inside the searched range


@pytest.mark.parametrize("data_seed", [5, 15, 61])
def test_the_f_interval_decides_the_status_from_the_data_alone(data_seed):
    # data sets whose bootstrap-calibrated status tips with the seed
    frame = _halving(data_seed)
    fits = [_quiet(fit_tradeoff, frame, n_boot=50, seed=s, interval="f") for s in range(3)]
    assert len({f.status for f in fits}) == 1
    assert len({f.b_crit_interval for f in fits}) == 1


def test_bounds_are_not_point_values_in_tables_json_or_repr():
    fit = _quiet(fit_tradeoff, _halving(), n_boot=200)
    assert fit.status == "lower_bound"
    d = fit.to_dict()
    assert math.isnan(d["b_crit"]) and math.isnan(d["s_min"]) and d["e_min"] > 0
    assert d["b_crit_bound"] == fit.b_crit_bound
    assert f"{fit.b_crit:.4g}" not in repr(fit)


def test_curve_frame_repr_and_power_law_use_identified_rows_only():
    # steps fall like 1/B over the whole grid at the late targets (B_crit grows with
    # progress beyond the largest batch), and bend inside it at the early ones
    rows = []
    rng = np.random.default_rng(0)
    for b in [4, 8, 16, 32, 64, 128, 256]:
        for k in range(2):
            # metric = log-progress; B_crit(L) = 10 * exp(3 (1 - L)): 10 .. 2e4
            steps = np.geomspace(1, 1e6, 400)
            noise = np.exp(0.03 * rng.standard_normal())
            # progress at step s: the target L is reached at S(B; L) = s_min(L)(1 + bc/B)
            loss = []
            for s in steps:
                lo, hi = 0.0, 3.0
                for _ in range(60):  # bisection on L: S(B; L) increasing in 3 - L
                    mid = (lo + hi) / 2
                    need = 100 * math.exp(3 - mid) * (1 + 10 * math.exp(3 * (3 - mid)) / b)
                    lo, hi = (mid, hi) if need * noise > s else (lo, mid)
                loss.append(lo)
            rows.append(pd.DataFrame({"run": f"b{b}-s{k}", "batch_size": b,
                                      "learning_rate": 0.1, "seed": k, "step": steps,
                                      "loss": loss}))
    sweep = pd.concat(rows, ignore_index=True)
    targets = [2.6, 2.4, 2.2, 2.0, 1.6, 1.2, 0.9]
    curve = _quiet(critical_batch_curve, sweep, targets, n_boot=200, errors="report")
    frame = curve.to_frame()
    assert "b_crit_bound" in frame.columns
    ident = frame["status"] == "identified"
    assert ident.sum() >= 3 and (frame["status"] == "lower_bound").any()
    # no number where the data give a bound only
    assert frame.loc[~ident & (frame["status"] != "unknown"), "b_crit"].isna().all()
    low = frame["status"] == "lower_bound"
    true_bc = 10 * np.exp(3 * (3 - frame["target"]))
    assert (frame.loc[low, "b_crit_bound"] < 1.5 * true_bc[low]).all()  # a bound, not 1000x
    assert (frame["b_crit"].dropna() < 256 * 100).all()
    assert "B_crit >" in repr(curve) and len(repr(curve)) < 300
    # the docs' power-law recipe: identified rows only
    law = fit_power_law(frame.loc[ident, "target"], frame.loc[ident, "b_crit"])
    assert law.exponent < 0  # B_crit grows as the loss falls
    with pytest.raises(ValueError, match="finite"):
        fit_power_law(frame["target"], frame["b_crit"])
    from empirical_batch.fit import fit_b_crit_law

    assert fit_b_crit_law(curve).n == ident.sum()  # identified rows by default
    with pytest.raises(ValueError, match="fit identified rows only"):
        fit_b_crit_law(curve, statuses=("identified", "lower_bound"))
    json.dumps(curve.to_dict(), default=float)
    from empirical_batch.plot.fit import plot_critical_batch_curve

    ax = plot_critical_batch_curve(curve)
    assert any("lower bound only" in t.get_text() for t in ax.get_legend().get_texts())


def test_empty_target_list_gives_an_empty_curve_with_a_repr():
    t = Tradeoff.from_b_crit(20.0, s_min=300)
    sweep = synthetic_sweep(t, [4, 8, 16, 32], rng=0)
    curve = critical_batch_curve(sweep, [], n_boot=10)
    assert len(curve.to_frame()) == 0 and "b_crit" in curve.to_frame().columns
    assert "0 targets" in repr(curve)
    assert "target" in curve.summary()
    assert curve.b_crit.size == 0


# ------------------------------------------------------------------ fixed budget
def _budget_frame(b_grid, flat=False):
    def loss(c, b, lr):
        if flat:
            return np.full(np.shape(b), 2.0)
        return 2 + 0.01 * (np.log(b / (0.3 * c**0.33)) ** 2
                           + np.log(lr * c**0.125 / 0.3) ** 2)

    rows = [(c, b, lr, float(loss(c, b, lr))) for c in np.geomspace(1e17, 1e21, 9)
            for b in b_grid for lr in np.geomspace(1e-5, 1, 25)]
    return pd.DataFrame(rows, columns=["compute", "batch_size", "learning_rate", "loss"])


def test_fixed_budget_with_every_optimum_at_the_largest_batch_is_not_identified():
    from empirical_batch.budget import fit_fixed_budget

    frame = _budget_frame(2.0 ** np.arange(4, 12))  # B* = 1e5 .. 2e6, grid stops at 2048
    with pytest.warns(FitWarning, match="b_opt"):
        f = fit_fixed_budget(frame, n_boot=100)
    assert f.b_opt_status == "unidentified" and math.isnan(f.b_opt.exponent)
    assert math.isnan(f.b_opt_exponent_interval.low)
    assert f.optima["b_opt_at_edge"].all()
    assert "B_opt not identified" in repr(f) and "^0.000" not in repr(f)
    assert f.lr_opt_status == "identified"
    assert f.lr_opt.exponent == pytest.approx(-0.125, abs=0.03)
    assert f.to_dict()["b_opt_status"] == "unidentified"


def test_fixed_budget_flat_loss_identifies_neither_law():
    from empirical_batch.budget import fit_fixed_budget

    with pytest.warns(FitWarning):
        f = fit_fixed_budget(_budget_frame(2.0 ** np.arange(8, 26), flat=True), n_boot=50)
    assert (f.b_opt_status, f.lr_opt_status) == ("unidentified", "unidentified")
    assert "not identified" in repr(f)


def test_fixed_budget_law_uses_the_budgets_inside_the_grid_only():
    from empirical_batch.budget import fit_fixed_budget

    # the grid stops at 2^21: the largest budgets' bands reach it
    with pytest.warns(FitWarning, match="left out"):
        f = fit_fixed_budget(_budget_frame(2.0 ** np.arange(8, 22)), n_boot=100)
    assert f.b_opt_status == "identified"
    assert f.optima["b_opt_at_edge"].any() and not f.optima["b_opt_at_edge"].all()
    assert f.b_opt.exponent == pytest.approx(0.33, abs=0.05)


# ------------------------------------------------------------ learning-rate laws
@pytest.mark.parametrize("family", ["power", "sgd", "surge"])
def test_lr_law_whose_rates_still_rise_at_the_largest_batch_is_a_bound(family):
    from empirical_batch.fit import fit_lr_scaling

    b = 2.0 ** np.arange(2, 11)
    lr = 1e-3 * b * np.exp(0.01 * np.random.default_rng(0).normal(size=b.size))
    table = pd.DataFrame({"batch_size": b, "learning_rate": lr})
    with pytest.warns(FitWarning, match="only a lower bound"):
        f = fit_lr_scaling(table, family=family, n_boot=100)
    assert f.status == "lower_bound"
    assert f.b_star_interval.high == math.inf and f.b_star_bound == f.b_star_interval.low
    assert 0 < f.b_star_bound < 0.5 * 1000 * b.max()  # not the edge of the searched range
    with pytest.warns(FitWarning):
        other = fit_lr_scaling(table, family=family, n_boot=100, seed=7)
    assert other.b_star_bound == f.b_star_bound  # the data fix it, not the draws
    d = f.to_dict()
    assert math.isnan(d["b_star"]) and d["b_star_bound"] == f.b_star_bound
    assert f"{f.b_star:.4g}" not in repr(f) and "lower_bound" in repr(f)
    # the law still evaluates inside the measured range
    assert f.learning_rate(64.0) == pytest.approx(0.064, rel=0.05)


def test_lr_law_with_a_bend_inside_the_grid_stays_identified():
    from empirical_batch.fit import fit_lr_scaling

    b = 2.0 ** np.arange(2, 11)
    table = pd.DataFrame({"batch_size": b, "learning_rate": 0.1 / (1 + 64 / b)})
    with warnings.catch_warnings():
        warnings.simplefilter("error", FitWarning)
        f = fit_lr_scaling(table, family="sgd", n_boot=100)
    assert f.status == "identified" and f.b_star == pytest.approx(64, rel=1e-4)
    assert "B*=64" in repr(f)


# ------------------------------------------------------- branched and throughput
def test_branched_refuses_a_loss_list_of_the_wrong_length():
    from empirical_batch.branched import branched_critical_batch

    for wrong in (lambda n: n - 1, lambda n: n + 3, lambda n: 1):
        def train_steps(state, batch_size, lr, n_steps, seed=0, wrong=wrong):
            n = n_steps if batch_size == 32 else wrong(n_steps)
            return state, [1.0 + 1e-3 * seed] * max(n, 1)

        with pytest.raises(ValueError, match=r"losses for factor .* one loss per step"):
            branched_critical_batch(train_steps, None, 32, examples=32 * 64, lr=1e-3)


def test_throughput_fit_that_misses_the_timings_is_flagged():
    from empirical_batch.throughput import fit_throughput

    m = np.array([8, 16, 32, 64, 8, 16, 32, 64])
    good = 0.02 + 0.00125 * m
    t = pd.DataFrame({"micro_batch": m, "step_seconds": good * np.array(
        [1, 2.2, 0.5, 1.8, 2.0, 0.6, 1.9, 0.55])})
    from empirical_batch.errors import EmpiricalBatchWarning

    with pytest.warns(EmpiricalBatchWarning, match="misses the timings"):
        model = fit_throughput(t)
    assert model.status == "poor_fit" and model.rms_relative_error > 0.1
    assert "POOR FIT" in repr(model) and model.to_dict()["status"] == "poor_fit"
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmpiricalBatchWarning)
        ok = fit_throughput(pd.DataFrame({"micro_batch": m, "step_seconds": good}))
    assert ok.status == "fitted"


def _flat(seed=0, sigma=0.03):
    steps = 1e4 * np.exp(sigma * np.random.default_rng(seed).normal(size=B.size))
    return pd.DataFrame({"batch_size": B, "steps": steps})


@pytest.mark.parametrize("make, status, open_", [(_halving, "lower_bound", ("s_min",)),
                                                 (_flat, "upper_bound", ("e_min",))])
def test_a_bound_fit_holds_and_prints_no_number_it_does_not_determine(
        make, status, open_, tmp_path, capsys):
    from empirical_batch.cli import main
    from empirical_batch.transfer import transfer

    fit = _quiet(fit_tradeoff, make(), n_boot=400)
    assert fit.status == status
    # the attributes themselves: no 1000x-the-largest-batch point value
    assert math.isnan(fit.b_crit) and fit.b_crit_bound > 0
    for k in ("s_min", "e_min"):
        value = getattr(fit, k)
        assert math.isnan(value) if k in open_ else value > 0
        if k in open_:  # the open quantity keeps its upper end only
            assert getattr(fit, f"{k}_interval").low == 0
            assert k not in repr(fit)
            assert f"{k.upper().replace('_MIN', '_min')} not determined" in fit.summary()
    # the fitted curve still draws the fitted values
    assert np.isfinite(fit.to_frame()["steps_fit"]).all()
    d = json.loads(fit.to_json())
    assert d["b_crit"] is None and all(d[k] is None for k in open_)
    assert "_curve" not in d
    path = tmp_path / "sweep.csv"
    make().to_csv(path, index=False)
    assert main(["fit", str(path), "--fractional-steps", "--n-boot", "400"]) == 0
    out = capsys.readouterr().out
    for k in open_:
        name = k.replace("s_min", "S_min").replace("e_min", "E_min")
        assert f"{name} not determined" in out and f"{name} =" not in out
    with pytest.raises(ValueError, match="not S_min and E_min"):
        transfer({"total_steps": 1000}, 64, 128, optimizer="sgd", tradeoff=fit)
