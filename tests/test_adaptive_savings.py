"""The simulated savings of the adaptive-batch rule stated in docs/measure.md come from
``python -m analysis.adaptive_savings`` (exact expected dynamics: deterministic)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis.adaptive_savings import table

DOC = Path(__file__).resolve().parents[1] / "docs" / "measure.md"


def test_docs_state_the_computed_savings():
    t = table().set_index("policy")
    text = DOC.read_text()
    for name, label in (("doubling", "doubling"), ("b_noise", "b_noise"),
                        ("app_d r=100", "app_d, r = 100"),
                        ("App. D continuous r=100", "App. D continuous, r = 100")):
        row = re.search(rf"^\| {re.escape(label)} \| (.+) \|$", text, re.M)
        assert row, label
        (steps, examples, final, saved_e, saved_s, steps_i, examples_i, saved_e_i, saved_s_i,
         cost) = (c.strip() for c in row.group(1).split("|"))
        got = t.loc[name]
        assert float(steps_i) == pytest.approx(got["steps_interp"], abs=0.005)
        assert float(examples_i.replace(",", "")) == pytest.approx(got["examples_interp"],
                                                                   abs=0.5)
        for cell, col in ((saved_e_i, "examples_saved_interp_%"),
                          (saved_s_i, "steps_saved_interp_%"), (cost, "app_d_cost_saved_%")):
            assert float(cell.rstrip(" %")) == pytest.approx(got[col], abs=0.05)
        assert float(steps) == got["steps"]
        assert float(examples.replace(",", "")) == pytest.approx(got["examples"], abs=0.5)
        assert float(final) == pytest.approx(got["final_batch"], abs=0.5)
        assert float(saved_e.rstrip(" %")) == pytest.approx(got["examples_saved_%"], abs=0.05)
        assert float(saved_s.rstrip(" %")) == pytest.approx(got["steps_saved_%"], abs=0.05)
    # App. D's rule saves, as the paper's appendix predicts; the continuous optimum more
    assert 0 < t.loc["app_d r=100", "examples_saved_%"] < \
        t.loc["App. D continuous r=100", "examples_saved_%"]


def test_greedy_run_interpolates_the_crossing_within_the_last_step():
    import numpy as np

    from empirical_batch.simulate import NoisyQuadratic
    from empirical_batch.simulate.adaptive import greedy_run

    nq = NoisyQuadratic.zhang(50)
    b = np.array([4.0, 64.0, 1024.0])
    r = greedy_run(nq, 0.05, b)
    # the loss one step before the crossing, from runs stopped there (a target just
    # above the loss of step k - 1 is first reached at k - 1)
    for i, bi in enumerate(b):
        k = int(r["steps"][i])
        assert k - 1 < r["steps_interp"][i] <= k
        assert r["examples_interp"][i] == pytest.approx(r["examples"][i]
                                                        - bi * (k - r["steps_interp"][i]))
    # a target equal to a loss on the curve is crossed exactly at that step
    m = nq.init.copy()
    for _ in range(10):  # the greedy rate at B = 64, ten steps
        g2, ghg, _trs, trhs = nq.noise_scalars(m[None, :])
        a = float(g2[0] / (ghg[0] + trhs / 64))
        m = (1 - a * nq.update_curvature) ** 2 * m + a * a / 64 * nq.update_noise
    exact = greedy_run(nq, float(0.5 * m @ nq.curvature), np.array([64.0]))
    assert exact["steps_interp"][0] == pytest.approx(10.0, abs=1e-9)
