"""Plots for the quadratic simulator (matplotlib; pyplot is imported lazily)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ._axes import axes

__all__ = ["plot_steps_examples"]


def plot_steps_examples(best, *, ax=None):
    r"""Steps and examples to a target against B, from a simulator result.

    ``best`` is a `~empirical_batch.simulate.BestLR` (e.g.
    ``problem.best_lr(target, batch_sizes, learning_rates)``): the plot draws
    $S(B)$ and $E(B) = BS(B)$ on log axes, with the asymptotes
    $S_{min}$ (largest batch) and $E_{min}$ (smallest batch); it runs
    nothing. Returns the Axes.
    """
    from ..simulate.search import BestLR

    if not isinstance(best, BestLR):
        raise InputError(f"best must be a BestLR (NoisyQuadratic.best_lr's result), got "
                        f"{type(best).__name__}")
    ax = axes(ax, figsize=(5, 3.5))
    target = best.target
    b = np.atleast_1d(best.batch_size)
    s = np.atleast_1d(best.steps)
    ok = np.isfinite(s)
    if not ok.any():
        raise InputError("no batch size reaches the target with these learning rates")
    ax.loglog(b[ok], s[ok], "o-", label="steps S")
    ax.loglog(b[ok], (b * s)[ok], "s-", label="examples E = BS")
    ax.axhline(s[ok][-1], ls=":", c="C0", lw=1)
    ax.axhline((b * s)[ok][0], ls=":", c="C1", lw=1)
    ax.set_xlabel("batch size B")
    ax.set_ylabel("to reach the target")
    ax.set_title(f"target {target:.3g}")
    ax.legend()
    return ax
