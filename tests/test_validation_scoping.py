"""Library calls leave the process as they found it: torch's thread count (the harness
sets 1 thread on the CPU for its own run) and matplotlib's backend and pyplot state (the
validation figures are drawn on `Figure` objects)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
matplotlib = pytest.importorskip("matplotlib")

from empirical_batch import critical_batch_curve, load_sweep  # noqa: E402
from empirical_batch.tradeoff import Tradeoff  # noqa: E402
from tests._synth_fit import synthetic_sweep  # noqa: E402


def test_run_harness_restores_the_callers_thread_count(tmp_path):
    from empirical_batch.harness.config import get_config
    from empirical_batch.harness.pipeline import run_harness

    before = torch.get_num_threads()
    mine = 2 if before != 2 else 3
    torch.set_num_threads(mine)
    try:
        # the analysis of a folder without sweeps fails after the threads were set
        with pytest.raises((OSError, ValueError)):
            run_harness(get_config("tiny", ["digits"]), tmp_path / "h", stage="analyze",
                        device="cpu", threads=1, progress=False)
        assert torch.get_num_threads() == mine
    finally:
        torch.set_num_threads(before)


def test_the_validation_figures_leave_matplotlib_as_it_was(tmp_path):
    import matplotlib.pyplot as plt

    from empirical_batch.validation.figures import task_figures

    frame = synthetic_sweep(Tradeoff(s_min=100, e_min=6400), [8, 16, 32, 64, 128, 256], rng=0)
    curve = critical_batch_curve(load_sweep(frame), [1.0, 0.5], n_boot=50, seed=0)
    scales = pd.DataFrame({"step": [0, 10, 100], "eval_loss": [3.0, 1.0, 0.5],
                           "b_simple_collector": [10.0, 30.0, 60.0],
                           "b_noise_pop": [12.0, 25.0, 50.0], "b_noise": [11.0, 24.0, 49.0]})
    backend = matplotlib.get_backend()
    matplotlib.use("svg")  # a program's own (non-Agg) backend
    try:
        open_before = plt.get_fignums()
        files = task_figures("toy", {("toy", "sgd"): (curve, scales)}, pd.DataFrame(),
                             pd.DataFrame(), pd.DataFrame(), tmp_path)
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == open_before
    finally:
        matplotlib.use(backend)
    assert [f.name for f in files] == ["toy_tradeoff.png", "toy_b_crit_vs_loss.png"]
    assert all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in files)
    assert np.isfinite(curve.b_crit).any()
