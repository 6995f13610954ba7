"""Fits are right with an honest interval, or say why they cannot be (issue: trust).

Each defect of v0.1 named in the trust issue has a test here that failed on v0.1:
intervals that excluded their own estimate (profile ends interpolated on a ~1 % grid),
degenerate fits printing the search-grid edge as B_crit, no warnings, unchecked options,
bootstrap memory growing with n_boot.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch.fit import (
    FitWarning,
    NotEnoughBatchSizes,
    StepsTable,
    critical_batch_curve,
    fit_power_law,
    fit_tradeoff,
    steps_to_target,
)
from empirical_batch.tradeoff import Tradeoff
from tests._synth_fit import synthetic_sweep, synthetic_table

B = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def _fit(frame, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return fit_tradeoff(frame, **kw)


# --- intervals contain their estimate -------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(
    b_crit=st.floats(2.0, 300.0),
    s_min=st.floats(10.0, 1e5),
    sigma=st.sampled_from([0.0, 1e-9, 1e-6, 1e-3, 0.05, 0.3]),
    interval=st.sampled_from(["profile", "f", "percentile"]),
    seed=st.integers(0, 1000),
)
def test_interval_always_contains_the_estimate(b_crit, s_min, sigma, interval, seed):
    t = Tradeoff.from_b_crit(b_crit, s_min=s_min)
    frame = synthetic_table(t, B, n_seeds=2, sigma=sigma, rng=seed)
    fit = _fit(frame, n_boot=50, seed=seed, interval=interval)
    lo, hi = fit.b_crit_interval
    assert lo <= fit.b_crit <= hi, (lo, fit.b_crit, hi)


def test_nearly_noise_free_data_no_longer_excludes_the_estimate():
    """v0.1: exact data rounded to whole steps gave e.g. 64.14 [64.3, 64.3]."""
    t = Tradeoff.from_b_crit(64.14, s_min=1000)
    frame = pd.DataFrame({"batch_size": B, "steps": np.round(t.steps(B))})
    fit = _fit(frame, n_boot=200, seed=0)
    lo, hi = fit.b_crit_interval
    assert lo <= fit.b_crit <= hi and hi - lo < 0.05 * fit.b_crit


def test_min_of_tied_seeds_gives_an_interval_with_the_estimate():
    t = Tradeoff.from_b_crit(30.0, s_min=500)
    s = np.round(t.steps(B))
    frame = pd.DataFrame({"batch_size": np.repeat(B, 3), "steps": np.repeat(s, 3)})
    fit = _fit(frame, n_boot=100, combine="min")
    assert fit.b_crit_interval[0] <= fit.b_crit <= fit.b_crit_interval[1]


@settings(max_examples=30, deadline=None)
@given(b_crit=st.floats(3.0, 200.0), s_min=st.floats(1.0, 1e6))
def test_fit_recovers_an_exact_hyperbola(b_crit, s_min):
    t = Tradeoff.from_b_crit(b_crit, s_min=s_min)
    fit = _fit(pd.DataFrame({"batch_size": B, "steps": t.steps(B)}), n_boot=0, interval="f")
    assert fit.b_crit == pytest.approx(b_crit, rel=1e-6)
    assert fit.s_min == pytest.approx(s_min, rel=1e-6)
    assert fit.status == "identified"


# --- statuses ----------------------------------------------------------------------
def test_steps_still_halving_is_a_lower_bound_not_the_grid_edge():
    """v0.1 printed B_crit = 4.096e+06 (1000x the largest batch) with '(extrapolated)'."""
    rng = np.random.default_rng(0)
    b = np.array(B, dtype=float)
    steps = 1e6 / b * np.exp(0.02 * rng.normal(size=b.size))
    frame = pd.DataFrame({"batch_size": b, "steps": steps})
    for interval in ("profile", "f", "percentile"):
        fit = _fit(frame, n_boot=200, seed=0, interval=interval)
        assert fit.status == "lower_bound", interval
        assert math.isinf(fit.b_crit_interval[1]) and 0 < fit.b_crit_bound < 1e5
    assert "lower bound only" in repr(fit) and "lower bound only" in fit.summary()
    assert f"{fit.b_crit:.4g}" not in repr(fit)
    # S_min is not determined by a lower-bound fit (steps still fall like 1/B): the
    # summary says so instead of printing the fitted curve's value
    assert f"{fit.s_min:.4g}" not in fit.summary()
    assert "S_min not determined" in fit.summary()
    assert f"E_min = {fit.e_min:.4g}" in fit.summary()


def test_no_bend_at_all_is_unidentified_or_bounded_never_identified():
    b = np.array(B, dtype=float)
    frame = pd.DataFrame({"batch_size": b, "steps": np.full(b.size, 100.0) *
                          np.exp(0.05 * np.random.default_rng(1).normal(size=b.size))})
    fit = _fit(frame, n_boot=200, seed=0)
    assert fit.status in ("upper_bound", "unidentified")
    assert fit.b_crit_interval[0] == 0


def test_status_unknown_without_an_interval():
    t = Tradeoff.from_b_crit(30.0, s_min=500)
    frame = synthetic_table(t, B, sigma=0.05, rng=0)
    assert _fit(frame, n_boot=0).status == "unknown"
    assert _fit(frame, n_boot=0, interval="f").status == "identified"


def test_curve_carries_statuses_and_plots_bounds():
    t = Tradeoff.from_b_crit(20.0, s_min=300)
    sweep = synthetic_sweep(t, [4, 8, 16, 32, 64, 128, 256], rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        curve = critical_batch_curve(sweep, [1.0, 0.5], n_boot=50)
    assert "status" in curve.to_frame().columns and len(repr(curve)) < 300
    assert set(curve.status) <= {"identified", "lower_bound", "upper_bound", "unidentified"}


# --- warnings ----------------------------------------------------------------------
def test_warns_when_best_lr_sits_at_the_grid_edge():
    t = Tradeoff.from_b_crit(20.0, s_min=300)
    sweep = synthetic_sweep(t, [4, 8, 16, 32, 64, 128], lr_factors=(0.25, 0.5), rng=0,
                            lr_penalty=0.0)
    table = steps_to_target(sweep, 1.0)
    assert table.lr_at_grid_edge.all()
    with pytest.warns(FitWarning, match="edge of its grid"):
        fit = fit_tradeoff(table, n_boot=50)
    assert any("edge of its grid" in w for w in fit.warnings)


def test_warns_when_steps_rise_with_batch_size():
    frame = pd.DataFrame({"batch_size": B, "steps": Tradeoff.from_b_crit(30, s_min=100).steps(B)})
    frame.loc[7, "steps"] *= 3
    with pytest.warns(FitWarning, match="rise with batch size"):
        fit_tradeoff(frame, n_boot=0, interval="f")


def test_warns_with_fewer_than_three_batch_sizes_on_a_side():
    t = Tradeoff.from_b_crit(300.0, s_min=100)
    b = [8, 16, 32, 64, 128]
    frame = pd.DataFrame({"batch_size": b, "steps": t.steps(b)})
    with pytest.warns(FitWarning, match="fewer than 3 on a side"):
        fit_tradeoff(frame, n_boot=0, interval="f")


def test_warns_when_n_boot_is_too_small_for_the_level():
    t = Tradeoff.from_b_crit(30.0, s_min=500)
    frame = synthetic_table(t, B, sigma=0.05, rng=0)
    with pytest.warns(FitWarning, match="n_boot=50"):
        fit_tradeoff(frame, n_boot=50, level=0.95)


def test_no_warning_on_a_clean_fit():
    t = Tradeoff.from_b_crit(30.0, s_min=500)
    frame = synthetic_table(t, B, sigma=0.02, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FitWarning)
        fit = fit_tradeoff(frame, n_boot=1000)
    assert fit.warnings == ()


# --- results as objects -------------------------------------------------------------
def test_results_are_objects_with_short_reprs():
    t = Tradeoff.from_b_crit(20.0, s_min=300)
    sweep = synthetic_sweep(t, [4, 8, 16, 32, 64, 128], rng=0)
    table = steps_to_target(sweep, 1.0)
    assert isinstance(table, StepsTable) and len(repr(table)) < 300
    assert table.target == 1.0 and table.combine == "mean" and table.direction == "lower"
    assert table["steps"].equals(table.frame["steps"]) and len(table) == 6
    assert all(len(s) == 2 for s in table.seed_steps)
    fit = _fit(table, n_boot=100)
    assert len(repr(fit)) < 300 and fit.target == 1.0
    assert "S_min" in fit.summary()
    with pytest.raises(AttributeError):
        table.target = 2.0  # frozen


def test_no_metadata_in_dataframe_attrs_anywhere_in_the_package():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "empirical_batch"
    offenders = [str(p) for p in root.rglob("*.py") if ".attrs" in p.read_text()]
    assert offenders == []


def test_no_module_imports_a_private_name_of_another():
    """`from .x import _name` across modules of the package (the issue's rule)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "empirical_batch"
    bad = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        bad.append(f"{path.relative_to(root)}: {node.module}.{alias.name}")
    assert bad == []


# --- options are checked ------------------------------------------------------------
FRAME = synthetic_table(Tradeoff.from_b_crit(30.0, s_min=500), B, sigma=0.05, rng=0)


@pytest.mark.parametrize(
    "kwargs, exc, word",
    [
        (dict(level=0.0), ValueError, "level"),
        (dict(level=1.0), ValueError, "level"),
        (dict(level=-0.5), ValueError, "level"),
        (dict(level=float("nan")), ValueError, "level"),
        (dict(level="high"), (TypeError, ValueError), "level"),
        (dict(n_boot=-1), ValueError, "n_boot"),
        (dict(n_boot=1.5), ValueError, "n_boot"),
        (dict(n_boot=True), ValueError, "n_boot"),
        (dict(interval="bogus"), ValueError, "interval"),
        (dict(bootstrap="bogus"), ValueError, "bootstrap"),
        (dict(bootstrap="seeds"), ValueError, "seeds"),
        (dict(combine="max"), ValueError, "combine"),
    ],
)
def test_fit_tradeoff_options(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        fit_tradeoff(FRAME, **kwargs)


@pytest.mark.parametrize(
    "table, exc, word",
    [
        ([1, 2, 3], TypeError, "StepsTable or a pandas DataFrame"),
        (pd.DataFrame({"b": [1]}), ValueError, "batch_size"),
        (pd.DataFrame({"batch_size": [1, 2, 4], "steps": [3.0, -1.0, 1.0]}), ValueError, "> 0"),
        (pd.DataFrame({"batch_size": [1, 2, 4], "steps": [3.0, np.nan, 1.0]}), ValueError,
         "finite"),
        (pd.DataFrame({"batch_size": [0, 2, 4], "steps": [3.0, 2.0, 1.0]}), ValueError,
         "batch_size"),
        (pd.DataFrame({"batch_size": [1, 2], "steps": [3.0, 2.0]}), NotEnoughBatchSizes,
         "at least 3"),
    ],
)
def test_fit_tradeoff_bad_tables(table, exc, word):
    with pytest.raises(exc, match=word):
        fit_tradeoff(table, n_boot=0, interval="f")


def test_curve_reports_only_unreached_targets_and_raises_on_bad_options():
    t = Tradeoff.from_b_crit(20.0, s_min=300)
    sweep = synthetic_sweep(t, [4, 8, 16, 32, 64, 128], rng=0)
    for bad, word in [(dict(interval="bogus"), "interval"), (dict(level=2.0), "level"),
                      (dict(n_boot=-3), "n_boot"), (dict(combine="max"), "combine")]:
        with pytest.raises(ValueError, match=word):
            critical_batch_curve(sweep, [1.0], errors="report", **bad)
    for targets in ([np.nan], [np.inf, 1.0]):
        with pytest.raises(ValueError, match="finite"):
            critical_batch_curve(sweep, targets, errors="report")


@pytest.mark.parametrize("target", [np.nan, np.inf, -np.inf])
def test_steps_to_target_refuses_non_finite_targets(target):
    sweep = synthetic_sweep(Tradeoff.from_b_crit(20.0, s_min=300), [4, 8, 16], rng=0)
    with pytest.raises(ValueError, match="finite"):
        steps_to_target(sweep, target)


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1])
def test_fit_power_law_checks_its_level(level):
    with pytest.raises(ValueError, match="level"):
        fit_power_law([1, 2, 4, 8], [1.0, 2.1, 3.9, 8.2], level=level)


