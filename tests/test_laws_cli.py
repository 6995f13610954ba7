"""`empirical-batch law fit|predict|list`: the issue's examples, JSON output, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _synth_laws import TRUE, loss_grid

from empirical_batch.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_fit_recovers_the_exponent_and_flags_edges(tmp_path, capsys):
    f = loss_grid(np.random.default_rng(0), ds=(2e9, 8e9, 3.2e10, 1.28e11, 1e13),
                  bs=2.0 ** np.arange(4, 14))
    path = tmp_path / "steplaw.csv"
    f.to_csv(path, index=False)
    code, out, err = _run(capsys, "law", "fit", str(path), "--inputs", "tokens",
                          "--quantity", "b_opt", "--n-boot", "20", "--json")
    assert code == 0
    data = json.loads(out)
    ci = data["law"]["exponent_intervals"][0]
    assert ci["low"] <= TRUE["k_d"] <= ci["high"]
    assert data["law"]["ranges"] == [[2e9, 1.28e11]] and data["law"]["unit"] == "tokens"
    cells = dict(zip(data["cells"]["columns"], zip(*data["cells"]["rows"], strict=True),
                     strict=True))
    assert sum(cells["b_opt_at_edge"]) == 3  # the D = 1e13 cells: optimum beyond the grid
    assert "edge" in err and data["selection"]["chosen"] == "tokens"
    code, text, _ = _run(capsys, "law", "fit", str(path), "--n-boot", "0")
    assert code == 0 and "at the grid's edge (a bound, left out of the law) in:" in text
    assert "(tokens)" in text and "model selection: tokens" in text


def test_list_shows_five_laws_with_citations_and_ranges(capsys):
    code, out, _ = _run(capsys, "law", "list")
    assert code == 0
    assert out.count("source:") >= 5 and out.count("fitted on:") >= 5
    assert "arXiv:2503.04715" in out and "arXiv:2001.08361" in out
    code, out, _ = _run(capsys, "law", "list", "--json")
    assert len(json.loads(out)) >= 5


def test_predict_the_nanochat_example(capsys, tmp_path):
    code, out, err = _run(capsys, "law", "predict", "--law", "power_lines_b_opt",
                          "--anchor", "batch=524288,tokens=1e9", "--at", "tokens=3e10",
                          "--exponent-interval", "tokens=0.30:0.45", "--json",
                          "--out", str(tmp_path / "pred.json"))
    assert code == 0
    p = json.loads(out)
    assert p["value"] == pytest.approx(524288 * 30**0.383) and p["rounded"] == 2**21
    assert p["value_interval"]["low"] < p["value"] < p["value_interval"]["high"]
    assert p["status"] == "extrapolating" and p["beyond_anchor"]["tokens"] == pytest.approx(30)
    assert "30× beyond the anchor" in err
    assert json.loads((tmp_path / "pred.json").read_text())["rounded"] == 2**21
    code, text, _ = _run(capsys, "law", "predict", "--law", "power_lines_b_opt",
                         "--anchor", "batch=524288,tokens=1e9", "--at", "tokens=3e10")
    assert "tokens" in text and "status: extrapolating" in text


def test_predict_from_a_fitted_law_file(tmp_path, capsys):
    path = tmp_path / "grid.csv"
    loss_grid(np.random.default_rng(1)).to_csv(path, index=False)
    _, out, _ = _run(capsys, "law", "fit", str(path), "--n-boot", "0", "--json")
    (tmp_path / "law.json").write_text(out)
    code, out, _ = _run(capsys, "law", "predict", "--law", str(tmp_path / "law.json"),
                        "--at", "tokens=1e12", "--devices", "8", "--micro-batch", "4",
                        "--seq-len", "2048", "--json")
    p = json.loads(out)
    assert code == 0 and p["status"] == "outside_range"
    assert p["rounded"] % (8 * 4 * 2048) == 0
    assert p["beyond_range"]["tokens"] == pytest.approx(1e12 / 1.28e11)


@pytest.mark.parametrize("argv, message", [
    (["law", "predict", "--law", "nope", "--at", "tokens=1e9"], "no published law"),
    (["law", "predict", "--law", "steplaw_b_opt", "--at", "tokens"], "KEY=VALUE"),
    (["law", "predict", "--law", "steplaw_b_opt", "--at", "tokens=-5"], "> 0"),
    (["law", "predict", "--law", "power_lines_b_opt", "--at", "tokens=1e9"], "anchor"),
    (["law", "predict", "--law", "power_lines_b_opt", "--at", "tokens=1e9", "--anchor",
      "tokens=1e8"], "batch="),
])
def test_errors_are_one_line(capsys, argv, message):
    code, _, err = _run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_plan_takes_the_predicted_batch_as_its_b_crit(tmp_path, capsys):
    pred = tmp_path / "pred.json"
    _run(capsys, "law", "predict", "--law", "power_lines_b_opt", "--anchor",
         "batch=524288,tokens=1e9", "--at", "tokens=3e10", "--exponent-interval",
         "tokens=0.30:0.45", "--out", str(pred))
    code, out, _ = _run(capsys, "plan", "--b-crit-from", str(pred), "--s-min", "20000",
                        "--json")
    data = json.loads(out)
    p = json.loads(pred.read_text())
    assert code == 0 and data["b_crit"] == pytest.approx(p["value"])
    assert data["unit"] == "tokens" and data["e_min"] == pytest.approx(20000 * p["value"])
    assert "30× beyond the anchor" in data["source"] and "taken as B_crit" in data["source"]
    code, _, err = _run(capsys, "plan", "--b-crit-from", str(pred), "--b-crit", "5",
                        "--s-min", "10")
    assert code == 2 and "not both" in err
