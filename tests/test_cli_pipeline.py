"""The command line as a pipeline: fit reads steps tables and filters rows, --json output
on fit and plan, fit feeds plan, plan with measured timings, and the README's shell plan
prints what its Python block prints."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fit_docs import fit_document, fit_entry

from empirical_batch import Hardware, Tradeoff, plan
from empirical_batch.cli import main
from empirical_batch.datasets import bundled
from empirical_batch.planning import frontier_bend


def _json(argv, capsys):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_fit_reads_a_steps_table_with_where(tmp_path, capsys):
    t = Tradeoff.from_b_crit(100.0, s_min=2000)
    b = [16, 32, 64, 128, 256, 512, 1024]
    rows = [{"model": m, "batch_size": x, "steps_to_target": float(t.steps(x)) * k}
            for m, k in (("small", 1.0), ("big", 3.0)) for x in b]
    path = tmp_path / "steps.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    out = _json(["fit", str(path), "--where", "model == 'big'", "--n-boot", "200", "--json",
                 "--fractional-steps"], capsys)  # exact (fractional) steps of the curve
    (fit,) = out["fits"]
    assert fit["b_crit"] == pytest.approx(100.0, rel=1e-6)
    assert fit["s_min"] == pytest.approx(6000.0, rel=1e-6) and fit["status"] == "identified"


def test_fit_steps_table_refuses_a_target(tmp_path, capsys):
    path = tmp_path / "steps.csv"
    pd.DataFrame({"batch_size": [1, 2, 4], "steps": [4.0, 3.0, 2.5]}).to_csv(path, index=False)
    assert main(["fit", str(path), "--target", "1.0"]) == 2
    assert "without --target" in capsys.readouterr().err


@pytest.mark.parametrize("expr, word", [("model ==", "--where"), ("batch_size > 1e9", "no row")])
def test_bad_where(tmp_path, capsys, expr, word):
    path = tmp_path / "steps.csv"
    pd.DataFrame({"batch_size": [1, 2, 4], "steps": [4.0, 3.0, 2.5]}).to_csv(path, index=False)
    assert main(["fit", str(path), "--where", expr]) == 2
    err = capsys.readouterr().err
    assert word in err and "Traceback" not in err


def test_fit_on_zhang_et_al_2024(capsys):
    path = bundled("zhang2024_critical_batch_size/steps_to_target.csv")
    out = _json(["fit", str(path), "--where", "model == '151M'", "--n-boot", "200",
                 "--json"], capsys)
    assert out["fits"][0]["b_crit"] > 0


def test_wrong_direction_names_the_direction(tmp_path, capsys):
    steps = np.arange(1, 51)
    df = pd.concat([pd.DataFrame({"run": f"r{b}", "batch_size": b, "learning_rate": 0.1,
                                  "step": steps, "accuracy": 1 - 1 / (1 + steps * b / 100)})
                    for b in (8, 16, 32)])
    path = tmp_path / "acc.csv"
    df.to_csv(path, index=False)
    assert main(["fit", str(path), "--target", "0.9", "--metric", "accuracy",
                 "--lower-is-better"]) == 2
    err = capsys.readouterr().err
    assert "--higher-is-better" in err and "lower is better" in err


def test_fit_json_feeds_plan(tmp_path, capsys):
    t = Tradeoff.from_b_crit(300.0, s_min=5000)
    b = [16, 32, 64, 128, 256, 512, 1024, 2048]
    src = tmp_path / "steps.csv"
    pd.DataFrame({"batch_size": b, "steps": t.steps(b)}).to_csv(src, index=False)
    fit_json = tmp_path / "fit.json"
    assert main(["fit", str(src), "--n-boot", "200", "--json", "--fractional-steps"]) == 0
    fit_json.write_text(capsys.readouterr().out)
    out = _json(["plan", "--fit", str(fit_json), "--json"], capsys)
    assert out["b_crit"] == pytest.approx(300.0, rel=1e-6)
    want = frontier_bend(plan(t))
    assert out["bend"]["batch_size"] == want.batch_size
    assert out["bend"]["devices"] == want.devices


def test_plan_refuses_a_fit_that_is_only_a_bound(tmp_path, capsys):
    path = tmp_path / "fit.json"
    path.write_text(fit_document(fit_entry(1.0, 2.0, status="lower_bound")))
    assert main(["plan", "--fit", str(path)]) == 2
    assert "identified" in capsys.readouterr().err


def test_readme_shell_plan_prints_what_the_python_block_prints(capsys):
    hw = Hardware(throughput=800, max_device_batch=128, step_overhead_s=0.004,
                  allreduce_s=0.03, price_per_device_hour=2.5, max_devices=256)
    bend = frontier_bend(plan(Tradeoff.from_b_crit(1200, s_min=10_000), hw))
    out = _json(["plan", "--b-crit", "1200", "--s-min", "10000", "--throughput", "800",
                 "--max-device-batch", "128", "--step-overhead", "0.004", "--allreduce",
                 "0.03", "--price", "2.5", "--max-devices", "256", "--json"], capsys)
    assert (out["bend"]["batch_size"], out["bend"]["devices"]) == (1024, 32)
    assert out["bend"]["wall_hours"] == pytest.approx(bend.wall_hours)
    assert out["bend"]["cost"] == pytest.approx(bend.cost)


def test_plan_with_measured_timings(tmp_path, capsys):
    from empirical_batch.throughput import ThroughputModel

    truth = ThroughputModel(0.02, 0.001, 0.05, 0.002, 2.0, 0.0, 0)
    rows = [{"micro_batch": m, "devices": n, "accumulation": k,
             "step_seconds": truth.step_seconds(m, n, k)}
            for m in (8, 32, 128) for n in (1, 2, 8, 32) for k in (1, 4)]
    path = tmp_path / "timings.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    assert main(["plan", "--b-crit", "500", "--s-min", "1000", "--timings", str(path)]) == 0
    text = capsys.readouterr().out
    assert "ThroughputModel" in text and "saturates throughput" in text
    out = _json(["plan", "--b-crit", "500", "--s-min", "1000", "--timings", str(path),
                 "--json"], capsys)
    m = out["throughput_model"]
    assert m["alpha_grad"] == pytest.approx(0.02, rel=1e-3)
    assert m["beta_sync"] == pytest.approx(0.002, rel=1e-3)
    assert out["saturating_micro_batch"] == pytest.approx(0.9 * 0.02 / (0.1 * 0.001), rel=1e-3)


def test_csv_output_of_fit_simulate_and_plan(tmp_path, capsys):
    import io

    t = Tradeoff.from_b_crit(100.0, s_min=2000)
    b = [16, 32, 64, 128, 256, 512]
    src = tmp_path / "steps.csv"
    pd.DataFrame({"batch_size": b, "steps": t.steps(b)}).to_csv(src, index=False)
    assert main(["fit", str(src), "--n-boot", "0", "--csv", "--fractional-steps"]) == 0
    fit = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert fit["batch_size"].tolist() == b
    assert main(["simulate", "--dims", "50", "--steps", "500", "--csv", "--quiet"]) == 0
    sim = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert {"batch_size", "learning_rate", "steps", "examples"} <= set(sim.columns)
    assert main(["plan", "--b-crit", "100", "--s-min", "2000", "--csv"]) == 0
    fr = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert fr["pareto"].all() and len(fr) > 1