# --- bootstrap memory is bounded ------------------------------------------------------
def test_bootstrap_is_processed_in_chunks(monkeypatch):
    from empirical_batch.fit import tradeoff_intervals

    sizes = []
    real = tradeoff_intervals.fit_many

    def spy(Y, *a, **k):
        sizes.append(Y.shape[0])
        return real(Y, *a, **k)

    monkeypatch.setattr(tradeoff_intervals, "BOOT_CHUNK", 300)
    monkeypatch.setattr(tradeoff_intervals, "fit_many", spy)
    fit = _fit(FRAME, n_boot=1000, seed=0)
    assert sizes == [300, 300, 300, 100]
    assert fit.b_crit_interval[0] < fit.b_crit < fit.b_crit_interval[1]


@settings(max_examples=30, deadline=None)
@given(t1=st.floats(0.2, 1.4), t2=st.floats(0.2, 1.4), seed=st.integers(0, 100))
def test_steps_to_target_is_monotone_in_the_target(t1, t2, seed):
    """A harder target (lower loss) never takes fewer steps, at any batch size."""
    sweep = synthetic_sweep(Tradeoff.from_b_crit(20.0, s_min=300), [4, 16, 64], rng=seed)
    easy, hard = max(t1, t2), min(t1, t2)
    a = steps_to_target(sweep, easy).frame
    b = steps_to_target(sweep, hard).frame
    both = a["reached"].to_numpy() & b["reached"].to_numpy()
    assert np.all(b["steps"].to_numpy()[both] >= a["steps"].to_numpy()[both] - 1e-9)
    assert not np.any(b["reached"].to_numpy() & ~a["reached"].to_numpy())


def test_level_is_the_name_and_ci_is_removed():
    a = _fit(FRAME, level=0.9, n_boot=0, interval="f")
    assert a.b_crit_interval.level == a.level == 0.9
    with pytest.raises(TypeError, match=r"ci= was removed in 0\.4; use level="):
        fit_tradeoff(FRAME, ci=0.9)
    assert fit_power_law([1, 2, 4, 8], [1.0, 2.1, 3.9, 8.2], level=0.8).level == 0.8
