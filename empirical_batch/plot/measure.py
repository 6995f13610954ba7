"""Plots of a measured gradient noise scale (B_simple with its band)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError, NotFoundError
from ._axes import axes

__all__ = ["plot_b_simple"]


def plot_b_simple(frame, *, x: str = "step", band: str = "interval", ax=None, label=None):
    """B_simple against ``x`` ("step" or "loss") with its uncertainty band.

    ``frame`` is `empirical_batch.measure.NoiseScaleLog.to_frame` (columns
    ``b_simple``, ``b_simple_se``, ``b_simple_low``, ``b_simple_high`` and ``x``).
    ``band="interval"`` shades the Fieller interval, ``"se"`` ±1 standard error,
    ``None`` nothing. Rows with a negative or infinite B_simple (|G|² not resolved)
    are not drawn on the log axis; their count is put in the legend label.
    Returns the Axes.
    """
    if x not in ("step", "loss"):
        raise InputError(f"x must be 'step' or 'loss', got {x!r}")
    if band not in ("interval", "se", None):
        raise InputError(f"band must be 'interval', 'se' or None, got {band!r}")
    for col in (x, "b_simple"):
        if col not in frame:
            raise NotFoundError(f"frame has no column {col!r}")
    ax = axes(ax)
    xs = np.asarray(frame[x], float)
    b = np.asarray(frame["b_simple"], float)
    ok = np.isfinite(b) & (b > 0) & np.isfinite(xs)
    n_bad = int((~ok & np.isfinite(xs)).sum())
    text = label or "B_simple"
    if n_bad:
        text += f" ({n_bad} unresolved rows not shown)"
    rows = np.flatnonzero(ok)[np.argsort(xs[ok])]  # drawn rows, in order of x
    xs, b = xs[rows], b[rows]
    ax.plot(xs, b, label=text)
    if band == "interval" and "b_simple_low" in frame:
        lo = np.asarray(frame["b_simple_low"], float)[rows]
        hi = np.asarray(frame["b_simple_high"], float)[rows]
        ax.fill_between(xs, np.clip(lo, 1e-300, None), hi, alpha=0.25, lw=0)
    elif band == "se" and "b_simple_se" in frame:
        se = np.asarray(frame["b_simple_se"], float)[rows]
        ax.fill_between(xs, np.clip(b - se, 1e-300, None), b + se, alpha=0.25, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step" if x == "step" else "training loss")
    unit = str(frame["unit"].iloc[0]) if "unit" in frame and len(frame) else "examples"
    ax.set_ylabel(f"B_simple ({unit})")
    if x == "loss":
        ax.invert_xaxis()  # training moves to lower loss
    ax.legend()
    return ax
