"""The claims table and the growth/exponent intervals of the validation study."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from empirical_batch.harness.sweep import load_sweeps
from empirical_batch.validation.claims import claims_table
from empirical_batch.validation.curves import b_crit_points, select
from empirical_batch.validation.uncertainty import (
    SeedPool,
    growth_and_exponent,
    log_slope,
    resample_seeds,
)

SWEEPS = Path(__file__).resolve().parents[1] / "data" / "harness-full" / "sweeps"


def _crit(task, opt, rows, avg=None):
    """Rows (target, B_crit, lo, hi, B_simple, B_noise); ``avg``: the averaged (B_simple,
    B_noise) per row (default: the same as at the target)."""
    avg = avg or [(r[4], r[5]) for r in rows]
    return pd.DataFrame([{"task": task, "optimizer": opt, "target": t, "b_crit": c,
                          "b_crit_low": lo, "b_crit_high": hi, "b_simple": bs, "b_noise": bn,
                          "b_simple_avg": bsa, "b_noise_avg": bna}
                         for (t, c, lo, hi, bs, bn), (bsa, bna) in zip(rows, avg, strict=True)])


def _t1(task, opt, start, avg, target_start=1.0, target_avg=0.1):
    (c0, lo0, hi0), (c1, lo1, hi1) = start, avg
    return {"task": task, "optimizer": opt, "target_start": target_start,
            "b_crit_start": c0, "b_crit_start_low": lo0, "b_crit_start_high": hi0,
            "target_averaged": target_avg, "b_crit_averaged": c1, "b_crit_averaged_low": lo1,
            "b_crit_averaged_high": hi1, "b_crit_growth": c1 / c0, "target_common": target_avg,
            "b_crit_common": c1, "b_crit_common_low": lo1, "b_crit_common_high": hi1,
            "b_crit_growth_low": lo1 / hi0, "b_crit_growth_high": hi1 / lo0}


def _verdict(table, task, opt, claim):
    row = table[(table.task == task) & (table.optimizer == opt) & (table.claim == claim)]
    assert len(row) == 1, (task, opt, claim)
    return row.iloc[0]["verdict"]


def test_each_verdict_follows_its_interval():
    crit = pd.concat([
        # task A / sgd: B_crit/B_simple in [0.5, 2] everywhere; B_noise always closer
        _crit("A", "sgd", [(1.0, 20, 15, 25, 30, 22), (0.1, 400, 300, 500, 200, 390)]),
        # task A / adam: one target 100x below B_simple with a tight interval: fails (a);
        # B_simple closer at every target (e)
        _crit("A", "adam", [(1.0, 20, 18, 22, 20, 60), (0.1, 5, 4, 6, 500, 1000)]),
        # task B / sgd: interval straddling 1/10 (a undecided); e undecided (interval
        # straddles the midpoint between the scales)
        _crit("B", "sgd", [(1.0, 10, 5, 200, 100, 20)]),
    ], ignore_index=True)
    t1 = pd.DataFrame([
        _t1("A", "sgd", (20, 15, 25), (400, 300, 500)),      # growth >= 12 for sure
        _t1("A", "adam", (20, 18, 22), (10, 9, 11)),         # shrinks: <= 0.61 for sure
        _t1("B", "sgd", (10, 5, 20), (15, 4, 160)),          # growth 0.2..32: undecided
    ])
    one = pd.DataFrame({"task": ["A"] * 20, "eps_opt": 1.0, "eps_opt_low": 0.9,
                        "eps_opt_high": 1.1, "eps_opt_pred_fit": [1.0] * 19 + [1.5],
                        "dl_opt": 1.0, "dl_opt_low": 0.9, "dl_opt_high": 1.1,
                        "dl_opt_pred_fit": [1.0] * 14 + [2.0] * 6})
    c = claims_table(crit, t1, one)
    assert set(c.columns) >= {"task", "optimizer", "claim", "verdict", "value", "lo", "hi",
                              "evidence"}
    assert _verdict(c, "A", "sgd", "a") == "holds"
    assert _verdict(c, "A", "adam", "a") == "does not hold"
    assert _verdict(c, "B", "sgd", "a") == "undecided"
    assert _verdict(c, "A", "sgd", "b") == "holds"
    assert _verdict(c, "A", "adam", "b") == "does not hold"
    assert _verdict(c, "B", "sgd", "b") == "undecided"
    # one-step: 1 miss of 20 is sampling error; 6 misses of 20 are not (P ~ 3e-4)
    assert _verdict(c, "A", "sgd", "c") == "does not hold"
    assert "19/20" in c[(c.task == "A") & (c.claim == "c")].iloc[0]["evidence"]
    assert _verdict(c, "B", "sgd", "c") == "not tested"  # no one-step rows for B
    # Adam vs SGD at the hardest target: Adam [9, 11] below SGD [300, 500]
    assert _verdict(c, "A", "adam vs sgd", "d") == "does not hold"
    assert _verdict(c, "B", "adam vs sgd", "d") == "not tested"
    assert _verdict(c, "A", "sgd", "e") == "holds"
    assert _verdict(c, "A", "adam", "e") == "does not hold"
    assert _verdict(c, "B", "sgd", "e") == "undecided"
    # rows grouped by task in the order given, claims in order within a task
    assert list(dict.fromkeys(c.task)) == ["A", "B"]
    one_ok = one.assign(dl_opt_pred_fit=1.0)
    assert _verdict(claims_table(crit, t1, one_ok), "A", "sgd", "c") == "holds"
    with pytest.raises(ValueError, match="crit lacks"):
        claims_table(crit.drop(columns="b_crit"), t1, one)


def test_adam_claim_holds_when_its_interval_is_above():
    crit = pd.concat([_crit("A", o, [(1.0, 20, 15, 25, 30, 22)]) for o in ("sgd", "adam")])
    t1 = pd.DataFrame([_t1("A", "sgd", (20, 15, 25), (100, 80, 120)),
                       _t1("A", "adam", (20, 15, 25), (300, 200, 400))])
    c = claims_table(crit, t1)
    row = c[c.claim == "d"].iloc[0]
    assert row["verdict"] == "holds" and row["value"] == pytest.approx(3.0)
    assert row["lo"] == pytest.approx(200 / 120)


def test_log_slope_and_seed_resampling():
    assert log_slope([1, 2, 4], [3, 12, 48]) == pytest.approx(2.0)
    assert np.isnan(log_slope([1], [2]))
    frame = pd.DataFrame({"batch_size": [1, 1, 1, 1, 2, 2], "seed": [0, 0, 1, 1, 0, 0],
                          "run": ["a", "a", "b", "b", "c", "c"], "metric": range(6)})
    draw = resample_seeds(frame, np.random.default_rng(0))
    # as many seeds per batch size as before, each a copy of one original seed's rows
    assert draw.groupby("batch_size")["seed"].nunique().to_dict() == {1: 2, 2: 1}
    assert len(draw) == len(frame)
    with pytest.raises(ValueError, match="seed"):
        resample_seeds(frame.drop(columns="seed"), np.random.default_rng(0))


def test_a_seed_pool_gives_the_sweeps_load_sweep_gives_of_each_draw():
    # the bootstrap's fast path: the same draws from the same generator, and the Sweep
    # load_sweep would make of each (rows sorted by run and step), without revalidation
    from empirical_batch.sweeps import load_sweep

    frame = select(load_sweeps([SWEEPS / "digits.csv.gz"]), optimizer="sgd").to_frame()
    pool = SeedPool(frame)
    slow, fast = np.random.default_rng(3), np.random.default_rng(3)
    for _ in range(4):
        want = load_sweep(resample_seeds(frame, slow))
        got = pool.sweep(pool.draw(fast))
        pd.testing.assert_frame_equal(got.data, want.data, check_exact=True)
        assert (got.metric_name, got.higher_is_better) == (want.metric_name,
                                                           want.higher_is_better)
    with pytest.raises(ValueError, match="seed"):
        SeedPool(frame.drop(columns="seed"))


def test_growth_intervals_on_a_committed_sweep():
    sweep = select(load_sweeps([SWEEPS / "digits.csv.gz"]), optimizer="sgd")
    frame = sweep.to_frame()
    targets = np.array([1.2, 0.4, 0.25])
    b = b_crit_points(sweep, targets)
    g = growth_and_exponent(frame, targets, b, n_boot=20, seed=1)
    assert g.growth == pytest.approx(b[-1] / b[0])
    assert g.growth_low <= g.growth <= g.growth_high
    assert g.exponent_low <= g.exponent <= g.exponent_high
    assert g.n_valid == 20 and g.growth_high > g.growth_low  # three seeds: draws differ
    # one seed per batch size: nothing to resample, no interval
    one_seed = frame[frame["seed"] == 0]
    g1 = growth_and_exponent(one_seed, targets, b_crit_points(one_seed, targets),
                             n_boot=20)
    assert g1.n_boot == 0 and np.isnan(g1.growth_low) and np.isfinite(g1.growth)
    with pytest.raises(ValueError, match="at least 2 targets"):
        growth_and_exponent(frame, targets[:1], b[:1])


def test_b_crit_is_compared_with_the_noise_scale_averaged_up_to_the_target():
    # B_crit 400 at the hard target: 100x the local B_simple there (4) but 2x the
    # progress-weighted mean up to it (200): the model's statement holds, the local
    # comparison does not; both are in the table
    crit = _crit("A", "sgd", [(1.0, 20, 15, 25, 30, 22), (0.1, 400, 300, 500, 4, 3)],
                 avg=[(30, 22), (200, 390)])
    t1 = pd.DataFrame([_t1("A", "sgd", (20, 15, 25), (400, 300, 500))])
    c = claims_table(crit, t1)
    a = c[c.claim == "a"].iloc[0]
    assert a["verdict"] == "holds" and a["verdict_local"] == "does not hold"
    assert a["value"] == pytest.approx(2.0) and a["value_local"] == pytest.approx(100.0)
    assert "local (at the target)" in a["evidence"]
    # averaged: B_noise closer at both targets; at the targets: closer at the first,
    # farther at the second (B_simple 4 > B_noise 3 below B_crit 400)
    e = c[c.claim == "e"].iloc[0]
    assert e["verdict"] == "holds" and e["verdict_local"] == "undecided"
    # a target the reference run never reaches has no average: left out and counted
    crit.loc[1, "b_simple_avg"] = np.nan
    a = claims_table(crit, t1).query("claim == 'a'").iloc[0]
    assert "1 target(s) without B_crit or b_simple_avg left out" in a["evidence"]


def test_growth_is_a_factor_beside_table_1s_with_no_threshold():
    crit = _crit("A", "sgd", [(1.0, 20, 15, 25, 30, 22)])
    t1 = pd.DataFrame([_t1("A", "sgd", (20, 15, 25), (50, 40, 60))])  # 2.5x in [1.6, 4]
    b = claims_table(crit, t1).query("claim == 'b'").iloc[0]
    assert b["verdict"] == "holds" and b["value"] == pytest.approx(2.5)
    assert ">=" not in b["statement"] and "10x" not in b["statement"]
    assert "CIFAR10 3x" in b["evidence"] and "Billion Word 143x" in b["evidence"]
    assert "overlapping Table 1's range (2 of its 9 factors inside it)" in b["evidence"]


def test_table1_growth_is_that_of_the_data_file():
    from analysis.table1 import summary
    from empirical_batch.validation.claims import TABLE1_GROWTH

    s = summary().dropna(subset=["crit_growth"])
    assert dict(zip(s["task"], s["crit_growth"], strict=True)) == pytest.approx(TABLE1_GROWTH)


def test_a_nan_measured_one_step_point_is_left_out_and_counted():
    crit = _crit("A", "sgd", [(1.0, 20, 15, 25, 30, 22)])
    t1 = pd.DataFrame([_t1("A", "sgd", (20, 15, 25), (50, 40, 60))])
    one = pd.DataFrame({"task": ["A"] * 12, "eps_opt": [np.nan] + [1.0] * 11,
                        "eps_opt_low": 0.9, "eps_opt_high": 1.1, "eps_opt_pred_fit": 1.0,
                        "dl_opt": 1.0, "dl_opt_low": 0.9, "dl_opt_high": 1.1,
                        "dl_opt_pred_fit": 1.0})
    row = claims_table(crit, t1, one).query("claim == 'c'").iloc[0]
    assert "nan" not in row["evidence"] and row["verdict"] == "holds"
    assert "11/11" in row["evidence"] and "1 point(s) with a NaN" in row["evidence"]
    one["eps_opt"] = np.nan  # nothing left to test: undecided, said why
    row = claims_table(crit, t1, one).query("claim == 'c'").iloc[0]
    assert row["verdict"] == "undecided" and "nan" not in row["evidence"]
    assert "no point with a measurement" in row["evidence"]


def test_branched_brackets_are_compared_with_b_crit_plus_2b():
    crit = _crit("A", "sgd", [(1.0, 20, 15, 25, 30, 22)])
    t1 = pd.DataFrame([_t1("A", "sgd", (20, 15, 25), (50, 40, 60))])
    # base batch 8: B_crit 40 [30, 50] + 16 = 56 [46, 66]; the bracket [32, 64) meets it,
    # [128, 256) does not, and the third checkpoint has no fitted B_crit
    br = pd.DataFrame({"task": "A", "optimizer": "sgd", "step": [10, 20, 30],
                       "base_batch": 8, "b_branched_low": [32.0, 128.0, 512.0],
                       "b_branched_high": [64.0, 256.0, np.inf],
                       "b_crit": [40.0, 40.0, np.nan], "b_crit_plus_2b": [56.0, 56.0, np.nan],
                       "b_crit_plus_2b_low": [46.0, 46.0, np.nan],
                       "b_crit_plus_2b_high": [66.0, 66.0, np.nan]})
    f = claims_table(crit, t1, branched=br).query("claim == 'f'").iloc[0]
    assert f["verdict"] == "undecided" and (f["value"], f["lo"], f["hi"]) == (1, 1, 2)
    assert "1 checkpoint(s) without a fitted B_crit left out" in f["evidence"]
    f = claims_table(crit, t1, branched=br.iloc[:1]).query("claim == 'f'").iloc[0]
    assert f["verdict"] == "holds"
    # the bracket [64, 128) meets B_crit + 2B = [46, 66] only through the offset
    # (B_crit's own interval [30, 50] lies below it)
    off = br.iloc[:1].assign(b_branched_low=64.0, b_branched_high=128.0)
    assert claims_table(crit, t1, branched=off).query("claim == 'f'").iloc[0][
        "verdict"] == "holds"
    assert claims_table(crit, t1).query("claim == 'f'").empty  # no branched table, no row


def test_the_average_up_to_a_target_and_why_it_is_missing():
    from empirical_batch.validation.fits import averaged_to, why_no_average

    scales = pd.DataFrame({"step": [0, 10, 20, 40], "eval_loss": [3.0, 2.0, 1.5, 1.0],
                           "batch_size": 8, "b_simple_collector": [10.0, 20.0, 40.0, 80.0],
                           "b_noise_pop": [8.0, 8.0, 8.0, 8.0]})
    # constant B_noise: the progress weight is constant, the average is the step mean of
    # B_simple up to the crossing of L = 1.8, which lies between steps 10 and 20: loss
    # linear in log(step) gives t = 10 * 2**0.4; B_simple there linear in step
    t = 10 * 2 ** 0.4
    v_end = 20 + (t - 10) / 10 * 20
    v = averaged_to(scales, "b_simple_collector", 1.8, True, 8.0)
    assert v == pytest.approx((15 * 10 + (20 + v_end) / 2 * (t - 10)) / t)
    assert why_no_average(scales, 1.8, True) == ""
    assert np.isnan(averaged_to(scales, "b_simple_collector", 0.5, False, 8.0))
    assert "does not reach" in why_no_average(scales, 0.5, False)
    bad = scales.assign(b_noise_pop=[8.0, -3.0, 8.0, 8.0])
    assert np.isnan(averaged_to(bad, "b_simple_collector", 1.8, True, 8.0))
    assert "b_noise_pop not positive at step(s) 10" in why_no_average(bad, 1.8, True)
    # a bad value after the window's end does not matter
    late = scales.assign(b_noise_pop=[8.0, 8.0, 8.0, -1.0])
    assert averaged_to(late, "b_simple_collector", 1.8, True, 8.0) == pytest.approx(v)


def test_the_averages_under_other_progress_weights_say_where_progress_is_negative():
    from empirical_batch.validation.fits import alternative_averages, weight_shifts
    from empirical_batch.validation.markdown import render_markdown

    scales = pd.DataFrame({
        "step": [0, 10, 20, 40], "eval_loss": [3.0, 2.0, 1.5, 1.0], "batch_size": 8,
        "learning_rate": 0.5, "b_simple_collector": [10.0, 20.0, 40.0, 80.0],
        "b_noise_pop": [4.0, 8.0, 16.0, 32.0], "g2": [1.0, 1.0, 0.5, 0.5],
        "ghg": [1.0, 1.0, 2.0, 1.0], "trace_sigma": [10.0, 20.0, 20.0, 40.0],
        "trace_h_sigma": [4.0, 8.0, 32.0, 32.0]})
    sgd = alternative_averages(scales, 1.5, True, 8.0, "sgd")
    assert np.isfinite(sgd["b_simple_avg_rate"]) and np.isfinite(sgd["b_noise_avg_loss"])
    # step 20: 0.5·0.5 − ½·0.25·(2 + 32/8) < 0, said with what the average does there
    assert "loss increase at the run's rate at step(s) 20 (weight 0" in sgd["progress_note"]
    adam = alternative_averages(scales, 1.5, True, 8.0, "adam")
    assert np.isnan(adam["b_simple_avg_rate"]) and np.isfinite(adam["b_simple_avg_loss"])
    assert "describes SGD steps" in adam["progress_note"]
    unreached = alternative_averages(scales, 0.5, False, 8.0, "sgd")
    assert np.isnan(unreached["b_noise_avg_loss"]) and unreached["progress_note"] == ""
    # how much the ratios move against the App. D weight
    crit = pd.DataFrame({"task": "t", "optimizer": "sgd", "target": [1.0, 2.0, 3.0],
                         "b_crit": 10.0,
                         "b_crit_over_b_simple_avg": [1.0, 2.0, 1.0],
                         "b_crit_over_b_simple_avg_rate": [1.1, 1.0, np.nan],
                         "b_crit_over_b_simple_avg_loss": [2.0, 2.0, 0.5],
                         "b_crit_over_b_noise_avg": 1.0,
                         "b_crit_over_b_noise_avg_rate": 1.0,
                         "b_crit_over_b_noise_avg_loss": 1.0,
                         "progress_note": ["rate: the one-step model predicts a loss increase "
                                           "at the run's rate at step(s) 3 (weight 0 there)",
                                           "", ""]})
    sh = weight_shifts(crit).set_index(["weight", "quantity"])
    r = sh.loc[("rate", "b_simple")]
    assert (r["n"], r["min"], r["max"], r["n_moved_25pct"]) == (2, 0.5, 1.1, 1)
    r = sh.loc[("loss", "b_simple")]
    assert (r["n"], r["median"], r["n_moved_25pct"]) == (3, 1.0, 2)
    md = render_markdown("x", crit, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), None)
    assert "the model's in the windows of 1 of the 3 SGD targets" in md
    assert "2 of 3 targets moved by more than 25 %" in md
