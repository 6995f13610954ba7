"""The noise log flows into `plan` (--noise-log: S_min and B_crit of the logged run) and
`transfer` (--noise-log: B_noise now); units carried and converted; plan says when the
hardware is the placeholder and when its bend is at a grid edge."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fit_docs import fit_document, fit_entry

from empirical_batch.cli import main
from empirical_batch.schedule import NoiseTrajectory


def _log(tmp_path, unit="examples"):
    step = np.arange(0, 2001, 10)
    b = 40.0 * (1 + step / 200.0)
    path = tmp_path / "noise.csv"
    pd.DataFrame({"step": step, "b_simple": b, "unit": unit}).to_csv(path, index=False)
    return path


def test_the_log_s_tradeoff_gives_back_the_logged_run(tmp_path):
    """S(B_ref) of the tradeoff read off a log equals the steps the logged run took."""
    path = _log(tmp_path)
    t = NoiseTrajectory.from_log(path, 64, quantity="b_simple")
    tr = t.tradeoff()
    assert tr.steps(64) == pytest.approx(2000, rel=1e-3)
    assert tr.b_crit == pytest.approx(t.b_crit) and tr.s_min == pytest.approx(t.total)
    const = NoiseTrajectory.from_examples([0, 1000, 5000], [30.0, 30.0, 30.0], 10)
    assert const.b_crit == pytest.approx(30.0)


def test_plan_from_a_noise_log(tmp_path, capsys):
    path = _log(tmp_path, unit="sequences")
    assert main(["plan", "--noise-log", str(path), "--batch-size", "64", "--quantity",
                 "b_simple", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    t = NoiseTrajectory.from_log(path, 64, quantity="b_simple")
    assert out["unit"] == "sequences" and out["b_crit"] == pytest.approx(t.b_crit)
    assert any("placeholder" in n for n in out["notes"])
    assert main(["plan", "--noise-log", str(path), "--batch-size", "64", "--quantity",
                 "b_simple", "--unit", "tokens", "--tokens-per-example", "256",
                 "--json"]) == 0
    tok = json.loads(capsys.readouterr().out)
    assert tok["unit"] == "tokens" and tok["b_crit"] == pytest.approx(256 * t.b_crit)
    assert tok["s_min"] == pytest.approx(t.total)
    assert main(["plan", "--noise-log", str(path), "--batch-size", "64", "--unit",
                 "tokens"]) == 2
    assert "tokens_per_example" in capsys.readouterr().err


def test_plan_names_placeholder_hardware_and_grid_edges(capsys):
    assert main(["plan", "--s-min", "1e4", "--b-crit", "500"]) == 0
    text = capsys.readouterr().out
    assert "note: the hardware is the built-in placeholder" in text
    assert main(["plan", "--s-min", "1e4", "--b-crit", "500", "--throughput", "800",
                 "--max-device-batch", "64", "--allreduce", "0.01", "--step-overhead",
                 "0.001", "--latency", "0.0001", "--price", "2", "--max-devices", "64",
                 "--batch-sizes", "8,16,32"]) == 0
    text = capsys.readouterr().out
    assert "placeholder" not in text
    assert "the bend is at the largest batch size tried (32)" in text


def test_transfer_from_a_noise_log(tmp_path, capsys):
    path = _log(tmp_path, unit="tokens")
    base = ["transfer", "--from-batch", "64", "--to-batch", "512", "--optimizer", "adam",
            "--lr", "1e-3", "--noise-log", str(path), "--quantity", "b_simple"]
    assert main([*base, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unit"] == "tokens" and out["b_noise"] == pytest.approx(40.0 * 11)
    assert main([*base, "--unit", "sequences"]) == 2
    assert "tokens_per_example" in capsys.readouterr().err
    assert main([*base, "--unit", "sequences", "--tokens-per-example", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["b_noise"] == pytest.approx(440.0 / 4)
    assert main([*base, "--b-noise", "100"]) == 2
    assert "not both" in capsys.readouterr().err


def test_fits_of_several_groups_are_not_planned_as_one(tmp_path, capsys):
    path = tmp_path / "fit.json"
    path.write_text(fit_document(fit_entry(10.0, 100.0, group={"model": "a"}),
                                 fit_entry(20.0, 900.0, group={"model": "b"})))
    assert main(["plan", "--fit", str(path)]) == 2
    assert "one fit per group" in capsys.readouterr().err


def test_plan_and_schedule_keep_the_fit_s_unit(tmp_path, capsys):
    path = tmp_path / "fit.json"
    fits = [fit_entry(100.0, b_crit=b, target=t, unit="tokens")
            for t, b in ((3.0, 4096.0), (2.5, 65536.0))]
    path.write_text(fit_document(*fits, unit="tokens"))
    assert main(["plan", "--fit", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unit"] == "tokens"
    curve = tmp_path / "curve.csv"
    e = np.linspace(0, 1e9, 50)
    pd.DataFrame({"examples": e, "loss": 3.2 - 0.7 * e / 1e9}).to_csv(curve, index=False)
    argv = ["schedule", "--fit", str(path), "--loss-curve", str(curve), "--batch-size",
            "4096", "--base-batch", "4096"]
    assert main(argv) == 0
    assert "in tokens" in capsys.readouterr().out
    assert main([*argv, "--unit", "sequences"]) == 2
    assert "tokens_per_example" in capsys.readouterr().err
