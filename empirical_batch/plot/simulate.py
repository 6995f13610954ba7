"""Plots for the quadratic simulator (matplotlib; pyplot is imported lazily)."""

from __future__ import annotations

import numpy as np

from ._axes import axes

__all__ = ["plot_steps_examples"]


def plot_steps_examples(problem, target, batch_sizes, learning_rates, *, ax=None):
    r"""Exact steps and examples to ``target`` (best rate of the grid) against B.

    Draws :math:`S(B)` and :math:`E(B) = BS(B)` from
    :meth:`~empirical_batch.simulate.NoisyQuadratic.best_lr` on log axes, with the
    asymptotes :math:`S_{min}` (largest batch) and :math:`E_{min}` (smallest batch).
    Returns the Axes.
    """
    ax = axes(ax, figsize=(5, 3.5))
    best = problem.best_lr(target, np.asarray(batch_sizes, float), learning_rates)
    b = np.atleast_1d(best.batch_size)
    s = np.atleast_1d(best.steps)
    ok = np.isfinite(s)
    if not ok.any():
        raise ValueError("no batch size reaches the target with these learning rates")
    ax.loglog(b[ok], s[ok], "o-", label="steps S")
    ax.loglog(b[ok], (b * s)[ok], "s-", label="examples E = BS")
    ax.axhline(s[ok][-1], ls=":", c="C0", lw=1)
    ax.axhline((b * s)[ok][0], ls=":", c="C1", lw=1)
    ax.set_xlabel("batch size B")
    ax.set_ylabel("to reach the target")
    ax.set_title(f"target {target:.3g}")
    ax.legend()
    return ax
