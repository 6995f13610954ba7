"""The analysis stage on the tiny preset swept on an H200 (``../shared/fixtures``).

Those sweeps once ended the analysis in ``OverflowError: math range error``: the B_crit(L)
law of text_lm/adam was fitted to three targets 1.7 % apart in loss, and its B_* interval
(the law extrapolated to L = 1) exceeded the float range. The analysis must finish, say
what was degenerate, and write the claims table with the averaged comparison. The
fixture is read from the shared folder beside the checkout (not copied into the
repository); the test skips where it, or the corpus of the GPU run, is absent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from empirical_batch.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / ".." / "shared" / "fixtures" / \
    "harness-tiny-h200"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.slow
def test_analyze_on_the_h200_sweeps_finishes_and_writes_the_averaged_claims(
        tmp_path, monkeypatch, published):
    if not (FIXTURE / "sweeps").is_dir():
        pytest.skip(f"needs the fixture {FIXTURE}")
    corpus = published("tinyshakespeare/input.txt")
    out = tmp_path / "copy"
    shutil.copytree(FIXTURE, out)
    monkeypatch.setenv("EMPIRICAL_BATCH_TEXT", str(corpus))  # the corpus of the GPU run
    assert main(["harness", "--config", "tiny", "--stage", "analyze", "--device", "cpu",
                 "--out", str(out), "--no-progress"]) == 0
    res = out / "results"
    law = pd.read_csv(res / "b_crit_law.csv").set_index(["task", "optimizer"])
    degenerate = law.loc[("text_lm", "adam")]
    assert degenerate["n_targets"] == 3 and np.isfinite(degenerate["alpha_b"])
    assert "float range" in degenerate["note"]
    crit = pd.read_csv(res / "b_crit_vs_noise.csv")
    assert {"b_simple_avg", "b_noise_avg", "b_crit_over_b_simple_avg",
            "b_crit_over_b_noise_avg", "b_simple", "b_noise"} <= set(crit.columns)
    claims = pd.read_csv(res / "claims.csv")
    assert {"verdict", "value", "verdict_local", "value_local"} <= set(claims.columns)
    a = claims[claims["claim"] == "a"]
    assert len(a) == 8 and a["evidence"].str.contains("b_simple_avg").all()
    assert not claims["evidence"].str.contains("= nan").any()  # no NaN medians
    assert "averaged up to the target" in (out / "report.md").read_text()
