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
        steps, examples, final, saved_e, saved_s = (c.strip() for c in row.group(1).split("|"))
        got = t.loc[name]
        assert float(steps) == got["steps"]
        assert float(examples.replace(",", "")) == pytest.approx(got["examples"], abs=0.5)
        assert float(final) == pytest.approx(got["final_batch"], abs=0.5)
        assert float(saved_e.rstrip(" %")) == pytest.approx(got["examples_saved_%"], abs=0.05)
        assert float(saved_s.rstrip(" %")) == pytest.approx(got["steps_saved_%"], abs=0.05)
    # App. D's rule saves, as the paper's appendix predicts; the continuous optimum more
    assert 0 < t.loc["app_d r=100", "examples_saved_%"] < \
        t.loc["App. D continuous r=100", "examples_saved_%"]
