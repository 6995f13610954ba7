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
    from empirical_batch.validation.study import run_study

    before = torch.get_num_threads()
    mine = 2 if before != 2 else 3
    torch.set_num_threads(mine)
    try:
        # the analysis of a folder without sweeps fails after the threads were set
        with pytest.raises((OSError, ValueError)):
            run_study(get_config("tiny", ["digits"]), tmp_path / "h", stage="analyze",
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


def test_b_crit_at_a_checkpoint_is_fitted_clear_of_a_configurations_best_loss():
    """The reference run is one of the sweep's runs, so a checkpoint's loss is one of its
    logged losses and can be its best loss, where B_crit jumps; the branched table fits
    B_crit clear of them, so rounding the loss changes nothing."""
    from empirical_batch.fit.targets import best_losses
    from empirical_batch.validation.fits import branched_vs_fit

    frame = synthetic_sweep(Tradeoff(s_min=100, e_min=6400), [8, 16, 32, 64, 128, 256],
                            rng=0)
    sweep = load_sweep(frame)
    per_config = best_losses(sweep.to_frame())[2]
    at_best = float(per_config.sort_values().iloc[len(per_config) // 2])
    b, lr = per_config.sort_values().index[len(per_config) // 2]
    f = sweep.to_frame()
    logged = float(f[(f.batch_size == b) & np.isclose(f.learning_rate, lr)]["metric"].iloc[5])
    rows = pd.DataFrame({"task": "toy", "optimizer": "sgd", "step": 10,
                         "eval_loss": [at_best, float(f"{at_best:.6g}"), logged,
                                       float(f"{logged:.6g}")], "base_batch": b,
                         "learning_rate": lr, "b_noise": 50.0})
    out = branched_vs_fit(rows, {("toy", "sgd"): sweep})
    assert (out["b_crit_target"] > out["eval_loss"]).all()
    assert out["b_crit"].iloc[0] == out["b_crit"].iloc[1]
    assert out["b_crit"].iloc[2] == out["b_crit"].iloc[3]
    assert out["b_crit_plus_2b"].iloc[0] == pytest.approx(out["b_crit"].iloc[0] + 2 * b)
    assert list(branched_vs_fit(out, {("toy", "sgd"): sweep}).columns) == list(out.columns)
