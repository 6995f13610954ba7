r"""The profile of the log-space hyperbola fit over $B_{crit}$ (§2.3).

For a fixed $c = \log B_{crit}$ the best $\log S_{min}$ is the mean
residual (clipped to the bounds when ``bounded``), so the residual sum of squares is a
function of $c$ alone, the *profile* $\mathrm{RSS}(c)$. The point fit
minimises it; bootstrap draws are fitted all at once on a grid of $c$
(`fit_many`); the interval of `fit_tradeoff` is a level set of it
(`profile_interval`, with its ends found by root-finding).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

__all__ = [
    "active_bound",
    "fit_many",
    "fit_point",
    "fit_status",
    "profile_at",
    "profile_grid",
    "profile_interval",
    "profile_rss",
    "rss_at",
]

_GRID_PAD_DECADES = 3.0  # B_crit searched within [min B / 10^3, max B · 10^3]
_GRID_PER_DECADE = 250  # log10 spacing 0.004 (0.9 %) before refinement


def profile_grid(log_b: np.ndarray, per_decade: int = _GRID_PER_DECADE) -> np.ndarray:
    lo = log_b.min() / math.log(10) - _GRID_PAD_DECADES
    hi = log_b.max() / math.log(10) + _GRID_PAD_DECADES
    n = math.ceil((hi - lo) * per_decade) + 1
    return np.linspace(lo, hi, n) * math.log(10)


def rss_at(Y: np.ndarray, log_b: np.ndarray, log_c: ArrayLike,
           bounded: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """RSS and bounded log S_min of each row of Y (D, n) at its own log B_crit.

    ``log_c`` has shape (D,) or (D, K) (K candidate values per row)."""
    lc = np.asarray(log_c, dtype=float)
    squeeze = lc.ndim == 1
    if squeeze:
        lc = lc[:, None]
    F = np.logaddexp(0.0, lc[:, :, None] - log_b[None, None, :])  # (D, K, n)
    R = Y[:, None, :] - F
    lsm = R.mean(2)
    if bounded:
        lsm = np.minimum(lsm, Y.min(1)[:, None])
        lsm = np.minimum(lsm, (Y + log_b).min(1)[:, None] - lc)
    rss = np.sum((R - lsm[:, :, None]) ** 2, axis=2)
    return (rss[:, 0], lsm[:, 0]) if squeeze else (rss, lsm)


def profile_rss(Y: np.ndarray, log_b: np.ndarray, log_c: np.ndarray,
                bounded: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """RSS and bounded log S_min for every (row of Y, grid point); Y is (D, n) log steps.

    One matrix product: RSS = Σy² − 2 y·f + Σf² − 2 lsm Σ(y − f) + n lsm²."""
    n = Y.shape[1]
    F = np.logaddexp(0.0, log_c[:, None] - log_b[None, :])  # log(1 + c/B), (G, n)
    sy = Y.sum(1)
    syy = np.einsum("ij,ij->i", Y, Y)
    yf = np.einsum("dn,gn->dg", Y, F)  # (D, G); einsum avoids BLAS threads on tiny products
    sf = F.sum(1)
    sff = np.einsum("ij,ij->i", F, F)
    lsm = (sy[:, None] - sf[None, :]) / n
    if bounded:
        bound_e = (Y + log_b).min(1)[:, None] - log_c[None, :]
        lsm = np.minimum(lsm, np.minimum(Y.min(1)[:, None], bound_e))
    rss = syy[:, None] - 2.0 * yf + sff[None, :] - 2.0 * lsm * (sy[:, None] - sf[None, :])
    rss += n * lsm * lsm
    return rss, lsm


_COARSE_PER_DECADE = 20
_FINE_POINTS = 17


def fit_many(Y: np.ndarray, log_b: np.ndarray, bounded: bool = True) -> np.ndarray:
    """Best log B_crit per row of Y: coarse grid (20/decade), a local fine grid of 17
    points over ±1 coarse step, then parabolic interpolation; no optimizer per row."""
    coarse = profile_grid(log_b, _COARSE_PER_DECADE)
    rss, _ = profile_rss(Y, log_b, coarse, bounded)
    k = np.argmin(rss, axis=1)
    hc = coarse[1] - coarse[0]
    offs = np.linspace(-hc, hc, _FINE_POINTS)
    local = np.clip(coarse[k][:, None] + offs[None, :], coarse[0], coarse[-1])
    rl, _ = rss_at(Y, log_b, local, bounded)
    j = np.argmin(rl, axis=1)
    h = offs[1] - offs[0]
    inner = (j > 0) & (j < _FINE_POINTS - 1)
    jj = np.clip(j, 1, _FINE_POINTS - 2)
    r = np.arange(len(j))
    y0, y1, y2 = rl[r, jj - 1], rl[r, jj], rl[r, jj + 1]
    denom = y0 - 2.0 * y1 + y2
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.where(denom > 0, 0.5 * (y0 - y2) / denom, 0.0)
    delta = np.clip(delta, -1.0, 1.0)
    best = np.where(inner, local[r, jj] + delta * h, local[r, j])
    out: np.ndarray = np.clip(best, coarse[0], coarse[-1])
    return out


def fit_point(y: np.ndarray, log_b: np.ndarray, grid: np.ndarray,
              bounded: bool = True) -> tuple[float, float, np.ndarray]:
    """(log B_crit, log S_min, profile RSS on grid) of the point fit."""
    Y = y[None, :]
    rss, _ = profile_rss(Y, log_b, grid, bounded)
    k = int(np.argmin(rss[0]))

    def at(lc: float) -> tuple[float, float]:  # (RSS, log S_min) at one log B_crit
        r, lsm = rss_at(Y, log_b, np.array([lc]), bounded)
        return float(r[0]), float(lsm[0])

    lc = float(grid[k])
    if 0 < k < len(grid) - 1:
        res = optimize.minimize_scalar(
            lambda c: at(c)[0], bounds=(grid[k - 1], grid[k + 1]), method="bounded",
            options={"xatol": 1e-10})
        if res.fun <= rss[0, k]:
            lc = float(res.x)
    return lc, at(lc)[1], rss[0]


def profile_at(y: np.ndarray, log_b: np.ndarray, log_c: float, bounded: bool) -> float:
    """The profile RSS of one data vector ``y`` at one ``log_c``."""
    return float(rss_at(y[None, :], log_b, np.array([log_c]), bounded)[0][0])


def profile_interval(y: np.ndarray, log_b: np.ndarray, grid: np.ndarray, prof: np.ndarray,
                     lc: float, rss_min: float, dof: int, crit: float,
                     bounded: bool) -> tuple[float, float]:
    r"""The set $\{c : [\mathrm{RSS}(c) - \mathrm{RSS}_{min}] / (\mathrm{RSS}_{min}/
    \mathrm{dof}) \le \text{crit}\}$ as $(B_{lo}, B_{hi})$.

    The outermost grid points inside the set bracket its ends, which are then found
    by Brent's method on the continuous profile (not interpolated on the grid), so the
    interval always contains the estimate $e^{lc}$ (where the statistic is 0). An
    end is 0 or ``inf`` where the set reaches the end of the searched range
    ($B_{crit}$ not bounded by the data on that side).
    """
    scale = max(rss_min / dof, 1e-300)

    def excess(c: float) -> float:
        return (profile_at(y, log_b, c, bounded) - rss_min) / scale - crit

    stat = (prof - rss_min) / scale
    inside = stat <= crit
    above = np.flatnonzero(inside & (grid > lc))
    below = np.flatnonzero(inside & (grid < lc))
    # upper end: from the last inside grid point (or the estimate) to the next one out
    step = float(grid[1] - grid[0])
    i1 = above[-1] if above.size else int(np.searchsorted(grid, lc)) - 1
    if i1 >= len(grid) - 1 or lc >= grid[-1] - 1e-9 * step:  # the set reaches the top
        hi = math.inf
    else:
        a = max(lc, float(grid[i1])) if i1 >= 0 else lc
        b = float(grid[i1 + 1])
        hi = math.exp(optimize.brentq(excess, a, b, xtol=1e-12)) if excess(b) > 0 > excess(a) \
            else math.exp(a)
    i0 = below[0] if below.size else int(np.searchsorted(grid, lc))
    if i0 <= 0 or lc <= grid[0] + 1e-9 * step:  # the set reaches the bottom
        lo = 0.0
    else:
        b = min(lc, float(grid[i0])) if i0 < len(grid) else lc
        a = float(grid[i0 - 1])
        lo = math.exp(optimize.brentq(excess, a, b, xtol=1e-12)) if excess(a) > 0 > excess(b) \
            else math.exp(b)
    est = math.exp(lc)
    return min(lo, est), max(hi, est)


def fit_status(b_ci: tuple[float, float]) -> str:
    """What an interval of B_crit determines: ``"identified"``, ``"lower_bound"`` (no
    upper end), ``"upper_bound"`` (no lower end), ``"unidentified"`` (neither) or
    ``"unknown"`` (no interval)."""
    lo, hi = b_ci
    if math.isnan(lo) or math.isnan(hi):
        return "unknown"
    if lo <= 0 and math.isinf(hi):
        return "unidentified"
    if math.isinf(hi):
        return "lower_bound"
    if lo <= 0:
        return "upper_bound"
    return "identified"


def active_bound(y: np.ndarray, log_b: np.ndarray, lc: float, lsm: float) -> str:
    """Which constraint of ``bounded`` is active at the optimum (or exceeded)."""
    unc = np.mean(y - np.logaddexp(0.0, lc - log_b))
    if lsm < unc - 1e-12:
        return "s_min <= min S" if abs(lsm - y.min()) < 1e-9 else "e_min <= min E"
    over = [name for name, ok in (("s_min > min S", lsm <= y.min() + 1e-12),
                                  ("e_min > min E", lsm + lc <= (y + log_b).min() + 1e-12))
            if not ok]
    return "unbounded: " + ", ".join(over) if over else "none"
