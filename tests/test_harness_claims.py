"""The claims table and the growth/exponent intervals of the harness report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from empirical_batch.harness import library
from empirical_batch.harness.claims import claims_table
from empirical_batch.harness.uncertainty import growth_and_exponent, log_slope, resample_seeds

SWEEPS = Path(__file__).resolve().parents[1] / "data" / "harness-full" / "sweeps"


def _crit(task, opt, rows):
    return pd.DataFrame([{"task": task, "optimizer": opt, "target": t, "b_crit": c,
                          "b_crit_lo": lo, "b_crit_hi": hi, "b_simple": bs, "b_noise": bn}
                         for t, c, lo, hi, bs, bn in rows])


def _t1(task, opt, start, avg, target_start=1.0, target_avg=0.1):
    (c0, lo0, hi0), (c1, lo1, hi1) = start, avg
    return {"task": task, "optimizer": opt, "target_start": target_start,
            "b_crit_start": c0, "b_crit_start_lo": lo0, "b_crit_start_hi": hi0,
            "target_averaged": target_avg, "b_crit_averaged": c1, "b_crit_averaged_lo": lo1,
            "b_crit_averaged_hi": hi1, "b_crit_growth": c1 / c0, "target_common": target_avg,
            "b_crit_common": c1, "b_crit_common_lo": lo1, "b_crit_common_hi": hi1,
            "b_crit_growth_lo": lo1 / hi0, "b_crit_growth_hi": hi1 / lo0}


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
        _t1("A", "adam", (20, 18, 22), (100, 90, 110)),      # growth <= 6.1 for sure
        _t1("B", "sgd", (10, 5, 20), (80, 40, 160)),          # growth 2..32: undecided
    ])
    one = pd.DataFrame({"task": ["A"] * 20, "eps_opt": 1.0, "eps_opt_lo": 0.9,
                        "eps_opt_hi": 1.1, "eps_opt_pred_fit": [1.0] * 19 + [1.5],
                        "dl_opt": 1.0, "dl_opt_lo": 0.9, "dl_opt_hi": 1.1,
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
    # Adam vs SGD at the hardest target: Adam [90, 110] below SGD [300, 500]
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


def test_growth_intervals_on_a_committed_sweep():
    sweep = library.select(library.load_sweeps([SWEEPS / "digits.csv.gz"]), optimizer="sgd")
    frame = sweep.to_frame()
    targets = np.array([1.2, 0.4, 0.25])
    b = library.b_crit_points(sweep, targets)
    g = growth_and_exponent(frame, targets, b, n_boot=20, seed=1)
    assert g.growth == pytest.approx(b[-1] / b[0])
    assert g.growth_lo <= g.growth <= g.growth_hi
    assert g.exponent_lo <= g.exponent <= g.exponent_hi
    assert g.n_valid == 20 and g.growth_hi > g.growth_lo  # three seeds: draws differ
    # one seed per batch size: nothing to resample, no interval
    one_seed = frame[frame["seed"] == 0]
    g1 = growth_and_exponent(one_seed, targets, library.b_crit_points(one_seed, targets),
                             n_boot=20)
    assert g1.n_boot == 0 and np.isnan(g1.growth_lo) and np.isfinite(g1.growth)
    with pytest.raises(ValueError, match="at least 2 targets"):
        growth_and_exponent(frame, targets[:1], b[:1])
