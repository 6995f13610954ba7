"""`empirical-batch harness --config tiny` end to end: sweep → load_sweep → fits → report."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from empirical_batch import load_sweep
from empirical_batch.cli import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.slow
def test_tiny_end_to_end(tmp_path, capsys, text_corpus):
    out = tmp_path / "h"
    assert main(["harness", "--config", "tiny", "--out", str(out), "--no-progress"]) == 0
    for task in ("teacher_student", "digits", "sequence", "text_lm"):
        sweep = load_sweep(out / "sweeps" / f"{task}.csv")
        assert set(sweep.to_frame()["optimizer"]) == {"sgd", "adam"}
        for fig in ("tradeoff", "b_crit_vs_loss", "one_step"):
            assert (out / "figures" / f"{task}_{fig}.png").stat().st_size > 0
    crit = pd.read_csv(out / "results" / "b_crit_vs_noise.csv")
    assert set(crit["task"]) == {"teacher_student", "digits", "sequence", "text_lm"}
    fitted = crit.dropna(subset=["b_crit"])
    assert len(fitted) >= 8  # the plumbing fits something for every task/optimizer
    assert (fitted["b_crit_low"] <= fitted["b_crit"]).all()
    # a target that is not fitted says why
    assert crit.loc[crit["b_crit"].isna(), "note"].fillna("").astype(str).str.len().gt(0).all()
    noise = pd.read_csv(out / "results" / "noise_along_reference.csv")
    assert np.isfinite(noise["b_simple"]).all() and (noise["n_examples"] > 0).all()
    refs = pd.read_csv(out / "results" / "reference_runs.csv")
    # the reference run, retrained with the plain loop, reproduces its sweep curve
    # (float32, batched vs plain: round-off only)
    assert (refs["replay_error"] < 1e-4).all()
    one = pd.read_csv(out / "results" / "one_step.csv")
    assert {"eps_opt", "eps_opt_pred_hvp", "dl_opt", "dl_opt_pred_hvp"} <= set(one.columns)
    report = (out / "report.md").read_text()
    assert "B_crit/B_simple" in report and "One-step" in report
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"] == "tiny" and manifest["device"] == "cpu"
    assert "empirical-batch harness --config tiny" in manifest["command"]
    claims = pd.read_csv(out / "results" / "claims.csv")
    assert set(claims["claim"]) == set("abcdef")  # f: branched (teacher_student)
    assert claims["verdict"].isin(["holds", "does not hold", "undecided", "not tested"]).all()
    assert "Claims of the paper" in report
    branched = pd.read_csv(out / "results" / "branched.csv")  # tiny: teacher_student only
    assert list(branched["task"]) == ["teacher_student"] * 2
    assert list(branched["optimizer"]) == ["sgd", "adam"]
    assert (branched["b_branched_low"] >= 16).all() and "branched training" in report
    # the report stage redoes the target-dependent analysis from the CSVs alone: the same
    # targets and B_crit (the measured noise scales come back from 6-digit CSVs)
    assert main(["harness", "--config", "tiny", "--stage", "report", "--out", str(out),
                 "--no-progress"]) == 0
    again = pd.read_csv(out / "results" / "b_crit_vs_noise.csv")
    pd.testing.assert_frame_equal(again[["task", "optimizer", "target", "b_crit"]],
                                  crit[["task", "optimizer", "target", "b_crit"]])
    np.testing.assert_allclose(again["b_simple"], crit["b_simple"], rtol=1e-4)
    assert json.loads((out / "manifest.report.json").read_text())["stage"] == "report"
    pd.testing.assert_frame_equal(pd.read_csv(out / "results" / "branched.csv"), branched)


def test_report_stage_needs_an_analysis(tmp_path):
    from empirical_batch.harness.config import get_config
    from empirical_batch.validation.report import reanalyze

    with pytest.raises(FileNotFoundError, match="run the analyze stage first"):
        reanalyze(get_config("tiny", ["digits"]), tmp_path)


def test_analyze_needs_a_sweep(tmp_path):
    assert main(["harness", "--config", "tiny", "--tasks", "digits", "--stage", "analyze",
                 "--out", str(tmp_path), "--no-progress"]) == 2


@pytest.mark.gpu
def test_tiny_end_to_end_on_cuda(tmp_path, text_corpus):
    """The whole pipeline on CUDA (plumbing: on the GPU the data come from the device's
    generator, so the numbers differ from the CPU run and are not asserted)."""
    out = tmp_path / "h"
    assert main(["harness", "--config", "tiny", "--device", "cuda", "--out", str(out),
                 "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["device"].startswith("cuda") and manifest["device_name"]
    for task in ("teacher_student", "digits", "sequence", "text_lm"):
        assert len(load_sweep(out / "sweeps" / f"{task}.csv").to_frame()) > 0
        assert (out / "figures" / f"{task}_one_step.png").stat().st_size > 0
    refs = pd.read_csv(out / "results" / "reference_runs.csv")
    # plain-loop replay on the GPU of a batched GPU run: float32 round-off only
    assert (refs["replay_error"] < 1e-4).all()
    noise = pd.read_csv(out / "results" / "noise_along_reference.csv")
    assert np.isfinite(noise[["b_simple", "b_simple_collector", "g2"]]).all().all()
    one = pd.read_csv(out / "results" / "one_step.csv")
    assert set(one["task"]) == {"teacher_student", "digits", "sequence", "text_lm"}
