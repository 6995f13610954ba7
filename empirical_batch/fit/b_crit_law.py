r"""Kaplan et al.'s law of the critical batch against the loss, with an interval on $\alpha_B$.

Kaplan, McCandlish, Henighan, Brown, Chess, Child, Gray, Radford, Wu and Amodei, *Scaling
Laws for Neural Language Models* (arXiv 2001.08361, 2020), §5.1, fit the critical batch
of McCandlish et al. (2018) measured at several target losses $L$ by

$$B_{crit}(L) = \frac{B_*}{L^{1/\alpha_B}}, \qquad B_* \approx 2\times10^8
\text{ tokens}, \quad \alpha_B \approx 0.21$$

(loss in nats per token; B_crit roughly doubles for every 13 % fall in the loss).
`fit_b_crit_law` fits the same law to B_crit values with intervals (e.g. a
`CriticalBatchCurve`) and gives $\alpha_B$ an interval.

How the interval is computed
----------------------------
In log space the law is a line, $y_i = \log B_{crit,i} = \log B_* + k \log L_i$ with
$k = -1/\alpha_B$. Each $y_i$ has a measurement error: its standard error $s_i$ is read
off its interval, $s_i = (\log hi_i - \log lo_i) / (2 z)$ with $z$ the normal quantile
of the interval's level. The points may also scatter about the line more than their
errors allow (the law is only approximate), so the fit is a random-effects weighted
regression (a meta-regression): $\operatorname{Var} y_i = s_i^2 + \tau^2$, weights
$w_i = 1/(s_i^2 + \tau^2)$, and $\tau^2$ is chosen so that the weighted residual sum
of squares equals its expectation $n - 2$ (the Paule–Mandel estimator; $\tau^2 = 0$ when
the points already scatter less than their errors). The interval of $k$ is the
Student-t interval $k \pm t_{n-2}\,\mathrm{se}(k)$ of the weighted fit. Without input
intervals ($s_i = 0$) $\tau^2$ is the residual variance and everything reduces to the
ordinary least squares of `fit_power_law` (a test holds them equal). The interval is
conservative when the points scatter less than their intervals allow ($\tau^2 = 0$:
t quantiles with n − 2 degrees of freedom although the variances are then taken as
known; in the tests' synthetic settings a 95 % interval covers 96–99 % of the time and
is about 1.3 times as wide as one that knew the true variances).

$\alpha_B = -1/k$ maps the interval of $k$ to that of $\alpha_B$ when it lies below 0
(status ``"identified"``). When the interval of $k$ reaches 0 (B_crit is not shown to
grow as the loss falls) only $\alpha_B \ge -1/k_{lo}$ is supported (``"lower_bound"``,
upper end ``inf``); when the estimate itself is $k \ge 0$ the law does not describe the
data (``"unidentified"``, interval $(-\infty, \infty)$).

Caveat: B_crit values at several targets of *one* sweep share its runs, so their errors
are correlated. An error common to all points moves $\log B_*$, not the slope; errors
that drift smoothly with the target do move the slope, and the interval does not
account for that. Seeds resampled jointly across targets would (not done here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, stats

from .._numeric import exp_or_inf
from .._validate import as_array, as_float, check_level, check_positive
from ..errors import InputError
from ..result import Interval, Result

if TYPE_CHECKING:
    from .curve import CriticalBatchCurve

__all__ = ["KAPLAN_2020", "BCritLaw", "fit_b_crit_law"]

#: Kaplan et al. 2020 (arXiv 2001.08361), §5.1: B_crit(L) = B_star / L^(1/alpha_B), L in
#: nats/token, B_star in tokens; the same values as
#: ``empirical_batch.datasets.kaplan2020()`` (a test holds them equal).
KAPLAN_2020 = {"alpha_b": 0.21, "b_star": 2e8}


@dataclass(frozen=True, repr=False)
class BCritLaw(Result):
    r"""A fitted $B_{crit}(L) = B_*/L^{1/\alpha_B}$ (see `fit_b_crit_law`).

    Attributes
    ----------
    alpha_b, alpha_b_interval : float, Interval
        $\alpha_B = -1/k$ and its interval (see ``status``).
    b_star, b_star_interval : float, Interval
        $B_*$ (B_crit extrapolated to L = 1, in the units of the input) and its interval.
    exponent, exponent_interval : float, Interval
        The slope $k$ of $\log B_{crit}$ on $\log L$ and its interval.
    level : float
        Confidence level of the intervals.
    tau : float
        Scatter of $\log B_{crit}$ about the line beyond the input intervals ($\tau$).
    n : int
        Points fitted.
    losses, b_crit : tuple of float
        The fitted points.
    span : float
        Largest over smallest fitted B_crit.
    ends_separated : bool
        The intervals of the B_crit at the lowest and the highest loss do not overlap
        (``False`` without input intervals).
    status : str
        ``"identified"``, ``"lower_bound"`` or ``"unidentified"`` (module docstring).
    log_b_star : float
        $\log B_*$, finite even where $B_*$ itself is not representable.
    note : str
        Empty, or what was numerically degenerate: with losses close together the
        extrapolation to L = 1 can exceed the float range; $B_*$ or an end of its
        interval is then ``inf`` (said here), while the slope and $\alpha_B$ are exact.
    """

    alpha_b: float
    alpha_b_interval: Interval
    b_star: float
    b_star_interval: Interval
    exponent: float
    exponent_interval: Interval
    tau: float
    n: int
    losses: tuple[float, ...]
    b_crit: tuple[float, ...]
    span: float
    ends_separated: bool
    status: str
    log_b_star: float = math.nan
    note: str = ""

    def __call__(self, loss: ArrayLike) -> float | np.ndarray:
        """$B_*/L^{1/\\alpha_B}$ at ``loss``."""
        loss = check_positive(np.asarray(loss, dtype=float), "loss")
        log_b_star = self.log_b_star if np.isfinite(self.log_b_star) else math.log(self.b_star)
        with np.errstate(over="ignore"):
            out = np.exp(log_b_star + self.exponent * np.log(loss))
        arr: np.ndarray = out
        return float(arr) if np.ndim(arr) == 0 else arr

    @property
    def level(self) -> float:
        """Confidence level of the intervals."""
        return self.alpha_b_interval.level

    def covers(self, alpha_b: float) -> bool:
        """Whether ``alpha_b`` (e.g. Kaplan's 0.21) lies in the interval of $\\alpha_B$."""
        lo, hi = self.alpha_b_interval
        return bool(lo <= as_float(alpha_b, "alpha_b") <= hi)

    def __repr__(self) -> str:
        lo, hi = self.alpha_b_interval
        return (f"BCritLaw(alpha_b={self.alpha_b:.3g} [{lo:.3g}, {hi:.3g}] at "
                f"{self.level:g}, b_star={self.b_star:.3g}, n={self.n}, "
                f"span={self.span:.3g}x, status={self.status!r}"
                + (", note: B_* overflow" if self.note else "") + ")")


def _wls(x: np.ndarray, y: np.ndarray,
         var: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Weighted least squares of y on (1, x): coefficients, covariance, weighted RSS."""
    w = 1.0 / var
    X = np.column_stack([np.ones_like(x), x])
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    beta = cov @ (X.T @ (w * y))
    resid = y - X @ beta
    return beta, cov, float(np.sum(w * resid**2))


def fit_b_crit_law(loss: Any, b_crit: ArrayLike | None = None, *, lo: ArrayLike | None = None,
                   hi: ArrayLike | None = None, input_level: float = 0.95,
                   level: float | None = None,
                   statuses: Sequence[str] = ("identified",)) -> BCritLaw:
    r"""Fit $B_{crit}(L) = B_*/L^{1/\alpha_B}$ (Kaplan et al. 2020, §5.1) with intervals.

    Parameters
    ----------
    loss : array_like or CriticalBatchCurve
        Target losses $L$ (> 0), or a `CriticalBatchCurve` whose targets are losses
        (its rows with a status in ``statuses`` are used, with their B_crit intervals
        and level; the other arguments but ``level`` must then be left out).
    b_crit : array_like
        B_crit at each loss (> 0).
    lo, hi : array_like, optional
        The interval of each B_crit at level ``input_level`` (both or neither). They
        weight the points (module docstring); without them the fit is ordinary least
        squares in log-log space.
    level : float, optional
        Level of the output intervals (default 0.95).

    Returns
    -------
    BCritLaw

    Examples
    --------
    >>> law = fit_b_crit_law([2.0, 2.5, 3.0, 4.0], [400.0, 137.0, 57.0, 14.0])
    >>> round(law.alpha_b, 2), law.status
    (0.21, 'identified')
    """
    from .curve import CriticalBatchCurve

    if isinstance(loss, CriticalBatchCurve):
        if b_crit is not None or lo is not None or hi is not None:
            raise InputError("with a CriticalBatchCurve give no b_crit, lo or hi: they come "
                             "from the curve")
        loss, b_crit, lo, hi, input_level = _curve_points(loss, statuses, input_level)
    lvl = check_level(level)
    in_lvl = check_level(input_level)
    L, B, lo_a, hi_a = _check_points(loss, b_crit, lo, hi)
    x, y = np.log(L), np.log(B)
    beta, cov, tau2 = _random_effects(x, y, _input_variances(lo_a, hi_a, in_lvl, len(L)))
    return _law(L, B, lo_a, hi_a, beta, cov, tau2, lvl)


def _curve_points(curve: CriticalBatchCurve, statuses: Sequence[str], input_level: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Losses, B_crit, the ends of their intervals and the intervals' level, read from the
    rows of ``curve`` whose status is in ``statuses``."""
    if curve.higher_is_better:
        raise InputError("the curve's metric is higher-is-better; B_crit(L) needs "
                         "targets that are losses")
    bounds = sorted(set(statuses) - {"identified", "unknown"})
    if bounds:
        raise InputError(f"rows with status {bounds} bound B_crit on one side and have no "
                         "value of it (b_crit is NaN there): fit identified rows only")
    frame = curve.frame[curve.frame["status"].isin(statuses)]
    levels = {f.level for f in curve.fits if f is not None}
    input_level = levels.pop() if len(levels) == 1 else input_level
    loss, b_crit = frame["target"].to_numpy(float), frame["b_crit"].to_numpy(float)
    lo, hi = frame["b_crit_low"].to_numpy(float), frame["b_crit_high"].to_numpy(float)
    if len(loss) < 3:
        raise InputError(f"B_crit(L) needs at least 3 targets with status in {statuses}, "
                         f"the curve has {len(loss)}")
    return loss, b_crit, lo, hi, input_level


def _check_points(loss: Any, b_crit: ArrayLike | None, lo: ArrayLike | None,
                  hi: ArrayLike | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The losses, B_crit and (when given) the ends of their intervals, checked."""
    L = check_positive(as_array(loss, "loss", ndim=1), "loss")
    B = check_positive(as_array(b_crit, "b_crit", ndim=1), "b_crit")
    if L.shape != B.shape:
        raise InputError(f"loss and b_crit must have the same length, got {len(L)} and "
                         f"{len(B)}")
    n = len(L)
    if n < 3:
        raise InputError(f"B_crit(L) with an interval needs at least 3 points, got {n}")
    if np.ptp(L) == 0:
        raise InputError("loss must take at least two distinct values")
    if (lo is None) != (hi is None):
        raise InputError("give both lo and hi (the interval of each B_crit) or neither")
    lo_a: np.ndarray | None = None
    hi_a: np.ndarray | None = None
    if lo is not None:
        lo_a = check_positive(as_array(lo, "lo", ndim=1), "lo")
        hi_a = as_array(hi, "hi", ndim=1)
        if lo_a.shape != L.shape or hi_a.shape != L.shape:
            raise InputError("lo and hi must have one value per loss")
        if not (np.all(lo_a <= B) and np.all(B <= hi_a) and np.all(np.isfinite(hi_a))):
            raise InputError("each interval must be finite and contain its B_crit "
                             "(lo <= b_crit <= hi); fit only identified B_crit")
    return L, B, lo_a, hi_a


def _input_variances(lo: np.ndarray | None, hi: np.ndarray | None, level: float,
                     n: int) -> np.ndarray | None:
    r"""$s_i^2$, the variance of each $\log B_{crit,i}$ read off its interval,
    $s_i = (\log hi_i - \log lo_i) / (2 z)$ with $z$ the normal quantile of ``level``
    (floored at $10^{-12}$: a zero-width interval is a nearly exact point); ``None``
    without intervals."""
    if lo is None or hi is None:
        return None
    z = stats.norm.ppf((1 + level) / 2)
    s2: np.ndarray = np.maximum(((np.log(hi) - np.log(lo)) / (2 * z)) ** 2, 1e-12)
    return s2


def _random_effects(x: np.ndarray, y: np.ndarray,
                    s2: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, float]:
    r"""The weighted fit of $y$ on $(1, x)$ with $\operatorname{Var} y_i = s_i^2 + \tau^2$:
    coefficients, their covariance and $\tau^2$, chosen by Paule–Mandel (the weighted
    RSS equals $n - 2$; 0 when the points scatter less than their errors). Without
    input variances (``s2`` None) ordinary least squares, $\tau^2$ the residual
    variance (`fit_power_law`)."""
    n = len(x)
    dof = n - 2
    if s2 is None:
        # ordinary least squares: Var y_i = tau^2, the residual variance (fit_power_law)
        beta, cov, rss = _wls(x, y, np.ones(n))
        tau2 = rss / dof
        return beta, cov * tau2, tau2

    def excess(tau2: float) -> float:
        return _wls(x, y, s2 + tau2)[2] - dof

    tau2 = 0.0
    if excess(0.0) > 0:  # more scatter than the intervals allow: Paule-Mandel
        top = float(np.var(y)) + float(s2.max())
        while excess(top) > 0:
            top *= 4
        tau2 = float(optimize.brentq(excess, 0.0, top, xtol=1e-14, rtol=1e-12))
    beta, cov, _ = _wls(x, y, s2 + tau2)
    return beta, cov, tau2


def _law(L: np.ndarray, B: np.ndarray, lo_a: np.ndarray | None, hi_a: np.ndarray | None,
         beta: np.ndarray, cov: np.ndarray, tau2: float, lvl: float) -> BCritLaw:
    r"""The fitted line as a `BCritLaw`: the Student-t interval of the slope $k$, mapped
    to $\alpha_B = -1/k$ as the status allows (module docstring), and $B_*$."""
    n = len(L)
    x = np.log(L)
    t = stats.t.ppf((1 + lvl) / 2, n - 2)
    la, k = float(beta[0]), float(beta[1])
    se_a, se_k = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
    k_ci = (k - t * se_k, k + t * se_k)
    if k_ci[1] < 0:
        status, alpha_ci = "identified", (-1.0 / k_ci[0], -1.0 / k_ci[1])
    elif k < 0:
        status, alpha_ci = "lower_bound", (-1.0 / k_ci[0], math.inf)
    else:
        status, alpha_ci = "unidentified", (-math.inf, math.inf)
    b_star_ci = (exp_or_inf(la - t * se_a), exp_or_inf(la + t * se_a))
    b_star = exp_or_inf(la)
    note = ""
    if not (np.isfinite(b_star) and np.isfinite(b_star_ci[1])):
        note = (f"B_* (the law extrapolated to L = 1) or its interval exceeds the float range "
                f"(log B_* = {la:.4g} ± {t * se_a:.4g}): the losses span only "
                f"{float(np.ptp(x)):.3g} in log L; set to inf, the slope and α_B are exact")
    i_lo, i_hi = int(np.argmin(L)), int(np.argmax(L))
    separated = bool(lo_a is not None and hi_a is not None
                     and (lo_a[i_lo] > hi_a[i_hi] or hi_a[i_lo] < lo_a[i_hi]))
    return BCritLaw(
        alpha_b=-1.0 / k if k != 0 else math.inf, alpha_b_interval=Interval(*alpha_ci, lvl),
        b_star=b_star, b_star_interval=Interval(*b_star_ci, lvl),
        exponent=k, exponent_interval=Interval(*k_ci, lvl), tau=math.sqrt(tau2),
        n=n, losses=tuple(float(v) for v in L), b_crit=tuple(float(v) for v in B),
        span=float(B.max() / B.min()), ends_separated=separated, status=status,
        log_b_star=la, note=note,
    )
