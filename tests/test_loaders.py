"""Loaders of published formats: each lands in the sweep schema (or, for RCPs,
a per-seed steps-to-target table)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from empirical_batch.datasets import bundled
from empirical_batch.fit import fit_tradeoff, steps_to_target
from empirical_batch.loaders import (
    load_mllog,
    load_mlperf_curves,
    load_mlperf_rcp,
    load_tensorboard,
    load_wandb,
)
from empirical_batch.sweeps import SCHEMA, Sweep

# --------------------------------------------------------------------- MLPerf RCPs


def _write_rcp(path, entries):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries))


def test_rcp_units_and_steps(tmp_path):
    _write_rcp(tmp_path / "training_5.0.0" / "rcps_bert.json", {
        "bert_ref_256": {"Benchmark": "bert", "BS": 256,
                         "Hyperparams": {"opt_base_learning_rate": 3.5e-4},
                         "Epochs to converge": [2560, 5120]},
    })
    _write_rcp(tmp_path / "training_4.0.0" / "rcps_gpt3.json", {
        "gpt3_ref_1536": {"Benchmark": "gpt3", "BS": 1536, "Hyperparams": {"opt_lr": 2e-5},
                          "Epochs to converge": [1536 * 2048 * 100]},
    })
    _write_rcp(tmp_path / "training_5.0.0" / "rcps_ssd.json", {
        "ssd_ref_256": {"Benchmark": "ssd", "BS": 256, "Hyperparams": {},
                        "Epochs to converge": [4, 5]},
    })
    t = load_mlperf_rcp(tmp_path).frame
    bert = t[t["benchmark"] == "bert"]
    assert bert["steps"].tolist() == [10.0, 20.0]  # train samples / batch size
    assert bert["learning_rate"].iloc[0] == 3.5e-4
    gpt = t[t["benchmark"] == "gpt3"]
    assert gpt["steps"].tolist() == [100.0]  # tokens / (2048 · batch size)
    ssd = t[t["benchmark"] == "ssd"]  # RetinaNet era: epochs of an unrecorded size
    assert ssd["steps"].isna().all() and ssd["steps_rel"].tolist() == [4 / 256, 5 / 256]
    assert set(t["run"]) >= {"training_5.0.0/bert_ref_256/0", "training_5.0.0/bert_ref_256/1"}
    assert len(load_mlperf_rcp(tmp_path, benchmark="gpt3").frame) == 1


def test_rcp_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_mlperf_rcp(tmp_path / "missing")
    with pytest.raises(ValueError, match="no rcps"):
        load_mlperf_rcp(tmp_path)
    (tmp_path / "rcps_x.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_mlperf_rcp(tmp_path)


def test_rcp_shared_data_matches_published_csv(shared_data):
    """Per-seed values and derived examples agree with the provider's own tables."""
    t = load_mlperf_rcp(bundled("mlperf_rcp/raw"), benchmark="bert").frame
    points = pd.read_csv(shared_data / "mlperf_rcp" / "mlperf_rcp_points.csv")
    runs = pd.read_csv(shared_data / "mlperf_rcp" / "mlperf_rcp_runs.csv")
    points = points[points["benchmark"] == "bert"]
    assert len(points) >= 13
    for _, row in points.iterrows():
        ruleset = row["rulesets"].split()[0]
        ours = t[(t["ruleset"] == ruleset) & (t["rcp_name"] == row["rcp_name"])]
        theirs = runs[runs["rcp_id"] == row["rcp_id"]]
        np.testing.assert_array_equal(np.sort(ours["value"]), np.sort(theirs["value"]))
        # their steps are rounded to 4 decimals
        np.testing.assert_allclose(np.sort(ours["steps"]), np.sort(theirs["steps_to_target"]),
                                   rtol=0, atol=1e-4)


# --------------------------------------------------------------------- MLPerf curves


def test_mlperf_curves_bert(published):
    published("mlperf_training_results_curves/evals.csv")
    s = load_mlperf_curves(published("mlperf_training_results_curves/runs.csv").parent,
                           "bert", rounds=["v4.0", "v4.1"])
    assert isinstance(s, Sweep) and s.higher_is_better
    assert set(SCHEMA) <= set(s.data.columns)
    np.testing.assert_allclose(s.data["step"] * s.data["batch_size"], s.data["examples"])
    assert s.data["round"].isin(["v4.0", "v4.1"]).all()
    table = steps_to_target(s, 0.70, config="submission", combine="median")
    assert table["reached"].sum() >= 3


def test_mlperf_curves_reports_excluded_runs(published):
    published("mlperf_training_results_curves/evals.csv")
    s = load_mlperf_curves(published("mlperf_training_results_curves/runs.csv").parent,
                           "bert", rounds=["v1.0"])
    excl = s.metadata["excluded_runs"]
    assert excl and all(v.startswith("progress") for v in excl.values())
    assert not set(excl) & set(s.data["run"])


def test_mlperf_curves_errors(shared_data, tmp_path):
    d = shared_data / "mlperf_training_results_curves"
    with pytest.raises(ValueError, match="no runs"):
        load_mlperf_curves(d, "no_such_benchmark")
    with pytest.raises(ValueError, match="examples_per_epoch"):
        load_mlperf_curves(d, "ssd")
    with pytest.raises(ValueError, match="several metrics"):
        load_mlperf_curves(d, "maskrcnn")
    with pytest.raises(FileNotFoundError):
        load_mlperf_curves(tmp_path, "bert")


# --------------------------------------------------------------------- MLLOG


