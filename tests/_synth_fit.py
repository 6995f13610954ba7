"""Synthetic sweeps with a known tradeoff (test helper, not a test module)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from empirical_batch.tradeoff import Tradeoff


def synthetic_table(tradeoff: Tradeoff, batch_sizes, *, n_seeds=1, sigma=0.1, rng=None):
    """Per-seed steps-to-target: S(B) times lognormal noise exp(sigma z)."""
    return tradeoff.sample_steps(batch_sizes, n_seeds=n_seeds, sigma=sigma, rng=rng)


def synthetic_sweep(tradeoff: Tradeoff, batch_sizes, *, lr_factors=(0.5, 1.0, 2.0),
                    n_seeds=2, sigma=0.05, points=40, rng=None, lr_penalty=0.3):
    """Long sweep whose metric is ``1 - log(step / s_run)``: exactly linear in log step,
    so the target 1.0 is crossed at ``s_run`` (interpolation is exact).

    ``s_run = S(B) * (1 + lr_penalty * log(f)^2) * exp(sigma z)`` for learning rate
    ``f * 0.1 * sqrt(B)``: the middle factor (f = 1) is best on average.
    """
    rng = np.random.default_rng(rng)
    rows = []
    for b in batch_sizes:
        sb = float(tradeoff.steps(b))
        for f in lr_factors:
            for k in range(n_seeds):
                s_run = sb * (1 + lr_penalty * np.log(f) ** 2) * np.exp(
                    sigma * rng.standard_normal())
                steps = np.unique(np.round(np.geomspace(s_run / 20, s_run * 20, points)))
                rows.append(pd.DataFrame({
                    "run": f"b{b}-f{f}-s{k}", "batch_size": b,
                    "learning_rate": 0.1 * f * np.sqrt(b), "seed": k, "step": steps,
                    "loss": 1.0 - np.log(steps / s_run)}))
    return pd.concat(rows, ignore_index=True)
