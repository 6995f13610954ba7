"""steps_to_target: first crossing, interpolation, seeds, best configuration,
unreached and diverged runs — checked against a plain per-run loop."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from empirical_batch.fit import fit_tradeoff, steps_to_target
from empirical_batch.sweeps import load_sweep


def _brute_first_crossing(steps, values, target):
    """Independent reference: walk the points; metric linear in log(step) between them."""
    if any(not math.isfinite(v) for v in values):
        return math.nan
    for i, (s, v) in enumerate(zip(steps, values, strict=True)):
        if v <= target:
            if i == 0:
                return float(s)
            s0, v0 = steps[i - 1], values[i - 1]
            frac = (v0 - target) / (v0 - v) if v0 != v else 1.0
            if s0 > 0:
                return math.exp(math.log(s0) + frac * (math.log(s) - math.log(s0)))
            return s0 + frac * (s - s0)
    return math.nan


@st.composite
def _sweeps(draw):
    n_runs = draw(st.integers(1, 6))
    rows = []
    for r in range(n_runs):
        n = draw(st.integers(1, 8))
        steps = sorted(draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n,
                                     unique=True)))
        vals = draw(st.lists(st.floats(0, 5, allow_nan=False), min_size=n, max_size=n))
        if draw(st.booleans()) and draw(st.booleans()):
            vals[draw(st.integers(0, n - 1))] = float("nan")
        b = draw(st.sampled_from([4, 8, 16]))
        for s, v in zip(steps, vals, strict=True):
            rows.append({"run": f"r{r}", "batch_size": b, "learning_rate": 0.1 * (r + 1),
                         "step": s, "loss": v})
    return pd.DataFrame(rows)


@given(_sweeps(), st.floats(0.1, 4.9))
def test_matches_brute_force(df, target):
    sweep = load_sweep(df)
    table = steps_to_target(sweep, target, combine="min", config="run")
    for b, g in df.groupby("batch_size"):
        ref = [
            _brute_first_crossing(r["step"].tolist(), r["loss"].tolist(), target)
            for _, r in g.groupby("run")
        ]
        ref = [v for v in ref if math.isfinite(v)]
        row = table[table["batch_size"] == b].iloc[0]
        if ref:
            assert row["reached"]
            assert row["steps"] == pytest.approx(min(ref), rel=1e-12)
            assert row["examples"] == pytest.approx(min(ref) * b, rel=1e-9)
        else:
            assert not row["reached"] and math.isnan(row["steps"])


def _curve(run, b, lr, s_hit, seed=0, n=30):
    """metric = 1 - log(step / s_hit): linear in log step, crosses 1.0 exactly at s_hit."""
    steps = np.geomspace(s_hit / 10, s_hit * 10, n).round(6)
    return pd.DataFrame({"run": run, "batch_size": b, "learning_rate": lr, "seed": seed,
                         "step": steps, "loss": 1 - np.log(steps / s_hit)})


def test_interpolation_exact_for_log_linear_curves():
    df = _curve("a", 8, 0.1, 1234.5)
    t = steps_to_target(df, 1.0)
    assert t["steps"].iloc[0] == pytest.approx(1234.5, rel=1e-9)
    assert t["examples"].iloc[0] == pytest.approx(8 * 1234.5, rel=1e-9)


def test_best_learning_rate_and_seed_combination():
    df = pd.concat([
        _curve("lo-0", 8, 0.1, 300, 0), _curve("lo-1", 8, 0.1, 500, 1),
        _curve("hi-0", 8, 0.2, 350, 0), _curve("hi-1", 8, 0.2, 370, 1),
    ])
    mean = steps_to_target(df, 1.0, combine="mean").iloc[0]
    assert mean["learning_rate"] == 0.2 and mean["steps"] == pytest.approx(360)
    assert mean["n_runs"] == 2 and mean["n_configs"] == 2
    assert sorted(mean["seed_steps"]) == pytest.approx([350, 370])
    mn = steps_to_target(df, 1.0, combine="min").iloc[0]
    assert mn["learning_rate"] == 0.1 and mn["steps"] == pytest.approx(300)
    med = steps_to_target(df, 1.0, combine="median").iloc[0]
    assert med["steps"] == pytest.approx(360)


def test_higher_is_better():
    df = _curve("a", 8, 0.1, 100)
    df["acc"] = -df.pop("loss")
    s = load_sweep(df, metric="acc", higher_is_better=True)
    assert steps_to_target(s, -1.0)["steps"].iloc[0] == pytest.approx(100)


def test_unreached_batch_sizes_are_reported_not_dropped():
    df = pd.concat([_curve("a", 8, 0.1, 100), _curve("b", 16, 0.1, 1e9)])
    df.loc[df["run"] == "b", "loss"] = 5.0  # never gets below 5
    t = steps_to_target(df, 1.0)
    assert t["batch_size"].tolist() == [8.0, 16.0]
    assert t["reached"].tolist() == [True, False]
    assert math.isnan(t["steps"].iloc[1])


def test_mean_needs_every_seed_min_needs_one():
    df = pd.concat([_curve("a0", 8, 0.1, 100, 0), _curve("a1", 8, 0.1, 100, 1)])
    df.loc[df["run"] == "a1", "loss"] = 3.0
    assert not steps_to_target(df, 1.0, combine="mean")["reached"].iloc[0]
    assert not steps_to_target(df, 1.0, combine="median")["reached"].iloc[0]
    assert steps_to_target(df, 1.0, combine="min")["reached"].iloc[0]


def test_diverged_run_never_reaches():
    df = _curve("a", 8, 0.1, 100)
    df.loc[df.index[-1], "loss"] = np.nan  # diverged after reaching the target
    t = steps_to_target(df, 1.0)
    assert not t["reached"].iloc[0] and t["n_diverged"].iloc[0] == 1


def test_all_diverged_clear_error():
    df = pd.concat([_curve(f"r{b}", b, 0.1, 100) for b in (8, 16, 32, 64)])
    df.loc[df["step"] > 50, "loss"] = np.inf
    t = steps_to_target(df, 1.0)
    assert not t["reached"].any() and (t["n_diverged"] == 1).all()
    with pytest.raises(ValueError, match=r"only 0 batch size\(s\) reached the target 1"):
        fit_tradeoff(t)


def test_fewer_than_three_batch_sizes_reaching():
    df = pd.concat([_curve(f"r{b}", b, 0.1, 100 * (1 + 64 / b)) for b in (8, 16, 32, 64)])
    df.loc[df["batch_size"] >= 32, "loss"] = 4.0
    with pytest.raises(ValueError, match=r"only 2 batch size\(s\).*unreached: \[32.0, 64.0\]"):
        fit_tradeoff(steps_to_target(df, 1.0))


def test_bad_arguments():
    df = _curve("a", 8, 0.1, 100)
    with pytest.raises(ValueError, match="combine"):
        steps_to_target(df, 1.0, combine="max")
    with pytest.raises(TypeError, match="target"):
        steps_to_target(df, "1.0")
    with pytest.raises(KeyError, match="config column"):
        steps_to_target(df, 1.0, config="nope")
    with pytest.raises(TypeError, match="sweep"):
        steps_to_target([1, 2], 1.0)


def test_the_combined_steps_are_the_seeds_one_truth():
    """A table's ``steps``/``examples`` are its seeds combined by its rule; a frame whose
    steps and seeds disagree is refused, by the table and by the fit (which reads the
    seeds), instead of one of them being silently ignored."""
    from dataclasses import replace

    from empirical_batch import read_result
    from empirical_batch.errors import InputError
    from empirical_batch.tradeoff import Tradeoff
    from tests._synth_fit import synthetic_sweep

    sweep = synthetic_sweep(Tradeoff(s_min=300.0, e_min=6000.0), [4, 8, 16, 32, 64, 128],
                            n_seeds=3, rng=1)
    for combine, how in (("mean", np.mean), ("median", np.median), ("min", np.min)):
        table = steps_to_target(sweep, 1.0, combine=combine)
        assert table.steps.tolist() == [float(how(s)) for s in table.seed_steps]
        assert table.examples.tolist() == [float(how(np.asarray(e)))
                                           for e in table["seed_examples"]]
    table = steps_to_target(sweep, 1.0)
    fit = fit_tradeoff(table, n_boot=100, seed=0)
    steps_only = table.frame.copy()
    steps_only.loc[0, "steps"] *= 1.5
    seeds_only = table.frame.copy()
    seeds_only["seed_steps"] = [tuple(1.5 * v for v in s) if i == 0 else s
                                for i, s in enumerate(seeds_only["seed_steps"])]
    for edited in (steps_only, seeds_only):
        with pytest.raises(InputError, match="seed_steps"):
            replace(table, frame=edited)
        with pytest.raises(InputError, match="seed_steps"):
            fit_tradeoff(edited, n_boot=100, seed=0)
    both = seeds_only.copy()
    both.loc[0, "steps"] *= 1.5
    moved = fit_tradeoff(replace(table, frame=both), n_boot=100, seed=0)
    assert moved.steps[0] == pytest.approx(1.5 * fit.steps[0], rel=1e-12)
    assert moved.status == fit.status == "identified"
    assert moved.b_crit > 1.2 * fit.b_crit
    assert fit_tradeoff(both, n_boot=100, seed=0).b_crit == moved.b_crit
    back = read_result(table.to_json())  # the seeds read back as lists: still one truth
    assert back.steps.tolist() == table.steps.tolist()
    assert fit_tradeoff(back, n_boot=100, seed=0).b_crit == fit.b_crit
    table.frame.loc[0, "steps"] *= 1.5  # an edit in place: the fit refuses it too
    with pytest.raises(InputError, match="seed_steps"):
        fit_tradeoff(table, n_boot=100, seed=0)