def _mllog(path, bs, lr, evals, bench="bert", seed=1):
    lines = [
        ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", '
        f'"key": "submission_benchmark", "value": "{bench}", "metadata": {{"lineno": 1}}}}',
        f':::MLLOG {{"key": "global_batch_size", "value": {bs}, "metadata": {{}}}}',
        f':::MLLOG {{"key": "opt_base_learning_rate", "value": {lr}, "metadata": {{}}}}',
        f':::MLLOG {{"key": "seed", "value": {seed}, "metadata": {{}}}}',
        "some other output line",
    ]
    for samples, acc in evals:
        lines.append(f':::MLLOG {{"event_type": "POINT_IN_TIME", "key": "eval_accuracy", '
                     f'"value": {acc}, "metadata": {{"epoch_num": {samples}}}}}')
    lines.append(':::MLLOG {"key": "run_stop", "value": null, '
                 '"metadata": {"status": "success"}}')
    path.write_text("\n".join(lines) + "\n")


def test_mllog_files(tmp_path):
    for i, bs in enumerate([256, 512, 1024]):
        _mllog(tmp_path / f"result_{i}.txt", bs, 1e-3 * (i + 1),
               [(bs * 100, 0.5), (bs * 200, 0.7), (bs * 300, 0.73)])
    s = load_mllog(tmp_path)
    assert s.higher_is_better and s.metric_name == "eval_accuracy"
    assert sorted(s.data["step"].unique().tolist()) == [100.0, 200.0, 300.0]
    assert set(s.data["status"]) == {"success"}
    t = steps_to_target(s, 0.7)
    np.testing.assert_allclose(t["steps"], 200.0)


def test_mllog_errors(tmp_path):
    p = tmp_path / "result_0.txt"
    p.write_text(':::MLLOG {"key": "eval_accuracy", "value": 0.1, "metadata": {}}\n')
    with pytest.raises(ValueError, match="submission_benchmark"):
        load_mllog(p)
    p.write_text(':::MLLOG {"key": \n')
    with pytest.raises(ValueError, match="line 1: malformed"):
        load_mllog(p)
    with pytest.raises(FileNotFoundError):
        load_mllog(tmp_path / "nope.txt")


# --------------------------------------------------------------------- W&B


def test_wandb_long_history(tmp_path):
    rows = []
    for name, bs, lr in [("r1", 32, 0.1), ("r2", 64, 0.2)]:
        for st in (0, 100, 200):
            rows.append({"Name": name, "_step": st, "config.batch_size": bs,
                         "config.lr": lr, "train/loss": 3 - st / 100, "_runtime": st})
    path = tmp_path / "history.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    s = load_wandb(path, metric="train/loss")
    assert s.metric_name == "train/loss"
    assert s.data.groupby("run")["batch_size"].first().to_dict() == {"r1": 32.0, "r2": 64.0}
    assert s.data["learning_rate"].max() == 0.2


def test_wandb_panel_export_with_runs_table(tmp_path):
    panel = pd.DataFrame({
        "Step": [0, 100, 200],
        "r1 - loss": [3.0, 2.0, 1.0], "r1 - loss__MIN": [3.0, 2.0, 1.0],
        "r2 - loss": [3.0, 1.5, np.nan],
    })
    runs = pd.DataFrame({"Name": ["r1", "r2"], "batch_size": [32, 64], "lr": [0.1, 0.2]})
    panel.to_csv(tmp_path / "panel.csv", index=False)
    runs.to_csv(tmp_path / "runs.csv", index=False)
    s = load_wandb(tmp_path / "panel.csv", tmp_path / "runs.csv")
    assert len(s.data) == 5  # the empty cell of r2 is not a logged point
    with pytest.raises(ValueError, match="needs runs="):
        load_wandb(tmp_path / "panel.csv")
    with pytest.raises(ValueError, match="not in the runs table"):
        load_wandb(panel, runs.iloc[:1])


# --------------------------------------------------------------------- TensorBoard


def test_tensorboard_event_files(tmp_path):
    tb = pytest.importorskip("torch.utils.tensorboard")
    for bs, lr in [(16, 0.1), (64, 0.2)]:
        w = tb.SummaryWriter(str(tmp_path / f"bs{bs}"))
        for st in range(0, 50, 10):
            w.add_scalar("val/loss", 3.0 - st / 10 * (bs / 64), st)
        w.add_scalar("batch_size", bs, 0)
        w.add_scalar("learning_rate", lr, 0)
        w.close()
    s = load_tensorboard(tmp_path, "val/loss")
    assert sorted(s.data["run"].unique()) == ["bs16", "bs64"]
    assert s.data.groupby("run")["batch_size"].first().tolist() == [16.0, 64.0]
    s2 = load_tensorboard(tmp_path, "val/loss",
                          run_config=lambda d: {"batch_size": int(d[2:]), "learning_rate": 0.1})
    assert s2.data["learning_rate"].eq(0.1).all()
    with pytest.raises(ValueError, match="tag 'nope' not found"):
        load_tensorboard(tmp_path, "nope")


def test_rcp_table_fits_directly(tmp_path):
    """The RCP table goes straight into fit_tradeoff (seed bootstrap)."""
    rng = np.random.default_rng(0)
    entries = {}
    for b in (64, 128, 256, 512, 1024, 2048):
        steps = 100 * (1 + 256 / b) * np.exp(0.05 * rng.standard_normal(8))
        entries[f"bert_ref_{b}"] = {"Benchmark": "bert", "BS": b, "Hyperparams": {},
                                    "Epochs to converge": (steps * b).round().tolist()}
    _write_rcp(tmp_path / "training_5.0.0" / "rcps_bert.json", entries)
    fit = fit_tradeoff(load_mlperf_rcp(tmp_path), n_boot=200)
    assert fit.bootstrap == "seeds"
    assert fit.b_crit_interval[0] < 256 < fit.b_crit_interval[1]
