"""Tokens through every reader of a noise log: `plan`, `transfer` and `schedule` read a
log in sequences in tokens from its measured per-token column (the callbacks'
``b_simple_tokens``), not as sequences times a nominal sequence length; one flag,
``--tokens-per-example``, names tokens per example in the three commands."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from empirical_batch.cli import main
from empirical_batch.noise_log import final_noise_scale
from empirical_batch.schedule import NoiseTrajectory

CONTEXT = 2048  # the nominal sequence length
MEASURED = 1600  # loss tokens per sequence the run measured (padding left out)


def _log(tmp_path):
    steps = np.arange(1, 9)
    frame = pd.DataFrame({
        "noise_scale/step": steps, "step": steps,
        "noise_scale/b_simple": 50.0 + 10 * steps,
        "noise_scale/b_simple_low": 40.0 + 10 * steps,
        "noise_scale/b_simple_tokens": (50.0 + 10 * steps) * MEASURED,
        "noise_scale/examples": 32.0 * steps,
        "noise_scale/tokens": 32.0 * MEASURED * steps,
    }).drop(columns="noise_scale/step")
    path = tmp_path / "gns.csv"
    frame.to_csv(path, index=False)
    return path


def test_the_library_reads_tokens_from_the_measured_column(tmp_path):
    path = _log(tmp_path)
    seq = NoiseTrajectory.from_log(path, 32, quantity="b_simple",
                                   level_column="b_simple_low")
    tok = NoiseTrajectory.from_log(path, 32, quantity="b_simple", unit="tokens",
                                   tokens_per_example=CONTEXT,
                                   level_column="b_simple_low")
    assert seq.unit == "sequences" and tok.unit == "tokens"
    np.testing.assert_allclose(tok.b_noise, MEASURED * seq.b_noise)
    np.testing.assert_allclose(tok.lower, MEASURED * seq.lower)
    np.testing.assert_allclose(tok.progress, seq.progress)
    final = final_noise_scale(path, "b_simple", unit="tokens", tokens_per_example=CONTEXT)
    assert final.unit == "tokens" and final.value == pytest.approx(130.0 * MEASURED)
    assert "b_simple_tokens" in final.describe()
    # a log without the measured column converts with the nominal length, as asked
    plain = pd.read_csv(path).drop(columns="noise_scale/b_simple_tokens")
    plain["unit"] = "sequences"
    plain.columns = [c.removeprefix("noise_scale/") for c in plain.columns]
    got = final_noise_scale(plain, "b_simple", unit="tokens", tokens_per_example=CONTEXT)
    assert got.value == pytest.approx(130.0 * CONTEXT) and got.column == ""


def test_plan_and_transfer_use_the_measured_tokens(tmp_path, capsys):
    path = _log(tmp_path)
    ref = NoiseTrajectory.from_log(path, 32, quantity="b_simple").tradeoff()
    assert main(["plan", "--noise-log", str(path), "--batch-size", "32",
                 "--quantity", "b_simple", "--unit", "tokens",
                 "--tokens-per-example", str(CONTEXT), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unit"] == "tokens"
    assert out["b_crit"] == pytest.approx(ref.b_crit * MEASURED, rel=1e-9)
    assert out["s_min"] == pytest.approx(ref.s_min, rel=1e-9)
    assert main(["transfer", "--from-batch", "65536", "--to-batch", "131072",
                 "--optimizer", "adamw", "--lr", "3e-4", "--noise-log", str(path),
                 "--quantity", "b_simple", "--unit", "tokens",
                 "--tokens-per-example", str(CONTEXT), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unit"] == "tokens"
    assert out["b_noise"] == pytest.approx(130.0 * MEASURED)


def test_schedule_reads_the_measured_tokens(tmp_path, capsys):
    path = _log(tmp_path)
    argv = ["schedule", "--log", str(path), "--batch-size", "32", "--quantity", "b_simple",
            "--base-batch", "8192", "--unit", "tokens", "--format", "json"]
    assert main([*argv, "--tokens-per-example", str(CONTEXT)]) == 0
    measured = json.loads(capsys.readouterr().out)
    tok = NoiseTrajectory.from_log(path, 32, quantity="b_simple", unit="tokens",
                                   level_column="b_simple_low")  # the log's bound
    assert measured["unit"] == "tokens"
    from empirical_batch.schedule import design_schedule

    ref = design_schedule(tok, "doubling", base_batch=8192, optimizer="adam")
    assert measured["stages"] == json.loads(json.dumps(ref.to_dict()))["stages"]


def test_one_flag_the_old_name_removed(tmp_path, capsys):
    path = _log(tmp_path)
    argv = ["schedule", "--log", str(path), "--batch-size", "32", "--quantity", "b_simple",
            "--base-batch", "64", "--unit", "sequences", "--format", "megatron"]
    assert main([*argv, "--tokens-per-example", "2048"]) == 0
    capsys.readouterr()
    for command in ("plan", "transfer", "schedule"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--tokens-per-example" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:  # removed in 0.4: argparse's own refusal
        main([*argv, "--tokens-per-sample", "2048"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --tokens-per-sample" in capsys.readouterr().err
    assert main([*argv, "--tokens-per-example", "2048.5"]) == 2
    assert "whole number" in capsys.readouterr().err
