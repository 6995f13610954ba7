"""Float64 recomputation for the engine collectors' tests: the oracle model of
tests/measure_oracle.py, batches drawn with replacement, and the squared norms a step's
micro-gradients must have (numpy, no autograd), from the parameters the step saw."""

from __future__ import annotations

import numpy as np

from tests import measure_oracle as orc


def batch(step: int, rank: int, micro: int, size: int, seed: int = 3000) -> np.ndarray:
    """Indices of one micro-batch (drawn with replacement, fixed by its place)."""
    rng = np.random.default_rng([seed, step, rank, micro])
    return rng.integers(0, orc.N, size=size)


def grads_at(weight: np.ndarray, bias: float, x, y) -> np.ndarray:
    """(N, D+1) per-example gradients of ½(w·x + c − y)² at the given parameters."""
    xn, yn = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64).ravel()
    r = xn @ np.asarray(weight, dtype=np.float64).ravel() + float(bias) - yn
    return np.concatenate([r[:, None] * xn, r[:, None]], axis=1)


def weighted(micro_grads: list[np.ndarray], sizes, weights):
    """(sq_small, b_small, sq_big, b_big) of micro-gradients ``g_j`` of ``n_j`` examples
    entering the step with weights ``c_j`` (the unbiased pair of
    empirical_batch.measure.tracker, computed here from its definition)."""
    w = np.asarray(weights, dtype=np.float64) / weights[0]
    n = np.asarray(sizes, dtype=np.float64)
    a, s, c = np.sum(w**2), np.sum(w**2 / n), np.sum(w) ** 2
    sq_small = sum(wj**2 * g @ g for wj, g in zip(w, micro_grads, strict=True)) / a
    total = sum(wj * g for wj, g in zip(w, micro_grads, strict=True))
    return sq_small, a / s, (total @ total) / c, c / s


def replicas(local_grads: list[np.ndarray], b: int):
    """(sq_small, b_small, sq_big, b_big) of W replicas' mean gradients of b examples."""
    small = np.mean([g @ g for g in local_grads])
    mean = np.mean(local_grads, axis=0)
    return small, b, mean @ mean, b * len(local_grads)


def schedule_reads(log_path, batch_size: int, tmp_path):
    """``empirical-batch schedule --log`` on an engine's noise log: exit code 0 and a
    schedule table starting at ``batch_size`` (returned as a DataFrame)."""
    import pandas as pd

    from empirical_batch.cli import main

    out = tmp_path / "schedule.csv"
    code = main(["schedule", "--log", str(log_path), "--batch-size", str(batch_size),
                 "--base-batch", str(batch_size), "--quantity", "b_simple", "--unresolved",
                 "drop", "--format", "csv", "--out", str(out)])
    assert code == 0
    table = pd.read_csv(out)
    assert len(table) >= 1 and table["batch_size"].iloc[0] >= batch_size
    return table
