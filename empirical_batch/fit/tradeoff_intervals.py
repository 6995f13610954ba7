r"""The point fit of the tradeoff, its bootstrap, and the interval and status of $B_{crit}$.

The stages of `fit_tradeoff` between reading its table (`SeedPoints`) and assembling
its result: `point_fit` (a `PointFit`), `fit_intervals` (`Intervals`, from the draws
of `_bootstrap`) and `b_crit_status`. How the intervals are formed: see
`empirical_batch.fit`; the profile over $B_{crit}$ is in `empirical_batch.fit.profile`.
`BCritProfile` keeps what the interval of $B_{crit}$ is recomputed from at another
level (`b_crit_interval_at`): the same stages, at that level."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..errors import UsageError
from ..result import Result
from .profile import (
    fit_many,
    fit_point,
    fit_status,
    profile_grid,
    profile_interval,
    profile_rss,
    rss_at,
)
from .steps import StepsTable, combine_seeds

__all__ = ["BCritProfile", "Intervals", "PointFit", "SeedPoints", "b_crit_interval_at",
           "b_crit_status", "fit_intervals", "point_fit"]


@dataclass(frozen=True, eq=False)
class SeedPoints:
    """The points `fit_tradeoff` fits, read from its table and checked, and the options
    that resample and combine them."""

    batch_sizes: np.ndarray  # sorted, one per fitted batch size
    groups: list[np.ndarray]  # per batch size, the steps of each seed (or row)
    combine: str
    bootstrap: str  # "seeds" or "residuals" ("auto" resolved)
    level: float
    n_boot: int
    unit: str
    unreached: tuple[float, ...]
    stepstable: StepsTable | None

    @property
    def target(self) -> float | None:
        return self.stepstable.target if self.stepstable is not None else None


@dataclass(frozen=True, eq=False)
class PointFit:
    r"""The least-squares point fit in log space: $y_i = \log S_i$ (seeds combined)
    against $\log S_{min} + \log(1 + B_{crit}/B_i)$ (eq. 2.11), with the profile RSS
    over the searched grid of $\log B_{crit}$ (`empirical_batch.fit.profile`)."""

    log_b: np.ndarray
    y: np.ndarray
    grid: np.ndarray  # the log B_crit searched
    prof: np.ndarray  # the profile RSS on grid
    lc: float  # log B_crit
    lsm: float  # log S_min
    fitted: np.ndarray
    resid: np.ndarray  # y - fitted
    rss_min: float

    @property
    def n(self) -> int:
        return len(self.y)


def point_fit(b: np.ndarray, groups: Sequence[np.ndarray], combine: str,
              bounded: bool) -> PointFit:
    """The second stage of `fit_tradeoff`: seeds combined per batch size by ``combine``,
    the hyperbola fitted to their logs (`fit_point`)."""
    log_b = np.log(b)
    y = np.log([float(combine_seeds(g, combine)) for g in groups])
    grid = profile_grid(log_b)
    lc, lsm, prof = fit_point(y, log_b, grid, bounded)
    return _point(log_b, y, grid, prof, lc, lsm)


def _point(log_b: np.ndarray, y: np.ndarray, grid: np.ndarray, prof: np.ndarray, lc: float,
           lsm: float) -> PointFit:
    fitted = lsm + np.logaddexp(0.0, lc - log_b)
    resid = y - fitted
    return PointFit(log_b=log_b, y=y, grid=grid, prof=prof, lc=lc, lsm=lsm, fitted=fitted,
                    resid=resid, rss_min=float(np.sum(resid**2)))


@dataclass(frozen=True, repr=False)
class BCritProfile(Result):
    r"""What a `TradeoffFit`'s interval of $B_{crit}$ is recomputed from at any level
    (``fit.interval("b_crit", level)``, `b_crit_interval_at`): the fitted points, the
    estimate and how the interval was formed.

    The profile statistic is $F(B) = [\mathrm{RSS}(B) - \mathrm{RSS}_{min}] /
    [\mathrm{RSS}_{min}/(n-2)]$, the residual sum of squares profiled over $B_{crit}$
    (its $\log S_{min}$ fitted at each $B$); the interval at level $\ell$ is the set
    $\{B : F(B) \le c_\ell\}$. By Wilks' theorem (Wilks 1938, Ann. Math. Statist.
    9:60) the likelihood-ratio statistic of one parameter is asymptotically
    $\chi^2_1$; with the variance estimated from the residuals of a least-squares fit
    its small-sample form is this $F$ against the F(1, n − 2) quantile, which tends to
    the $\chi^2_1$ one as $n$ grows (the profile-likelihood interval of nonlinear
    regression: Bates and Watts 1988, *Nonlinear Regression Analysis and Its
    Applications*). ``method`` (the fit's ``interval``) says how $c_\ell$ is chosen:
    ``"f"`` the F(1, n − 2) quantile at $\ell$ (from these fields alone);
    ``"profile"`` the $\ell$ quantile of $F$ at the estimate over the bootstrap draws
    (the fit's ``draws["stat"]``); ``"percentile"`` no profile set: the draws'
    percentiles of $B_{crit}$ (``draws["b_crit"]``).

    Attributes
    ----------
    method : str
        ``"profile"``, ``"f"`` or ``"percentile"``.
    log_batch_sizes, log_steps : tuple of float
        The fitted points: $\log B_i$ and $\log S_i$ (seeds combined), as fitted.
    log_b_crit : float
        The point estimate $\log \hat B_{crit}$ (at the searched range's edge for a
        bound).
    bounded : bool
        Whether the fit constrained $S_{min}$ and $E_{min}$ (``bounded=True``).
    """

    method: str
    log_batch_sizes: tuple[float, ...]
    log_steps: tuple[float, ...]
    log_b_crit: float
    bounded: bool


def profile_point(profile: BCritProfile) -> PointFit:
    """The `PointFit` whose profile `profile` keeps: the same grid, profile RSS and
    residuals as `point_fit` computed (the same operations on the same values)."""
    log_b = np.asarray(profile.log_batch_sizes, dtype=float)
    y = np.asarray(profile.log_steps, dtype=float)
    grid = profile_grid(log_b)
    lc, bounded = float(profile.log_b_crit), bool(profile.bounded)
    prof = profile_rss(y[None, :], log_b, grid, bounded)[0][0]
    lsm = float(rss_at(y[None, :], log_b, np.array([lc]), bounded)[1][0])
    return _point(log_b, y, grid, prof, lc, lsm)


def b_crit_interval_at(profile: BCritProfile, level: float,
                       draws: dict[str, np.ndarray], n_boot: int) -> tuple[float, float]:
    """The interval of $B_{crit}$ at ``level`` of the fit whose profile is ``profile``:
    what `fit_tradeoff` gives at that level with the same draws (`b_crit_set`, then
    `b_crit_status`). NaN with ``n_boot=0`` for a method that needs draws (as the fit
    itself); `UsageError` where the fit drew them but holds none (read back from JSON,
    which keeps no draws)."""
    method = profile.method
    if method not in ("profile", "f", "percentile"):
        raise UsageError(f"the profile's method must be 'profile', 'f' or 'percentile', "
                         f"got {method!r}")
    boot = None
    if method != "f" and n_boot > 0:
        key = "stat" if method == "profile" else "b_crit"
        if key not in draws:
            raise UsageError(f"no bootstrap draws of b_crit, which its {method!r} "
                             "interval is formed from (a fit read back from JSON keeps none)")
        boot = draws
    pt = profile_point(profile)
    b_ci = b_crit_set(pt, method, level, boot, profile.bounded)
    return b_crit_status(pt, b_ci, method, level, profile.bounded)[0]


@dataclass(frozen=True, eq=False)
class Intervals:
    """The intervals of `fit_tradeoff` before the status is read off: (low, high) of
    B_crit, S_min and E_min (NaN where not computed) and the bootstrap draws (``None``
    with ``n_boot=0``)."""

    b_crit: tuple[float, float]
    s_min: tuple[float, float]
    e_min: tuple[float, float]
    draws: dict[str, np.ndarray] | None


def fit_intervals(pts: SeedPoints, pt: PointFit, interval: str, bounded: bool,
                  rng: np.random.Generator) -> Intervals:
    """The third stage of `fit_tradeoff`: the bootstrap draws (`_bootstrap`), percentile
    intervals of S_min and E_min, and the interval of B_crit chosen by ``interval``
    (percentile, or a profile set: `_profile_set`)."""
    ci = pts.level
    s_ci = e_ci = (math.nan, math.nan)
    boot = None
    if pts.n_boot > 0:
        boot = _bootstrap(pts.groups, pts.combine, pts.bootstrap, pt.y, pt.fitted, pt.resid,
                          pt.log_b, pt.lc, pts.n_boot, rng, bounded)
        q = [(1 - ci) / 2, (1 + ci) / 2]
        s_ci = _pair(np.quantile(boot["s_min"], q))
        e_ci = _pair(np.quantile(boot["e_min"], q))
    b_ci = b_crit_set(pt, interval, ci, boot, bounded)
    return Intervals(b_crit=b_ci, s_min=s_ci, e_min=e_ci, draws=boot)


def b_crit_set(pt: PointFit, interval: str, ci: float, boot: dict[str, np.ndarray] | None,
               bounded: bool) -> tuple[float, float]:
    """The interval of B_crit at level ``ci`` before `b_crit_status`: the draws'
    percentiles widened to hold the estimate (``"percentile"``) or a profile set
    (`_profile_set`: ``"f"`` needs no draws, ``"profile"`` calibrates on them); NaN
    where the method needs draws and there are none."""
    if interval == "percentile" and boot is not None:
        lo, hi = np.quantile(boot["b_crit"], [(1 - ci) / 2, (1 + ci) / 2])
        return (min(float(lo), math.exp(pt.lc)), max(float(hi), math.exp(pt.lc)))
    if interval == "f" or (interval == "profile" and boot is not None):
        return _profile_set(pt, interval, ci, boot, bounded)
    return (math.nan, math.nan)


def _profile_set(pt: PointFit, interval: str, ci: float,
                 boot: dict[str, np.ndarray] | None, bounded: bool) -> tuple[float, float]:
    r"""The profile set $\{B : F(B) \le c\}$,
    $F(B) = [\mathrm{RSS}(B) - \mathrm{RSS}_{min}]/[\mathrm{RSS}_{min}/(n-2)]$, with $c$
    the F(1, n − 2) quantile (``"f"``) or the ``ci`` quantile of the draws' statistic
    (``"profile"``); the single point $\hat B_{crit}$ for exact data."""
    if pt.rss_min <= 1e-24 * pt.n:
        return (math.exp(pt.lc), math.exp(pt.lc))  # exact data: no scatter to calibrate on
    if interval == "f":
        crit = float(stats.f.ppf(ci, 1, pt.n - 2))
    else:
        assert boot is not None
        stat = boot["stat"]  # inf where a draw fits exactly: no interpolation there
        crit = float(np.quantile(stat, ci, method="linear" if np.isfinite(stat).all()
                                 else "higher"))
    return profile_interval(pt.y, pt.log_b, pt.grid, pt.prof, pt.lc, pt.rss_min, pt.n - 2,
                            crit, bounded)


def b_crit_status(pt: PointFit, b_ci: tuple[float, float], interval: str, ci: float,
                  bounded: bool) -> tuple[tuple[float, float], str]:
    """The fourth stage of `fit_tradeoff`: what the interval of B_crit determines
    (`fit_status`), with the interval as reported. An estimate at an end of the searched
    range is only a bound, whatever the draws say; the finite end of a one-sided
    ``"profile"`` set is the ``"f"`` set's, which depends on the data only (the
    bootstrap-calibrated end moves with the random stream); not with ``bounded``, where
    the F calibration under-covers (``benchmarks/coverage_fit.py``)."""
    grid, lc = pt.grid, pt.lc
    edge = 1e-9 * float(grid[1] - grid[0])
    if lc >= grid[-1] - edge and not math.isnan(b_ci[0]):
        b_ci = (b_ci[0], math.inf)
    if lc <= grid[0] + edge and not math.isnan(b_ci[1]):
        b_ci = (0.0, b_ci[1])
    status = fit_status(b_ci)
    if interval == "profile" and status in ("lower_bound", "upper_bound") \
            and pt.rss_min > 1e-24 * pt.n and not bounded:
        f_ci = profile_interval(pt.y, pt.log_b, grid, pt.prof, lc, pt.rss_min, pt.n - 2,
                                float(stats.f.ppf(ci, 1, pt.n - 2)), bounded)
        b_ci = (f_ci[0], math.inf) if status == "lower_bound" else (0.0, f_ci[1])
        status = fit_status(b_ci)
    return b_ci, status


def _pair(v: Sequence[float] | np.ndarray) -> tuple[float, float]:
    return float(v[0]), float(v[1])


BOOT_CHUNK = 20_000
"""Bootstrap draws fitted at once: memory stays bounded whatever ``n_boot`` is."""


def _bootstrap(groups: Sequence[np.ndarray], combine: str, bootstrap: str, y: np.ndarray,
               fitted: np.ndarray, resid: np.ndarray, log_b: np.ndarray, lc: float,
               n_boot: int, rng: np.random.Generator,
               bounded: bool) -> dict[str, np.ndarray]:
    """Draws of (B_crit, S_min, E_min) and of the profile statistic at the estimate.

    ``"seeds"``: seeds resampled within each batch size and recentred on the fitted
    curve (x -> x * S_hat(B) / combine(x)), so that the bootstrap world's truth is the
    fit. ``"residuals"``: the point fit's centred log-residuals resampled, scaled by
    sqrt(n / (n - 2)). Processed in chunks of `BOOT_CHUNK` draws."""
    n = len(y)
    out: dict[str, list[np.ndarray]] = {"b_crit": [], "s_min": [], "e_min": [], "stat": []}
    for start in range(0, n_boot, BOOT_CHUNK):
        d = min(BOOT_CHUNK, n_boot - start)
        if bootstrap == "seeds":
            Y = np.empty((d, n))
            for j, g in enumerate(groups):
                idx = rng.integers(0, len(g), size=(d, len(g)))
                Y[:, j] = np.log(combine_seeds(g[idx], combine, axis=1)) - resid[j]
        else:
            centred = resid - resid.mean()
            scale = math.sqrt(n / (n - 2)) if n > 2 else 1.0
            Y = fitted[None, :] + scale * centred[rng.integers(0, n, size=(d, n))]
        lcs = fit_many(Y, log_b, bounded)
        rss_d, lsms = rss_at(Y, log_b, lcs, bounded)
        rss_true, _ = rss_at(Y, log_b, np.full(d, lc), bounded)
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = (rss_true - rss_d) / (rss_d / (n - 2))
        out["stat"].append(np.where(np.isfinite(stat), np.maximum(stat, 0.0), np.inf))
        out["b_crit"].append(np.exp(lcs))
        out["s_min"].append(np.exp(lsms))
        out["e_min"].append(np.exp(lsms + lcs))
    return {k: np.concatenate(v) for k, v in out.items()}
