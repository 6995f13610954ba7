"""Small numerical helpers shared across the package (one place each)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ._validate import check_count
from .errors import InputError

__all__ = ["exp_or_inf", "log_steps", "progress_mean", "trapezoid"]


def trapezoid(y: ArrayLike, x: ArrayLike) -> float:
    r"""The trapezoid rule $\sum_i \tfrac12(y_i + y_{i+1})(x_{i+1} - x_i)$.

    Written out because ``numpy.trapezoid`` needs numpy >= 2.0 and the project supports
    numpy >= 1.26 (where it is ``numpy.trapz``).

    >>> trapezoid([0.0, 1.0, 2.0], [0.0, 1.0, 2.0])
    2.0
    """
    y = np.asarray(y, dtype=float)
    x = np.asarray(x, dtype=float)
    return float(np.sum(0.5 * (y[1:] + y[:-1]) * np.diff(x)))


def progress_mean(values: ArrayLike, *, increments: ArrayLike | None = None,
                  at: ArrayLike | None = None, rate: ArrayLike | None = None,
                  start: float | None = None) -> float:
    r"""The progress-weighted mean $E_s[\mathcal B] = \int \mathcal B\,ds / \int ds$
    (McCandlish et al. 2018, App. D): with eq. D.1's $S_{min} = \int ds$ and
    $E_{min} = \int \mathcal B\,ds$, the critical batch of a fixed-batch run is
    $B_{crit} = E_{min}/S_{min}$ (eq. 2.12), the mean of the noise scale $\mathcal B$
    over the progress $s$ (infinite-batch steps; a step at batch $B$ advances
    $ds = 1/(1 + B_{noise}/B)$, eq. 2.7). One of two discretisations:

    - ``increments``: each of ``values`` is one step and ``increments`` its progress
      $ds_i$: $\sum_i \mathcal B_i\,ds_i / \sum_i ds_i$.
    - ``at``: the values are at the points ``at`` of a coordinate $x$ (training steps,
      or the progress itself) and ``rate`` is $ds/dx$ there (default 1: ``at`` is the
      cumulative progress $s$). Both integrals, $\int \mathcal B\,(ds/dx)\,dx$ and
      $\int (ds/dx)\,dx$, by the trapezoid rule over the points (the integrand linear
      between them). ``start`` (at or before ``at[0]``; default ``at[0]``) is the lower
      end of both: before the first point the integrand is held at its first value
      (`NoiseTrajectory.b_crit` counts progress from 0 that way).

    NaN when the total progress $\int ds$ is 0. ``at`` need not increase: a stretch
    where it falls counts negatively (the loss as a progress measure, where it rose).

    >>> progress_mean([1.0, 3.0], increments=[3.0, 1.0])
    1.5
    >>> progress_mean([1.0, 3.0], at=[0.0, 2.0])  # B = 1 + s on [0, 2]
    2.0
    >>> progress_mean([2.0, 4.0], at=[1.0, 2.0], start=0.0)  # 2 held on [0, 1]
    2.5
    """
    v = np.asarray(values, dtype=float)
    if (increments is None) == (at is None):
        raise InputError("give one of increments= (per step) or at= (points)")
    if increments is not None:
        ds = np.asarray(increments, dtype=float)
        _same_shape(v, ds, "increments")
        total = float(np.sum(ds))
        return float(np.sum(v * ds) / total) if total != 0 else float("nan")
    x = np.asarray(at, dtype=float)
    _same_shape(v, x, "at")
    if rate is None:  # ds = dx: the total is the width itself
        area, total = trapezoid(v, x), float(x[-1] - x[0])
        if start is not None:
            area, total = float(x[0] - start) * v[0] + area, float(x[-1] - start)
    else:
        w = np.asarray(rate, dtype=float)
        _same_shape(v, w, "rate")
        area, total = trapezoid(v * w, x), trapezoid(w, x)
        if start is not None:
            lead = float(x[0] - start)
            area, total = lead * v[0] * w[0] + area, lead * w[0] + total
    return float(area / total) if total != 0 else float("nan")


def _same_shape(values: np.ndarray, other: np.ndarray, name: str) -> None:
    if values.ndim != 1 or values.size == 0 or other.shape != values.shape:
        raise InputError(f"values and {name} must be 1-D of the same length >= 1, got "
                         f"shapes {values.shape} and {other.shape}")


def log_steps(max_steps: int, n_points: int = 50) -> np.ndarray:
    """0 and about ``n_points`` log-spaced integer steps up to ``max_steps`` inclusive.

    >>> log_steps(100, 5).tolist()
    [0, 1, 3, 10, 32, 100]
    """
    max_steps = check_count(max_steps, "max_steps", 1)
    n_points = check_count(n_points, "n_points", 1)
    pts = np.unique(np.round(np.geomspace(1, int(max_steps), int(n_points))).astype(np.int64))
    return np.concatenate([[0], pts])


def exp_or_inf(x: float) -> float:
    """``math.exp(x)``, but ``inf`` where the result exceeds the float range (``math.exp``
    raises ``OverflowError`` there) and NaN for a NaN argument.

    Fits use it for quantities extrapolated far outside the data (an intercept, the end
    of an interval), whose true value may exceed the largest float; they flag it.

    >>> exp_or_inf(0.0), exp_or_inf(1e4)
    (1.0, inf)
    """
    x = float(x)
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf
