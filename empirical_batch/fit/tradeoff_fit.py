r"""Fitting the steps/examples hyperbola with bootstrap intervals (§2.3, §3).

How the fit works: see :mod:`empirical_batch.fit`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

from .._validate import as_array, as_float, check_positive
from ..tradeoff import Tradeoff
from .steps import _as_sweep, _check_combine, _combine, _prepare, _steps_table

_GRID_PAD_DECADES = 3.0  # B_crit searched within [min B / 10^3, max B · 10^3]
_GRID_PER_DECADE = 250  # log10 spacing 0.004 (0.9 %) before refinement


def _profile_grid(log_b: np.ndarray, per_decade: int = _GRID_PER_DECADE) -> np.ndarray:
    lo = log_b.min() / math.log(10) - _GRID_PAD_DECADES
    hi = log_b.max() / math.log(10) + _GRID_PAD_DECADES
    n = math.ceil((hi - lo) * per_decade) + 1
    return np.linspace(lo, hi, n) * math.log(10)


def _rss_at(Y: np.ndarray, log_b: np.ndarray, log_c: np.ndarray, bounded: bool = True):
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


def _profile_rss(Y: np.ndarray, log_b: np.ndarray, log_c: np.ndarray, bounded: bool = True):
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


def _fit_many(Y: np.ndarray, log_b: np.ndarray, bounded: bool = True) -> np.ndarray:
    """Best log B_crit per row of Y: coarse grid (20/decade), a local fine grid of 17
    points over ±1 coarse step, then parabolic interpolation; no optimizer per row."""
    coarse = _profile_grid(log_b, _COARSE_PER_DECADE)
    rss, _ = _profile_rss(Y, log_b, coarse, bounded)
    k = np.argmin(rss, axis=1)
    hc = coarse[1] - coarse[0]
    offs = np.linspace(-hc, hc, _FINE_POINTS)
    local = np.clip(coarse[k][:, None] + offs[None, :], coarse[0], coarse[-1])
    rl, _ = _rss_at(Y, log_b, local, bounded)
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
    return np.clip(best, coarse[0], coarse[-1])


def _fit_point(y: np.ndarray, log_b: np.ndarray, grid: np.ndarray, bounded: bool = True):
    """(log B_crit, log S_min, profile RSS on grid) of the point fit."""
    Y = y[None, :]
    rss, _ = _profile_rss(Y, log_b, grid, bounded)
    k = int(np.argmin(rss[0]))

    def at(lc):  # (RSS, log S_min) at one log B_crit
        r, lsm = _rss_at(Y, log_b, np.array([lc]), bounded)
        return float(r[0]), float(lsm[0])

    lc = float(grid[k])
    if 0 < k < len(grid) - 1:
        res = optimize.minimize_scalar(
            lambda c: at(c)[0], bounds=(grid[k - 1], grid[k + 1]), method="bounded",
            options={"xatol": 1e-10})
        if res.fun <= rss[0, k]:
            lc = float(res.x)
    return lc, at(lc)[1], rss[0]


def _profile_interval(grid, prof, rss_min, dof, crit):
    """{c : (RSS(c) − RSS_min) / (RSS_min/dof) ≤ crit} on the grid, as (lo, hi) in B_crit;
    0 or inf where the set reaches the end of the searched range (not identified)."""
    scale = max(rss_min / dof, 1e-300)
    stat = (prof - rss_min) / scale
    inside = np.flatnonzero(stat <= crit)
    if inside.size == 0:  # grid too coarse around a very sharp minimum
        k = int(np.argmin(prof))
        return math.exp(grid[k]), math.exp(grid[k])
    i0, i1 = inside[0], inside[-1]

    def cross(i_in, i_out):
        s_in, s_out = stat[i_in], stat[i_out]
        w = (crit - s_in) / (s_out - s_in) if s_out != s_in else 0.0
        return math.exp(grid[i_in] + w * (grid[i_out] - grid[i_in]))

    lo = 0.0 if i0 == 0 else cross(i0, i0 - 1)
    hi = math.inf if i1 == len(grid) - 1 else cross(i1, i1 + 1)
    return lo, hi


@dataclass(frozen=True)
class TradeoffFit:
    r"""A fitted tradeoff :math:`S(B) = S_{min}(1 + B_{crit}/B)` with bootstrap intervals.

    Attributes
    ----------
    s_min, e_min, b_crit : float
        Point estimates; ``b_crit = e_min / s_min``.
    b_crit_ci : tuple of float
        Interval at level ``ci_level`` (see ``interval`` in :func:`fit_tradeoff`).
    s_min_ci, e_min_ci : tuple of float
        Percentile bootstrap intervals at level ``ci_level``.
    bootstrap : str
        ``"seeds"`` (seeds resampled within each batch size) or ``"residuals"``
        (log-residuals resampled, used when a batch size has a single value).
    batch_sizes, steps, log_residuals : tuple of float
        The fitted points (seeds combined) and :math:`\log S_i - \log \hat S(B_i)`.
    n_below, n_above : int
        Batch sizes below / above :math:`B_{crit}`.
    extrapolation : bool
        ``True`` when :math:`B_{crit}` lies outside the measured batch-size range
        (it is then an extrapolation of the fitted curve, not a measurement).
    bound : str
        With ``bounded=True``, the constraint active at the optimum (``"none"``,
        ``"s_min <= min S"`` or ``"e_min <= min E"``); unbounded fits that exceed a
        bound say so (``"unbounded: s_min > min S"``).
    unreached_batch_sizes : tuple of float
        Batch sizes in the input table that did not reach the target (not fitted).
    """

    s_min: float
    e_min: float
    b_crit: float
    b_crit_ci: tuple[float, float]
    s_min_ci: tuple[float, float]
    e_min_ci: tuple[float, float]
    ci_level: float
    bootstrap: str
    n_boot: int
    batch_sizes: tuple[float, ...]
    steps: tuple[float, ...]
    log_residuals: tuple[float, ...]
    log_rmse: float
    n_batch_sizes: int
    n_below: int
    n_above: int
    extrapolation: bool
    bound: str
    unreached_batch_sizes: tuple[float, ...] = ()
    target: float | None = None

    @property
    def tradeoff(self) -> Tradeoff:
        """The fitted curve as a :class:`~empirical_batch.tradeoff.Tradeoff`."""
        return Tradeoff(self.s_min, self.e_min)

    @property
    def b_crit_lo(self) -> float:
        return self.b_crit_ci[0]

    @property
    def b_crit_hi(self) -> float:
        return self.b_crit_ci[1]

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        """Per batch size: measured steps/examples, fitted values, log-residual."""
        b = np.asarray(self.batch_sizes)
        s = np.asarray(self.steps)
        return pd.DataFrame({
            "batch_size": b, "steps": s, "examples": s * b,
            "steps_fit": self.tradeoff.steps(b), "examples_fit": self.tradeoff.examples(b),
            "log_residual": np.asarray(self.log_residuals),
        })

    def __str__(self) -> str:
        lo, hi = self.b_crit_ci
        flag = " (extrapolated)" if self.extrapolation else ""
        return (
            f"B_crit = {self.b_crit:.4g} [{lo:.4g}, {hi:.4g}] ({self.ci_level:.0%} {self.bootstrap}"
            f" bootstrap){flag}; S_min = {self.s_min:.4g}, E_min = {self.e_min:.4g}; "
            f"{self.n_batch_sizes} batch sizes ({self.n_below} below, {self.n_above} above "
            f"B_crit), log-RMSE {self.log_rmse:.3g}"
        )


def _seed_groups(table: pd.DataFrame) -> tuple[np.ndarray, list[np.ndarray]]:
    """Batch sizes and per-batch-size arrays of steps (one value per seed/row)."""
    if "steps" in table.columns:
        steps = pd.to_numeric(table["steps"], errors="coerce").to_numpy(dtype=float)
    else:
        ex = pd.to_numeric(table["examples"], errors="coerce").to_numpy(dtype=float)
        steps = ex / table["batch_size"].to_numpy(dtype=float)
    b = table["batch_size"].to_numpy(dtype=float)
    use_seeds = "seed_steps" in table.columns
    groups: dict[float, list[float]] = {}
    for i in range(len(table)):
        if use_seeds:
            seeds = table["seed_steps"].iloc[i]
            vals = list(seeds) if isinstance(seeds, tuple | list | np.ndarray) and len(
                seeds) else [steps[i]]
        else:
            vals = [steps[i]]
        groups.setdefault(b[i], []).extend(vals)
    keys = np.array(sorted(groups))
    return keys, [np.asarray(groups[k], dtype=float) for k in keys]


def fit_tradeoff(
    table: pd.DataFrame,
    *,
    ci: float = 0.95,
    n_boot: int = 1000,
    seed=0,
    combine: str | None = None,
    bootstrap: str = "auto",
    interval: str = "profile",
    bounded: bool = False,
) -> TradeoffFit:
    r"""Fit :math:`S(B) = S_{min}(1 + B_{crit}/B)` (eq. 2.11) in log space, with a bootstrap.

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``batch_size`` and ``steps`` (or ``examples``, then
        ``steps = examples / batch_size``). Either one row per batch size (e.g. the
        output of :func:`steps_to_target`, whose ``seed_steps`` tuples give the
        seeds) or one row per seed (repeated batch sizes). Rows with
        ``reached == False`` are not fitted and are listed in
        ``unreached_batch_sizes``.
    ci : float
        Level of the percentile intervals.
    n_boot : int
        Bootstrap draws (all fitted at once, vectorised).
    seed : int or numpy.random.Generator
    combine : {"mean", "median", "min"}, optional
        How seeds are combined per batch size; default the table's
        ``attrs["combine"]`` or ``"mean"``.
    bootstrap : {"auto", "seeds", "residuals"}
        ``"seeds"`` resamples seeds within each batch size (needs ≥ 2 at every
        batch size); ``"residuals"`` resamples the point fit's log-residuals
        (scaled by :math:`\sqrt{n/(n-2)}` for the two fitted parameters);
        ``"auto"`` picks seeds when available.
    interval : {"profile", "f", "percentile"}
        How ``b_crit_ci`` is formed from the draws. ``"profile"`` (default): the
        profile-likelihood set :math:`\{B : F(B) \le c\}` with
        :math:`F(B) = [\mathrm{RSS}(B) - \mathrm{RSS}_{min}]/[\mathrm{RSS}_{min}/(n-2)]`
        and the critical value :math:`c` calibrated as the ``ci`` quantile of the same
        statistic over the bootstrap draws (evaluated at the point estimate) — a
        bootstrap-calibrated likelihood-ratio interval, nearly pivotal, so it keeps
        close to nominal coverage with few seeds or batch sizes, where plain
        percentile intervals under-cover. An end is 0 or ``inf`` when the set reaches
        the edge of the searched range (:math:`B_{crit}` not bounded by the data).
        ``"f"``: the same set with :math:`c` the F(1, n − 2) quantile (exact for
        Gaussian log-errors, no bootstrap needed). ``"percentile"``: quantiles of the
        bootstrap :math:`B_{crit}` (under-covers with few points: 0.80–0.85 at nominal
        0.90 in ``benchmarks/coverage_fit.py``, against 0.87–0.90 for ``"profile"``).
    bounded : bool
        Constrain :math:`S_{min} \le \min_i S_i` and :math:`E_{min} \le \min_i E_i`.
        Off by default: with scatter the constraint binds in most fits (a noisy
        large-batch point lies below the asymptote) and biases :math:`B_{crit}`
        upwards (+3.5 % to +7.5 % at 15 % log-noise, see ``benchmarks/coverage_fit.py``);
        without it the log-space least-squares fit is unbiased. ``bound`` in the
        result reports whether the constraint was active.
        ``s_min_ci`` and ``e_min_ci`` are always percentile intervals.

    Raises
    ------
    ValueError
        Fewer than 3 batch sizes reached the target, non-positive steps, bad options.

    Examples
    --------
    >>> import pandas as pd
    >>> from empirical_batch.tradeoff import Tradeoff
    >>> t = Tradeoff(s_min=1000, e_min=64000)
    >>> b = [8, 16, 32, 64, 128, 256, 512]
    >>> fit = fit_tradeoff(pd.DataFrame({"batch_size": b, "steps": t.steps(b)}), n_boot=50)
    >>> round(fit.b_crit, 6), round(fit.s_min, 6)
    (64.0, 1000.0)
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    if "batch_size" not in table.columns or not (
        "steps" in table.columns or "examples" in table.columns
    ):
        raise ValueError(
            "table needs a 'batch_size' column and a 'steps' or 'examples' column; "
            f"got {list(table.columns)}"
        )
    ci = as_float(ci, "ci")
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    if not isinstance(n_boot, int | np.integer) or n_boot < 0:
        raise ValueError(f"n_boot must be a non-negative int, got {n_boot!r}")
    combine = combine or table.attrs.get("combine", "mean")
    _check_combine(combine)
    if bootstrap not in ("auto", "seeds", "residuals"):
        raise ValueError(f"bootstrap must be 'auto', 'seeds' or 'residuals', got {bootstrap!r}")
    if interval not in ("profile", "f", "percentile"):
        raise ValueError(f"interval must be 'profile', 'f' or 'percentile', got {interval!r}")
    check_positive(table["batch_size"].to_numpy(dtype=float), "table['batch_size']")
    unreached: tuple[float, ...] = ()
    if "reached" in table.columns:
        mask = table["reached"].astype(bool).to_numpy()
        unreached = tuple(sorted(set(table.loc[~mask, "batch_size"].astype(float))))
        table = table.loc[mask]
    b, groups = _seed_groups(table)
    for bi, g in zip(b, groups, strict=True):
        if not np.all(np.isfinite(g)) or np.any(g <= 0):
            raise ValueError(
                f"steps at batch_size={bi:g} must be finite and > 0, got {g.tolist()}; "
                "mark batch sizes that never reached the target with reached=False"
            )
    target = table.attrs.get("target")
    if len(b) < 3:
        raise ValueError(
            f"only {len(b)} batch size(s) reached the target"
            + (f" {target:g}" if target is not None else "")
            + f" ({b.tolist()}; unreached: {list(unreached)}); fitting S_min and B_crit "
            "needs at least 3"
            + (f"; the best value logged by any non-diverged point is "
               f"{table.attrs['best_metric']:g}" if "best_metric" in table.attrs else "")
        )
    sizes = np.array([len(g) for g in groups])
    if bootstrap == "auto":
        bootstrap = "seeds" if np.all(sizes >= 2) else "residuals"
    if bootstrap == "seeds" and np.any(sizes < 2):
        raise ValueError(
            "bootstrap='seeds' needs at least 2 seeds at every batch size; batch sizes "
            f"{b[sizes < 2].tolist()} have one"
        )
    rng = np.random.default_rng(seed)
    log_b = np.log(b)
    y = np.log([float(_combine(g, combine)) for g in groups])
    grid = _profile_grid(log_b)
    lc, lsm, prof = _fit_point(y, log_b, grid, bounded)
    fitted = lsm + np.logaddexp(0.0, lc - log_b)
    resid = y - fitted
    n = len(b)
    rss_min = float(np.sum(resid**2))

    nan2 = (math.nan, math.nan)
    b_ci = s_ci = e_ci = nan2
    if n_boot > 0:
        if bootstrap == "seeds":
            # seeds resampled within each batch size and recentred on the fitted curve
            # (x ↦ x·Ŝ(B)/combine(x)), so that the bootstrap world's truth is the fit
            Y = np.empty((n_boot, n))
            for j, g in enumerate(groups):
                idx = rng.integers(0, len(g), size=(n_boot, len(g)))
                Y[:, j] = np.log(_combine(g[idx], combine, axis=1)) - resid[j]
        else:
            centred = resid - resid.mean()
            scale = math.sqrt(n / (n - 2)) if n > 2 else 1.0
            idx = rng.integers(0, n, size=(n_boot, n))
            Y = fitted[None, :] + scale * centred[idx]
        lcs = _fit_many(Y, log_b, bounded)
        rss_d, lsms = _rss_at(Y, log_b, lcs, bounded)
        q = [(1 - ci) / 2, (1 + ci) / 2]
        bc = np.exp(lcs)
        sm = np.exp(lsms)
        s_ci = tuple(float(v) for v in np.quantile(sm, q))
        e_ci = tuple(float(v) for v in np.quantile(sm * bc, q))
        if interval == "percentile":
            b_ci = tuple(float(v) for v in np.quantile(bc, q))
    # the profile-set intervals: "f" needs no draws, "profile" calibrates on them
    if interval == "f" or (interval == "profile" and n_boot > 0):
        if rss_min <= 1e-24 * n:
            b_ci = (math.exp(lc), math.exp(lc))  # exact data: no scatter to calibrate on
        else:
            if interval == "f":
                crit = float(stats.f.ppf(ci, 1, n - 2))
            else:
                rss_true, _ = _rss_at(Y, log_b, np.full(n_boot, lc), bounded)
                with np.errstate(divide="ignore", invalid="ignore"):
                    stat = (rss_true - rss_d) / (rss_d / (n - 2))
                stat = np.where(np.isfinite(stat), np.maximum(stat, 0.0), np.inf)
                crit = float(np.quantile(stat, ci))
            b_ci = _profile_interval(grid, prof, rss_min, n - 2, crit)

    s_min = math.exp(lsm)
    b_crit = math.exp(lc)
    unc = np.mean(y - np.logaddexp(0.0, lc - log_b))
    if lsm < unc - 1e-12:
        bound = "s_min <= min S" if abs(lsm - y.min()) < 1e-9 else "e_min <= min E"
    else:
        over = [name for name, ok in (("s_min > min S", lsm <= y.min() + 1e-12),
                                      ("e_min > min E", lsm + lc <= (y + log_b).min() + 1e-12))
                if not ok]
        bound = "unbounded: " + ", ".join(over) if over else "none"
    return TradeoffFit(
        s_min=s_min,
        e_min=s_min * b_crit,
        b_crit=b_crit,
        b_crit_ci=b_ci,
        s_min_ci=s_ci,
        e_min_ci=e_ci,
        ci_level=ci,
        bootstrap=bootstrap,
        n_boot=int(n_boot),
        batch_sizes=tuple(b.tolist()),
        steps=tuple(np.exp(y).tolist()),
        log_residuals=tuple(resid.tolist()),
        log_rmse=float(np.sqrt(np.mean(resid**2))),
        n_batch_sizes=n,
        n_below=int(np.sum(b < b_crit)),
        n_above=int(np.sum(b > b_crit)),
        extrapolation=bool(b_crit < b.min() or b_crit > b.max()),
        bound=bound,
        unreached_batch_sizes=unreached,
        target=None if target is None else float(target),
    )


