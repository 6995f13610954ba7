"""`empirical-batch schedule`: from a collector log, a B_crit(L) law or a fit JSON, or
Seesaw; printed or exported; user errors in one line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fit_docs import fit_document, fit_entry

from empirical_batch.cli import main
from empirical_batch.schedule import parse_megatron


@pytest.fixture()
def log(tmp_path):
    e = np.linspace(0, 1e6, 200)
    path = tmp_path / "gns.csv"
    pd.DataFrame({"examples": e, "b_simple": 50 * (1 + e / 1e5),
                  "b_simple_low": 30 * (1 + e / 1e5)}).to_csv(path, index=False)
    return path


@pytest.fixture()
def curve(tmp_path):
    e = np.linspace(0, 1e6, 200)
    path = tmp_path / "curve.csv"
    pd.DataFrame({"examples": e, "loss": 4.0 / (1 + e / 2e5) ** 0.3}).to_csv(path, index=False)
    return path


def test_from_a_log_to_megatron(log, capsys):
    assert main(["schedule", "--log", str(log), "--batch-size", "64", "--base-batch", "64",
                 "--granularity", "32", "--lower-column", "b_simple_low",
                 "--format", "megatron", "--tokens-per-example", "1024"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("--step-batch-size-schedule ")
    stages = parse_megatron(out.split('"')[1])
    assert stages["batch_size"].iloc[0] == 64 and (stages["batch_size"] % 32 == 0).all()
    assert (stages["start"] % 1024 == 0).all()


def test_from_a_power_law_table_and_levanter(curve, capsys):
    assert main(["schedule", "--power-law", "2000,0.5", "--loss-curve", str(curve),
                 "--batch-size", "128", "--base-batch", "128", "--policy", "app_d"]) == 0
    text = capsys.readouterr().out
    assert "BatchSchedule(app_d" in text and "saved" in text
    assert main(["schedule", "--power-law", "2000,0.5", "--loss-curve", str(curve),
                 "--batch-size", "128", "--base-batch", "128", "--format", "levanter"]) == 0
    lev = json.loads(capsys.readouterr().out)
    assert lev[0] == {"start": 0, "value": 128}


def test_from_a_fit_json(curve, tmp_path, capsys):
    path = tmp_path / "fit.json"
    path.write_text(fit_document(fit_entry(b_crit=100.0, target=3.0),
                                 fit_entry(b_crit=1000.0, target=2.0),
                                 fit_entry(b_crit=5.0, target=1.5, status="lower_bound")))
    out = tmp_path / "s.json"
    assert main(["schedule", "--fit", str(path), "--loss-curve", str(curve), "--batch-size",
                 "64", "--base-batch", "64", "--format", "json", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["policy"] == "doubling"


def test_seesaw_csv(capsys):
    assert main(["schedule", "--seesaw", "cosine", "--total-steps", "1000", "--base-batch",
                 "32", "--max-batch", "256", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("start_progress,") and len(lines) >= 3


@pytest.mark.parametrize("argv, word", [
    (["--base-batch", "8"], "exactly one of"),
    (["--seesaw", "cosine", "--base-batch", "8"], "--total-steps"),
    (["--log", "LOG", "--base-batch", "8"], "--batch-size"),
    (["--power-law", "2000", "--loss-curve", "CURVE", "--batch-size", "8", "--base-batch",
      "8"], "B_STAR,ALPHA"),
    (["--power-law", "2000,0.5", "--batch-size", "8", "--base-batch", "8"], "--loss-curve"),
    (["--log", "LOG", "--batch-size", "8", "--base-batch", "12", "--granularity", "8",
      "--quantity", "b_simple"], "multiple"),
    (["--log", "LOG", "--batch-size", "8", "--base-batch", "8", "--column", "nope"],
     "missing columns"),
    (["--log", "LOG", "--batch-size", "8", "--base-batch", "8", "--out", "x.txt",
      "--quantity", "b_simple"], "--out"),
])
def test_user_errors(argv, word, log, curve, capsys):
    argv = [str(log) if a == "LOG" else str(curve) if a == "CURVE" else a for a in argv]
    assert main(["schedule", *argv]) == 2
    err = capsys.readouterr().err
    assert word in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _noise_log(tmp_path, b_first=60.0):
    """A log as NoiseScaleLog writes it: step (no examples column), b_simple and its
    interval, unit."""
    step = np.arange(1, 301)
    b = 50 * (1 + step / 40.0)
    b[0] = b_first
    path = tmp_path / "noise.csv"
    pd.DataFrame({"step": step, "loss": 1 / step, "b_simple": b, "b_simple_low": 0.7 * b,
                  "b_simple_high": 1.4 * b, "unit": "examples"}).to_csv(path, index=False)
    return path


def test_the_documented_log_gives_whole_steps_and_a_figure(tmp_path, capsys):
    path = _noise_log(tmp_path)
    fig = tmp_path / "schedule.png"
    assert main(["schedule", "--log", str(path), "--batch-size", "64", "--base-batch", "64",
                 "--lower-column", "b_simple_low", "--quantity", "b_simple",
                 "--plot", str(fig)]) == 0
    out = capsys.readouterr().out
    assert "in examples" in out and "B_simple" in out and fig.stat().st_size > 1000
    rows = out[out.index("start_step"):out.index("predicted by")].splitlines()[1:]
    starts = [r.split()[1] for r in rows]
    assert len(starts) >= 2 and all(s.isdigit() for s in starts)  # whole steps
    assert "steps_saving" not in out and "saved" in out


def test_a_log_in_examples_scheduled_in_tokens(tmp_path, capsys):
    path = _noise_log(tmp_path)
    argv = ["schedule", "--log", str(path), "--batch-size", "64", "--quantity", "b_simple",
            "--base-batch", str(64 * 128), "--unit", "tokens", "--format", "json"]
    assert main(argv) == 2
    assert "tokens_per_example" in capsys.readouterr().err
    assert main([*argv, "--tokens-per-example", "128"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    assert stages[0]["batch_size"] == 64 * 128 and len(stages) >= 2


def test_unresolved_rows_are_refused_with_a_count(tmp_path, capsys):
    path = _noise_log(tmp_path, b_first=-20.0)
    argv = ["schedule", "--log", str(path), "--batch-size", "64", "--base-batch", "64",
            "--quantity", "b_simple"]
    assert main(argv) == 2
    assert "1 of 300 rows" in capsys.readouterr().err
    assert main([*argv, "--unresolved", "drop"]) == 0
    assert "1 log rows dropped" in capsys.readouterr().out


def test_b_simple_for_b_noise_is_said(tmp_path, capsys):
    path = _noise_log(tmp_path)
    assert main(["schedule", "--log", str(path), "--batch-size", "64",
                 "--base-batch", "64"]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "B_simple" in err and "--quantity b_simple" in err


def test_framework_exports_refuse_batch_sizes_in_tokens(tmp_path, capsys):
    path = _noise_log(tmp_path)
    argv = ["schedule", "--log", str(path), "--batch-size", "64", "--quantity", "b_simple",
            "--base-batch", "8192", "--unit", "tokens", "--tokens-per-example", "128",
            "--format", "megatron"]
    assert main(argv) == 2
    assert "in samples" in capsys.readouterr().err
    argv[argv.index("--base-batch") + 1], argv[argv.index("--unit") + 1] = "64", "sequences"
    assert main(argv) == 0


def _prediction(tmp_path, capsys, *interval):
    """`law predict --out` of the nanochat example (with an exponent interval if given)."""
    pred = tmp_path / "pred.json"
    assert main(["law", "predict", "--law", "power_lines_b_opt", "--anchor",
                 "batch=524288,tokens=1e9", "--at", "tokens=3e10", *interval,
                 "--out", str(pred)]) == 0
    capsys.readouterr()
    return pred


def _token_curve(tmp_path):
    e = np.linspace(0, 3e10, 300)
    path = tmp_path / "run.csv"
    pd.DataFrame({"examples": e, "loss": 4.0 / (1 + e / 1e9) ** 0.15}).to_csv(path,
                                                                             index=False)
    return path


def test_from_a_predicted_batch_with_its_interval(tmp_path, capsys):
    from empirical_batch.cli import build_parser
    from empirical_batch.cli.schedule import _trajectory

    pred = _prediction(tmp_path, capsys, "--exponent-interval", "tokens=0.30:0.45")
    p = json.loads(pred.read_text())
    argv = ["schedule", "--b-crit-from", str(pred), "--loss-curve", str(_token_curve(tmp_path)),
            "--batch-size", "524288", "--base-batch", "256", "--unit", "sequences",
            "--tokens-per-example", "2048"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "B_crit from" in out and "30× beyond the anchor" in out and "taken as B_crit" in out
    assert "[1.454e+06, 2.423e+06]" in out and "L^(-1/0.21)" in out
    assert "in sequences" in out and "lower confidence bound" in out
    # the trajectory's B_crit (progress average) is the predicted batch, its lower bound
    # the interval's lower end
    traj = _trajectory(build_parser().parse_args(argv))
    assert traj.unit == "tokens" and traj.b_crit == pytest.approx(p["value"], rel=1e-9)
    assert traj.lower / traj.b_noise == pytest.approx(p["value_interval"]["low"] / p["value"])
    # the plan takes the same file through the same reader: the same B_crit
    assert main(["plan", "--b-crit-from", str(pred), "--s-min", str(traj.total),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["b_crit"] == pytest.approx(traj.b_crit)


def test_a_predicted_batch_without_an_interval_has_no_lower_bound(tmp_path, capsys):
    from empirical_batch.cli import build_parser
    from empirical_batch.cli.schedule import _trajectory

    pred = _prediction(tmp_path, capsys)
    argv = ["schedule", "--b-crit-from", str(pred), "--loss-curve", str(_token_curve(tmp_path)),
            "--batch-size", "524288", "--base-batch", "524288", "--alpha", "0.3",
            "--format", "json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["unit"] == "tokens"
    traj = _trajectory(build_parser().parse_args(argv))
    assert traj.lower is None and "(no interval)" in traj.source and "L^(-1/0.3)" in traj.source


@pytest.mark.parametrize("content, word", [
    ('{"fits": [{"target": 3.0, "b_crit": 100.0, "status": "identified"}]}',
     "not `empirical-batch law predict --out` output"),
    ("[1, 2, 3]", "not `empirical-batch law predict --out` output"),
    ("{not json", "not valid JSON"),
])
def test_a_bad_prediction_file_is_one_line(tmp_path, capsys, content, word):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    argv = ["--b-crit-from", str(bad), "--loss-curve", str(_token_curve(tmp_path)),
            "--batch-size", "8", "--base-batch", "8"]
    for command in (["schedule", *argv], ["plan", "--b-crit-from", str(bad), "--s-min", "10"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert word in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_learning_rate_prediction_is_not_a_b_crit(tmp_path, capsys):
    pred = tmp_path / "lr.json"
    assert main(["law", "predict", "--law", "steplaw_lr_opt", "--at",
                 "n_params=1e9,tokens=1e11", "--out", str(pred)]) == 0
    capsys.readouterr()
    assert main(["schedule", "--b-crit-from", str(pred), "--loss-curve",
                 str(_token_curve(tmp_path)), "--batch-size", "8", "--base-batch", "8"]) == 2
    err = capsys.readouterr().err
    assert "not a batch size" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("extra, word", [
    (["--log", "LOG"], "exactly one of"),
    ([], "--loss-curve"),
    (["--alpha", "-1"], "--alpha must be > 0"),
])
def test_b_crit_from_user_errors(tmp_path, capsys, log, extra, word):
    pred = _prediction(tmp_path, capsys)
    argv = ["schedule", "--b-crit-from", str(pred), "--batch-size", "8", "--base-batch", "8",
            *[str(log) if a == "LOG" else a for a in extra]]
    if word != "--loss-curve":
        argv += ["--loss-curve", str(_token_curve(tmp_path))]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert word in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_log_with_its_confidence_bound_is_followed_with_it(tmp_path, capsys):
    log = tmp_path / "gns.csv"
    log.write_text("step,examples,b_simple,b_simple_low\n1,32,50,40\n2,64,60,48\n"
                   "3,96,70,56\n4,128,80,64\n")
    argv = ["schedule", "--log", str(log), "--batch-size", "32", "--base-batch", "32",
            "--quantity", "b_simple"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "lower confidence bound reaches" in out and "no confidence bound" not in out
    assert main([*argv, "--lower-column", "none"]) == 0
    assert "no confidence bound" in capsys.readouterr().out
    log.write_text("step,examples,b_simple\n1,32,50\n2,64,60\n3,96,70\n4,128,80\n")
    assert main(argv) == 0
    assert "no confidence bound" in capsys.readouterr().out
