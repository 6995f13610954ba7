r"""Power laws such as $B_{crit}(L) = B_*/L^{1/\alpha}$ (Kaplan et al. 2020)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from .._numeric import exp_or_inf
from .._validate import as_array, check_level, check_positive, scalar_or_array
from ..errors import InputError
from ..params import removed_keywords
from ..result import Interval, Result


@dataclass(frozen=True, repr=False)
class PowerLaw(Result):
    r"""$y = a\,x^{k}$ fitted by least squares in log-log space.

    For Kaplan et al.'s $B_{crit}(L) = B_*/L^{1/\alpha_B}$: ``coefficient``
    is $B_*$ and ``exponent`` is $-1/\alpha_B$
    (see `alpha_from_exponent`). ``coefficient_interval`` and ``exponent_interval``
    are `Interval`\ s at confidence ``level``.
    """

    coefficient: float
    exponent: float
    coefficient_interval: Interval
    exponent_interval: Interval
    log_rmse: float
    n: int
    #: empty, or what was numerically degenerate: the coefficient (the law at x = 1) or an
    #: end of its interval beyond the float range is ``inf``, said here; the exponent is exact
    note: str = ""

    @property
    def level(self) -> float:
        """Confidence level of the intervals."""
        return self.exponent_interval.level

    @property
    def alpha_from_exponent(self) -> float:
        r"""$\alpha = -1/k$ (Kaplan's $\alpha_B$ when y = B_crit, x = L)."""
        return -1.0 / self.exponent

    def __call__(self, x: ArrayLike) -> Any:
        x = check_positive(x, "x")
        return scalar_or_array(self.coefficient * x**self.exponent)



@removed_keywords(ci="level")
def fit_power_law(x: ArrayLike, y: ArrayLike, *, level: float | None = None) -> PowerLaw:
    r"""Fit $y = a x^k$ by ordinary least squares of $\log y$ on $\log x$.

    Intervals are Student-t intervals of the regression (n − 2 degrees of freedom);
    the coefficient's interval is that of $\log a$, exponentiated. They assume
    independent errors: B_crit values fitted at several targets of *one* sweep share
    its runs, their errors are correlated and the interval is then too narrow (bootstrap
    the whole sweep instead, e.g. refit on resampled runs).

    Examples
    --------
    >>> law = fit_power_law([1, 2, 4, 8], [3.0, 6.0, 12.0, 24.0])
    >>> round(law.coefficient, 6), round(law.exponent, 6)
    (3.0, 1.0)
    """
    x = check_positive(as_array(x, "x", ndim=1), "x")
    y = check_positive(as_array(y, "y", ndim=1), "y")
    if x.shape != y.shape:
        raise InputError(f"x and y must have the same length, got {len(x)} and {len(y)}")
    if len(x) < 3:
        raise InputError(f"a power law with an interval needs at least 3 points, got {len(x)}")
    if np.ptp(x) == 0:
        raise InputError("x must take at least two distinct values")
    ci = check_level(level)
    lx, ly = np.log(x), np.log(y)
    n = len(x)
    xm, ym = lx.mean(), ly.mean()
    sxx = np.sum((lx - xm) ** 2)
    k = float(np.sum((lx - xm) * (ly - ym)) / sxx)
    la = ym - k * xm
    resid = ly - la - k * lx
    s2 = float(np.sum(resid**2) / (n - 2))
    t = stats.t.ppf((1 + ci) / 2, n - 2)
    se_k = math.sqrt(s2 / sxx)
    se_a = math.sqrt(s2 * (1 / n + xm**2 / sxx))
    coef, coef_ci = exp_or_inf(la), (exp_or_inf(la - t * se_a), exp_or_inf(la + t * se_a))
    note = ""
    if not (np.isfinite(coef) and np.isfinite(coef_ci[1])):
        note = (f"the coefficient (the law at x = 1) or its interval exceeds the float range "
                f"(log a = {la:.4g} ± {t * se_a:.4g}); set to inf")
    return PowerLaw(
        coefficient=coef,
        exponent=k,
        coefficient_interval=Interval(*coef_ci, ci),
        note=note,
        exponent_interval=Interval(k - t * se_k, k + t * se_k, ci),
        log_rmse=float(np.sqrt(np.mean(resid**2))),
        n=n,
    )