def critical_batch_curve(
    sweep,
    targets,
    *,
    combine: str = "mean",
    config: str | Sequence[str] = "learning_rate",
    ci: float = 0.95,
    n_boot: int = 1000,
    seed=0,
    errors: str = "raise",
    progress: bool = False,
    interval: str = "profile",
    bounded: bool = False,
) -> pd.DataFrame:
    r""":math:`B_{crit}` as a function of the target: one :func:`fit_tradeoff` per target.

    Parameters
    ----------
    sweep : Sweep or DataFrame
    targets : array_like
        Metric values to reach.
    errors : {"raise", "report"}
        What to do with a target that fewer than 3 batch sizes reach: raise, or
        keep the row with NaN estimates and the reason in the ``note`` column.
    progress : bool
        Show a tqdm progress bar over targets.
    combine, config, ci, n_boot, seed, interval, bounded
        As in :func:`steps_to_target` and :func:`fit_tradeoff` (one
        ``numpy.random.Generator`` drives all targets).

    Returns
    -------
    pandas.DataFrame
        Columns ``target, s_min, e_min, b_crit, b_crit_lo, b_crit_hi, n_batch_sizes,
        log_rmse, extrapolation, note``; ``attrs["fits"]`` holds the
        :class:`TradeoffFit` objects (``None`` for reported failures).
    """
    sweep = _as_sweep(sweep)
    targets = as_array(targets, "targets", ndim=(0, 1)).reshape(-1)
    if errors not in ("raise", "report"):
        raise ValueError(f"errors must be 'raise' or 'report', got {errors!r}")
    _check_combine(combine)
    p = _prepare(sweep, config)
    rng = np.random.default_rng(seed)
    it = targets
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(targets, desc="B_crit per target", unit="target")
    rows, fits = [], []
    for t in it:
        table = _steps_table(p, float(t), combine)
        try:
            fit = fit_tradeoff(table, ci=ci, n_boot=n_boot, seed=rng, combine=combine,
                               interval=interval, bounded=bounded)
        except ValueError as exc:
            if errors == "raise":
                raise ValueError(f"target {t:g}: {exc}") from None
            n_ok = int(table["reached"].sum())
            rows.append({"target": float(t), "s_min": np.nan, "e_min": np.nan,
                         "b_crit": np.nan, "b_crit_lo": np.nan, "b_crit_hi": np.nan,
                         "n_batch_sizes": n_ok, "log_rmse": np.nan,
                         "extrapolation": False, "note": str(exc)})
            fits.append(None)
            continue
        rows.append({
            "target": float(t), "s_min": fit.s_min, "e_min": fit.e_min, "b_crit": fit.b_crit,
            "b_crit_lo": fit.b_crit_ci[0], "b_crit_hi": fit.b_crit_ci[1],
            "n_batch_sizes": fit.n_batch_sizes, "log_rmse": fit.log_rmse,
            "extrapolation": fit.extrapolation,
            "note": f"unreached: {list(fit.unreached_batch_sizes)}"
            if fit.unreached_batch_sizes else "",
        })
        fits.append(fit)
    out = pd.DataFrame(rows)
    out.attrs.update(fits=fits, metric_name=sweep.metric_name,
                     higher_is_better=sweep.higher_is_better)
    return out
