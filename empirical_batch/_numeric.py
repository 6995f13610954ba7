"""Small numerical helpers shared across the package (one place each)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ._validate import check_count

__all__ = ["exp_or_inf", "log_steps", "trapezoid"]


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
