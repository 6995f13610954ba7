"""The harness benchmark and its estimate run (smoke, not timed), and the estimate's
pricing is the arithmetic its notes state."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_harness
import estimate_harness

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_pricing_of_group_steps():
    eager = estimate_harness.Pricing(t_op=2.0, t_graph=None, peak=1.0)
    assert eager.group((3, 5, 7), steps=10, evals=2, groups=4) == 10 * 8 * 2.0 + 2 * 7 * 2.0
    graphed = estimate_harness.Pricing(t_op=2.0, t_graph=0.5, peak=1.0)
    warm = 4 * (estimate_harness.GRAPH_WARMUP + 2) * 5 * 2.0
    assert graphed.group((3, 5, 7), 10, 2, 4) == 10 * (3 * 2.0 + 5 * 0.5) + 2 * 7 * 2.0 + warm


def test_bench_harness_tiny_runs_with_its_estimate(capsys):
    assert bench_harness.main(["--config", "tiny", "--scale", "0.05", "--tasks",
                               "teacher_student", "--modes", "auto", "plain",
                               "--estimate", "--op-us", "20", "--peak-tflops", "10"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("teacher_student")]
    assert len(rows) == 2  # the timed table and the estimate
    est = rows[1]
    parts = [float(v) for v in est[1:5]]
    assert all(v >= 0 for v in parts) and float(est[5]) == pytest.approx(sum(parts), abs=0.2)
    assert "20.0 us per eager op, no graphs" in out
