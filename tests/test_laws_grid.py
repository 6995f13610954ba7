"""Grid loading (StepLaw CSV, plain schema, Zhang et al.'s table, batch_science) and
per-cell optima: units, edge flags, bad input."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from _synth_laws import SEQ, loss_grid

from empirical_batch.errors import DataError, FitError, InputError
from empirical_batch.fit import NotEnoughBatchSizes
from empirical_batch.laws import cell_optima, fit_law, load_grid, steps_to_result
from empirical_batch.units import UnitMismatch


def test_steplaw_csv_is_read_in_tokens(tmp_path):
    frame = loss_grid(np.random.default_rng(0), ns=(1e8,), ds=(2e9,))
    path = tmp_path / "steplaw.csv"
    frame.to_csv(path, index=False)
    g = load_grid(path)
    assert g.layout == "steplaw" and g.unit == "tokens" and g.kind == "loss"
    np.testing.assert_allclose(g.frame["batch_size"], frame["bs"] * SEQ)
    np.testing.assert_allclose(g.frame["tokens"], frame["D"])
    # a seq_len column overrides the default 2048
    g2 = load_grid(frame.assign(seq_len=4096))
    np.testing.assert_allclose(g2.frame["batch_size"], frame["bs"] * 4096)


def _plain(unit=None):
    rows = [{"n_params": 1e8, "tokens": 1e9, "batch_size": b, "learning_rate": lr,
             "loss": 3 + 0.01 * np.log(b / 64) ** 2 + 0.01 * np.log(lr / 1e-3) ** 2}
            for b in (16, 32, 64, 128, 256) for lr in (2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3)]
    f = pd.DataFrame(rows)
    if unit is not None:
        f["unit"] = unit
    return f


def test_plain_schema_needs_one_unit():
    with pytest.raises(InputError, match="unit of batch_size"):
        load_grid(_plain())
    f = _plain("sequences")
    f.loc[0, "unit"] = "tokens"
    with pytest.raises(UnitMismatch, match="several units"):
        load_grid(f)
    assert load_grid(_plain("sequences")).unit == "sequences"
    assert load_grid(_plain(), unit="tokens").unit == "tokens"
    with pytest.raises(UnitMismatch):
        load_grid(_plain("sequences"), unit="tokens")


def test_column_aliases_and_non_positive_sizes():
    f = _plain().rename(columns={"loss": "val_loss", "tokens": "D"})
    g = load_grid(f, unit="tokens", columns={"loss": "val_loss", "tokens": "D"})
    assert g.frame["tokens"].iloc[0] == 1e9
    with pytest.raises(DataError, match="not in the table"):
        load_grid(f, unit="tokens", columns={"loss": "nope"})
    bad = _plain().assign(n_params=0.0)
    with pytest.raises(InputError, match=r"n_params.*> 0"):
        load_grid(bad, unit="tokens")
    bad = _plain().assign(tokens=-1.0)
    with pytest.raises(InputError, match=r"tokens.*> 0"):
        load_grid(bad, unit="tokens")


def test_zhang_layout_tokens_are_the_chinchilla_budget():
    rows = [{"model": m, "n_params": n, "target_loss": 3.0, "batch_size": b, "seq_len": 512,
             "steps_to_target": 1000 * (1 + 512 / b) * (n / 1e8),
             "chinchilla_steps_at_bs256": c}
            for m, n, c in (("a", 1e8, 15000), ("b", 2e8, 30000))
            for b in (64, 128, 256, 512, 1024, 2048)]
    g = load_grid(pd.DataFrame(rows))
    assert g.layout == "zhang" and g.kind == "steps" and g.unit == "tokens"
    assert set(g.frame["tokens"]) == {15000 * 256 * 512.0, 30000 * 256 * 512.0}
    np.testing.assert_allclose(sorted(set(g.frame["batch_size"])),
                               np.array([64, 128, 256, 512, 1024, 2048]) * 512.0)
    o = cell_optima(g, n_boot=100)
    # S = S_min (1 + B_crit/B) with B_crit = 512 sequences = 262144 tokens
    np.testing.assert_allclose(o.frame["b_crit"], 512 * 512.0, rtol=1e-3)


def _write_trial(path, trial_id, status, steps, values):
    path.mkdir(parents=True)
    (path / "metadata.json").write_text(json.dumps({"trial_id": trial_id, "status": status}))
    pd.DataFrame({"step": steps, "val_error": values}).to_csv(path / "measurements.csv",
                                                              index=False)


def test_batch_science_steps_to_result(tmp_path):
    root = tmp_path / "mnist" / "simple_cnn" / "momentum"
    rng = np.random.default_rng(1)
    expected = {}
    for i, b in enumerate((16, 64, 256, 1024)):
        study = root / str(i)
        study.mkdir(parents=True)
        (study / "study.json").write_text(json.dumps({
            "batch_size": b, "dataset": "mnist", "model": "simple_cnn",
            "optimizer": "momentum"}))
        firsts = []
        for t in range(3):
            steps = np.arange(0, 2000, 100)
            values = np.exp(-steps / (200 + 5e4 / b)) + 0.01 * rng.random(len(steps))
            status = "COMPLETE" if t < 2 else "INFEASIBLE"
            _write_trial(study / str(t), t, status, steps, values)
            hit = steps[values < 0.2]
            if status == "COMPLETE" and len(hit):
                firsts.append(hit[0])
        expected[b] = min(firsts) if firsts else np.inf
    g = load_grid(tmp_path, metric="val_error", target=0.2)
    assert g.layout == "batch_science" and g.unit == "examples"
    got = dict(zip(g.frame["batch_size"], g.frame["steps"], strict=True))
    assert got == {float(k): float(v) for k, v in expected.items()}
    assert set(g.frame["cell"]) == {"mnist/simple_cnn/momentum"}
    with pytest.raises(InputError, match="metric"):
        load_grid(tmp_path)


def test_steps_to_result_is_strict_and_breaks_ties_by_trial():
    m = pd.DataFrame({"trial_id": [2, 1, 1, 2], "step": [10, 10, 20, 20],
                      "err": [0.5, 0.5, 0.4, 0.3]})
    assert steps_to_result(m, "err", 0.5) == 20.0  # 0.5 is not < 0.5
    assert steps_to_result(m, "err", 0.45) == 20.0
    assert steps_to_result(m, "err", 0.1) == np.inf
    assert steps_to_result(m, "err", 0.45, maximize=True) == 10.0


def test_cells_with_fewer_than_three_batch_sizes_are_refused():
    f = loss_grid(np.random.default_rng(0), ns=(1e8,), ds=(2e9, 8e9), bs=2.0 ** np.arange(4, 14))
    f = f[~((f["D"] == 8e9) & (f["bs"] > 32))]
    with pytest.raises(NotEnoughBatchSizes, match=r"N=1e\+08,D=8e\+09 \(2\)"):
        cell_optima(load_grid(f))


def test_optimum_at_the_edge_is_flagged_and_left_out():
    rng = np.random.default_rng(2)
    # the optimum of the largest D lies above the largest batch tried
    f = loss_grid(rng, ds=(2e9, 8e9, 3.2e10, 1.28e12), bs=2.0 ** np.arange(4, 12))
    o = cell_optima(load_grid(f), n_boot=50)
    f = o.frame
    assert f["b_opt_at_edge"][f["tokens"] == 1.28e12].all()
    assert not f["b_opt_at_edge"][f["tokens"] < 1e12].any()
    with pytest.warns(Warning, match="edge left out"):
        law = fit_law(o, "b_opt", "tokens")
    assert law.n == 9 and law.ranges[0] == (2e9, 3.2e10)


def test_optimum_at_the_edge_everywhere_is_an_error():
    f = loss_grid(np.random.default_rng(3), bs=2.0 ** np.arange(1, 5))  # all far too small
    o = cell_optima(load_grid(f), n_boot=0)
    assert o.frame["b_opt_at_edge"].all()
    with pytest.raises(FitError, match="every one of the 12 cells"):
        fit_law(o, "b_opt", "tokens")


def test_cell_intervals_hold_the_estimate():
    o = cell_optima(load_grid(loss_grid(np.random.default_rng(4))), n_boot=100)
    for q in ("b_opt", "lr_opt"):
        f = o.frame
        assert (f[f"{q}_low"] <= f[q]).all() and (f[q] <= f[f"{q}_high"]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "b_opt in tokens" in repr(o)
