r"""Learning-rate laws fitted to the best rate per batch size (App. C, E; Li et al. 2024).

Families: ``"power"`` $\epsilon(B) = \epsilon_*/(1 + B_*/B)^\alpha$ (the default),
``"sgd"`` $\epsilon_{max}/(1 + B_{noise}/B)$ (eq. 2.6, the power family at
$\alpha = 1$) and ``"surge"`` $\epsilon_{max}/[\tfrac12(\sqrt{B_{noise}/B} +
\sqrt{B/B_{noise}})]$ (Li et al. 2024, Adam-like optimizers: the rate peaks at
$B_{noise}$ and falls beyond); ``"auto"`` selects the one the data single out, or says
the choice is undecided (`empirical_batch.fit.lr_selection`).

References
----------
S. Li et al. "Surge Phenomenon in Optimal Learning Rate and Batch Size Scaling."
NeurIPS 2024, arXiv:2405.14578.

T. C. Hesterberg. "What Teachers Should Know About the Bootstrap: Resampling in the
Undergraduate Statistics Curriculum." The American Statistician 69(4), 2015
(the expanded percentile interval).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import optimize, stats

from .._numeric import exp_or_inf
from .._validate import as_float, check_level, check_positive, scalar_or_array
from ..errors import InputError, warn
from ..params import INTEGER, instance_of, removed_keywords, validate_params
from ..result import Interval, Result, TableResult, unwrap_table
from ..sweeps import Sweep
from .profile import profile_grid
from .steps import (
    Combine,
    as_sweep,
    best_per_size,
    check_combine,
    config_table,
    per_run,
    prepare,
)
from .tradeoff_fit import FitWarning, TradeoffFit, fit_tradeoff


@dataclass(frozen=True, repr=False)
class LRRecommendation(Result):
    """Learning rate (with an `Interval`) and predicted steps/examples at one batch
    size."""

    batch_size: float
    learning_rate: float
    learning_rate_interval: Interval
    steps: float
    examples: float


@dataclass(frozen=True, repr=False)
class LRScalingFit(Result):
    r"""Fit of $\epsilon(B) = \epsilon_*/(1 + B_*/B)^\alpha$ (paper eq. 2.6, App. C/E).

    ``alpha = 1`` for SGD (and momentum), between ½ and 1 for Adam-like optimizers.
    ``tradeoff_fit`` (when the fit was made from a sweep) supplies predicted steps.
    ``eps_star_interval``, ``b_star_interval`` and ``alpha_interval`` are `Interval`\ s
    at confidence ``level``.
    """

    eps_star: float
    b_star: float
    alpha: float
    eps_star_interval: Interval
    b_star_interval: Interval
    alpha_interval: Interval
    alpha_fixed: bool
    batch_sizes: tuple[float, ...]
    learning_rates: tuple[float, ...]
    log_residuals: tuple[float, ...]
    refined: tuple[bool, ...]
    tradeoff_fit: TradeoffFit | None = None
    _draws: np.ndarray | None = field(default=None, repr=False, compare=False)
    family: str = "power"
    selection: tuple[tuple[str, float, float, int], ...] = ()
    """With ``family="auto"``: (family, AICc, RSS, parameters) of every family fitted."""
    selection_status: str = ""
    """With ``family="auto"``: ``"selected"`` (the data single out ``family``) or
    ``"undecided"`` (several families fit, or none: ``candidates`` lists those that
    fit; ``family`` is the one of them with the smallest AICc)."""
    candidates: tuple[str, ...] = ()
    """With ``family="auto"``: the families consistent with the data."""
    selection_note: str = ""
    note: str = ""
    """Empty, or what was numerically degenerate: a fitted constant beyond the float
    range (learning rates many decades apart) is ``inf``, said here."""
    status: str = "identified"
    """``"identified"``, or ``"lower_bound"`` / ``"upper_bound"`` when the fitted $B_*$
    sits at the top / bottom of the searched range (1000 times beyond the measured batch
    sizes): the rates still rise (or are flat) at the ends of the grid, so $B_*$ is
    only bounded; ``to_dict`` then gives ``b_star`` as NaN and the bound in
    ``b_star_bound``, and ``b_star_interval`` is one-sided. The law still evaluates in the
    measured range."""

    def __repr__(self) -> str:
        b = (f"B*={self.b_star:.4g}" if self.status == "identified" else
             f"B* {'>' if self.status == 'lower_bound' else '<'} {self.b_star_bound:.4g} "
             f"({self.status})")
        sel = f", {self.selection_status}" if self.selection_status else ""
        return (f"LRScalingFit({self.family}{sel}: eps*={self.eps_star:.4g}, {b}, "
                f"alpha={self.alpha:.3g}, {len(self.batch_sizes)} batch sizes)")

    @property
    def b_star_bound(self) -> float:
        """The finite end of ``b_star_interval`` for a bound, ``b_star`` when identified."""
        if self.status == "lower_bound":
            return self.b_star_interval.low
        if self.status == "upper_bound":
            return self.b_star_interval.high
        return self.b_star

    @property
    def level(self) -> float:
        """Confidence level of the intervals."""
        return self.eps_star_interval.level

    def learning_rate(self, batch_size: ArrayLike) -> Any:
        r"""The fitted law at ``batch_size``: $\epsilon_*/(1 + B_*/B)^\alpha$
        (``"power"``, ``"sgd"``) or the surge law (``"surge"``, with
        $\epsilon_* = \epsilon_{max}$, $B_* = B_{noise}$)."""
        b = check_positive(batch_size, "batch_size")
        return scalar_or_array(_law(self.family, self.eps_star, self.b_star, self.alpha, b))

    def recommend(self, batch_size: float) -> LRRecommendation:
        """Learning rate (bootstrap interval) and, with a tradeoff fit, steps and examples."""
        b = as_float(batch_size, "batch_size")
        lr = self.learning_rate(b)  # raises for b <= 0
        if self._draws is not None and len(self._draws):
            e, bs, a = self._draws.T
            pred = _law(self.family, e, bs, a, b)
            n_par = 2 if self.family in ("sgd", "surge") or self.alpha_fixed else 3
            lo, hi = np.quantile(pred, _tails(self.level, len(self.batch_sizes) - n_par))
            lr_ci = (float(lo), float(hi))
        else:
            lr_ci = (math.nan, math.nan)
        if self.tradeoff_fit is not None:
            steps = float(self.tradeoff_fit.tradeoff.steps(b))
            examples = steps * b
        else:
            steps = examples = math.nan
        return LRRecommendation(b, lr, Interval(*lr_ci, self.level), steps, examples)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in super().to_dict().items() if k != "_draws"}
        d["tradeoff_fit"] = None if self.tradeoff_fit is None else self.tradeoff_fit.to_dict()
        d["b_star_bound"] = self.b_star_bound
        if self.status != "identified":
            d["b_star"] = math.nan
        return d


Family = Literal["power", "sgd", "surge", "auto"]
"""The learning-rate laws `fit_lr_scaling` fits (``"auto"``: chosen by the data)."""
FAMILIES = get_args(Family)
_Num = float | np.ndarray


def _tails(ci: float, df: int) -> list[float]:
    r"""Quantile levels of the expanded percentile interval (Hesterberg 2015): the
    bootstrap quantiles at $\Phi(\mp t_{df,(1+c)/2})$ instead of $(1 \mp c)/2$, which
    corrects the percentile interval's narrowness with few residual degrees of freedom
    (12 batch sizes, 3 parameters: nominal 95 % covered about 90 % of the time without
    it; ``benchmarks/lr_selection.py``)."""
    from scipy import stats

    p = float(stats.norm.cdf(stats.t.ppf((1 + ci) / 2, max(df, 1))))
    return [1.0 - p, p]


def _law(family: str, eps: _Num, b_star: _Num, alpha: _Num, b: _Num) -> _Num:
    """The fitted law's learning rate at ``b`` (numbers or arrays, broadcast)."""
    if family == "surge":
        return eps / (0.5 * (np.sqrt(b_star / b) + np.sqrt(b / b_star)))
    return eps / (1.0 + b_star / b) ** alpha


def _surge_profile(Y: np.ndarray, log_b: np.ndarray,
                   grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (draw, log B_noise grid point): RSS and intercept log eps_max of the surge law
    log eps = a - log(cosh((log B - c)/2))."""
    F = -np.log(np.cosh((log_b[None, :] - grid[:, None]) / 2.0))  # (G, n)
    icpt = Y.mean(1)[:, None] - F.mean(1)[None, :]  # (D, G)
    R = Y[:, None, :] - F[None, :, :] - icpt[:, :, None]
    rss: np.ndarray = np.sum(R * R, axis=2)
    return rss, icpt


def _fit_surge(b: np.ndarray, lr: np.ndarray, refined: np.ndarray, ci: float, n_boot: int,
               rng: np.random.Generator, tradeoff_fit: TradeoffFit | None) -> LRScalingFit:
    log_b, y = np.log(b), np.log(lr)
    grid = profile_grid(log_b)
    rss, _ = _surge_profile(y[None, :], log_b, grid)
    k = int(np.argmin(rss[0]))
    c = float(grid[k])
    if 0 < k < len(grid) - 1:
        res = optimize.minimize_scalar(
            lambda g: float(_surge_profile(y[None, :], log_b, np.array([g]))[0][0, 0]),
            bounds=(grid[k - 1], grid[k + 1]), method="bounded", options={"xatol": 1e-10})
        c = float(res.x)
    _, icpt = _surge_profile(y[None, :], log_b, np.array([c]))
    a = float(icpt[0, 0])
    fitted = a - np.log(np.cosh((log_b - c) / 2.0))
    resid = y - fitted
    n = len(b)
    draws = None
    e_ci = b_ci = (math.nan, math.nan)
    if n_boot > 0:
        scale = math.sqrt(n / (n - 2))
        Y = fitted[None, :] + scale * (resid - resid.mean())[rng.integers(0, n, (n_boot, n))]
        rss_b, ic_b = _surge_profile(Y, log_b, grid)
        kk = np.argmin(rss_b, axis=1)
        r = np.arange(n_boot)
        with np.errstate(over="ignore"):  # beyond the float range: inf (see ``note``)
            draws = np.column_stack([np.exp(ic_b[r, kk]), np.exp(grid[kk]),
                                     np.full(n_boot, 1.0)])
        q = _tails(ci, n - 2)
        e_ci = (float(np.quantile(draws[:, 0], q[0])), float(np.quantile(draws[:, 0], q[1])))
        b_ci = (float(np.quantile(draws[:, 1], q[0])), float(np.quantile(draws[:, 1], q[1])))
    status, b_ci = _edge_status(rss[0], grid, n - 2, ci, b_ci, "surge")
    return LRScalingFit(
        eps_star=exp_or_inf(a), b_star=exp_or_inf(c), alpha=math.nan,
        eps_star_interval=Interval(*e_ci, ci), b_star_interval=Interval(*b_ci, ci),
        alpha_interval=Interval(math.nan, math.nan, ci), alpha_fixed=True,
        batch_sizes=tuple(b.tolist()), learning_rates=tuple(lr.tolist()),
        log_residuals=tuple(resid.tolist()), refined=tuple(bool(v) for v in refined),
        tradeoff_fit=tradeoff_fit, _draws=draws, family="surge", status=status,
        note=_overflow_note(a, c),
    )


def _edge_status(rss: np.ndarray, grid: np.ndarray, dof: int, ci: float,
                 b_ci: tuple[float, float], family: str) -> tuple[str, tuple[float, float]]:
    r"""Whether the data bound $B_*$: the profile set $\{B_* : F \le F_{1,dof}(ci)\}$,
    $F = [\mathrm{RSS}(B_*) - \mathrm{RSS}_{min}]/[\mathrm{RSS}_{min}/dof]$, on the
    searched grid. A set that reaches the top of the grid (1000 times the largest batch
    size: the rates still rise like a power of B there) leaves only a lower bound, its
    lowest point; one that reaches the bottom only an upper bound. These ends depend on
    the data only. A bound is also a `FitWarning`."""
    rss = np.asarray(rss, dtype=float)
    rss_min = float(rss.min())
    if dof < 1:
        return "identified", b_ci
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (rss - rss_min) / (max(rss_min, 1e-300) / dof)
    inside = np.flatnonzero(f <= float(stats.f.ppf(ci, 1, dof)))
    top, bottom = inside[-1] == len(grid) - 1, inside[0] == 0
    if not (top or bottom):
        return "identified", b_ci
    lo, hi = float(np.exp(grid[inside[0]])), float(np.exp(grid[inside[-1]]))
    status = ("unidentified" if top and bottom else "lower_bound" if top else "upper_bound")
    what = {"lower_bound": f"only a lower bound (B* > {lo:.4g}): the best rates still rise "
                           "like a power of B at the largest batch sizes",
            "upper_bound": f"only an upper bound (B* < {hi:.4g})",
            "unidentified": "not identified by the data"}[status]
    warn(f"learning-rate law ({family}): B* is {what}", FitWarning)
    return status, (0.0 if bottom else lo, math.inf if top else hi)


def _best_lr_refined(cfg: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best learning rate per batch size; parabola in (log lr, log steps) through the
    best rate and its two neighbours on the grid when both reached the target."""
    bs, lrs, refined = [], [], []
    for b, g in cfg.groupby("batch_size", sort=True):
        g = g.dropna(subset=["learning_rate"]).sort_values("learning_rate")
        ok = g["reached"].to_numpy()
        if not ok.any():
            continue
        steps = np.where(ok, g["steps"].to_numpy(dtype=float), np.inf)
        i = int(np.argmin(steps))
        x = np.log(g["learning_rate"].to_numpy(dtype=float))
        best, ref = x[i], False
        if 0 < i < len(g) - 1 and np.isfinite(steps[i - 1]) and np.isfinite(steps[i + 1]):
            xs, ys = x[i - 1:i + 2], np.log(steps[i - 1:i + 2])
            c2, c1, _ = np.polyfit(xs, ys, 2)
            if c2 > 0:
                v = -c1 / (2 * c2)
                if xs[0] <= v <= xs[2]:
                    best, ref = v, True
        bs.append(float(b))  # type: ignore[arg-type]
        lrs.append(math.exp(best))
        refined.append(ref)
    return np.array(bs), np.array(lrs), np.array(refined)


def _lr_profile(Y: np.ndarray, log_b: np.ndarray, grid: np.ndarray,
                alpha: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (draw, B* grid point): RSS, intercept a and exponent α of
    log ε = a − α log(1 + B*/B)."""
    n = Y.shape[1]
    X = np.logaddexp(0.0, grid[:, None] - log_b[None, :])  # (G, n)
    ym = Y.mean(1)[:, None]
    xm = X.mean(1)[None, :]
    sxx = np.einsum("ij,ij->i", X, X)[None, :] - n * xm**2
    syy = np.einsum("ij,ij->i", Y, Y)[:, None] - n * ym**2
    sxy = np.einsum("dn,gn->dg", Y, X) - n * ym * xm
    if alpha is None:
        slope = sxy / sxx
        rss = syy - slope * sxy
        a_hat = -slope
    else:
        a_hat = np.full_like(sxy, alpha)
        rss = syy + 2 * alpha * sxy + alpha**2 * sxx
    intercept = ym + a_hat * xm
    return rss, intercept, a_hat


@removed_keywords(ci="level")
@validate_params(source=instance_of(Sweep, pd.DataFrame, TableResult,
                                    what="a Sweep or DataFrame"),
                 combine=Combine, level="level", n_boot=INTEGER.within("n_boot"),
                 family=Family)
def fit_lr_scaling(
    source: Any,
    target: float | None = None,
    *,
    alpha: float | None = None,
    combine: Combine = "mean",
    level: float | None = None,
    n_boot: int = 1000,
    seed: int | np.random.Generator | None = 0,
    family: Family = "power",
) -> LRScalingFit:
    r"""Fit $\epsilon(B) = \epsilon_*/(1 + B_*/B)^\alpha$ to the best learning rates.

    Parameters
    ----------
    source : Sweep or DataFrame
        A sweep (then ``target`` is required: the best rate per batch size is the one
        reaching the target in fewest steps, refined by a parabola through it and its
        two neighbouring rates in (log ε, log S) when both reached the target), or a
        table with ``batch_size`` and ``learning_rate`` (one best rate per batch size).
    alpha : float, optional
        Fix the exponent of the power family (1 for SGD); fitted when ``None``.
    family : {"power", "sgd", "surge", "auto"}
        The law (see the module docstring). ``"sgd"`` is ``"power"`` with
        ``alpha=1``; ``"auto"`` fits the three and tests each against the law that
        contains them all (`empirical_batch.fit.lr_selection`): ``selection_status``
        is ``"selected"`` when one family is left, ``"undecided"`` when the batch sizes
        cannot tell several apart (``candidates``; the one with the smallest AICc is
        returned). ``selection`` lists (family, AICc, RSS, parameters).
    level, n_boot, seed
        Interval level; residual bootstrap (log-residuals,
        vectorised over a log grid of $B_*$).

    Returns
    -------
    LRScalingFit
        With a `TradeoffFit` attached when ``source`` was a sweep, so that
        ``recommend(B)`` also predicts steps and examples.

    Notes
    -----
    The law is identified only when the best rate changes with batch size. When it
    is the same at every batch size (a coarse learning-rate grid), the fit returns
    α ≈ 0 and a meaningless $B_*$; check ``learning_rates`` first. Intervals
    come from a residual bootstrap and do not include the uncertainty of picking the
    best rate from a grid.
    """
    ci = check_level(level)
    if family in ("sgd", "surge") and alpha is not None:
        raise InputError(f"alpha applies to family='power' only, not {family!r}")
    b, lr, refined, tradeoff_fit = _best_rates(unwrap_table(source), target, combine, ci,
                                               n_boot, seed)
    if family == "auto":
        return _select(b, lr, refined, ci, n_boot, seed, tradeoff_fit)
    if family == "surge":
        if len(b) < 3:
            raise InputError(f"fitting the surge law needs at least 3 batch sizes with a best "
                             f"learning rate, got {len(b)}")
        return _fit_surge(b, lr, refined, ci, n_boot, np.random.default_rng(seed),
                          tradeoff_fit)
    return _fit_power(b, lr, refined, 1.0 if family == "sgd" else alpha, family, ci, n_boot,
                      seed, tradeoff_fit)


def _best_rates(source: Any, target: float | None, combine: str, ci: float, n_boot: int,
                seed: int | np.random.Generator | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, TradeoffFit | None]:
    """The first stage of `fit_lr_scaling`: batch sizes, their best learning rates,
    whether each was refined by a parabola, and (from a sweep reached at 3 batch sizes or
    more) the `TradeoffFit` at ``target``."""
    tradeoff_fit = None
    if isinstance(source, Sweep) or (
        isinstance(source, pd.DataFrame) and "metric" in source.columns
    ):
        if target is None:
            raise InputError("target is required when fitting learning rates from a sweep")
        target = as_float(target, "target")
        check_combine(combine)
        p = prepare(as_sweep(source), "learning_rate")
        pr = per_run(p, target)
        cfg = config_table(p, pr, combine)
        b, lr, refined = _best_lr_refined(cfg)
        table = best_per_size(p, pr, cfg, target, combine)
        if int(table["reached"].sum()) >= 3:
            tradeoff_fit = fit_tradeoff(table, level=ci, n_boot=n_boot, seed=seed)
    else:  # a DataFrame of best rates (fit_lr_scaling declares source)
        for c in ("batch_size", "learning_rate"):
            if c not in source.columns:
                raise InputError(f"table needs column {c!r}; got {list(source.columns)}")
        t = source
        if "reached" in t.columns:
            t = t[t["reached"].astype(bool)]
        b = check_positive(t["batch_size"].to_numpy(dtype=float), "batch_size")
        lr = check_positive(t["learning_rate"].to_numpy(dtype=float), "learning_rate")
        refined = np.zeros(len(b), dtype=bool)
    return b, lr, refined, tradeoff_fit


def _fit_power(b: np.ndarray, lr: np.ndarray, refined: np.ndarray, alpha: float | None,
               family: str, ci: float, n_boot: int, seed: int | np.random.Generator | None,
               tradeoff_fit: TradeoffFit | None) -> LRScalingFit:
    r"""The power law $\epsilon_*/(1 + B_*/B)^\alpha$ (``alpha`` fitted when ``None``;
    1 for ``"sgd"``): the point fit on the grid of $\log B_*$ refined by a bounded
    scalar minimisation, a residual bootstrap (`_power_draws`), the status of $B_*$."""
    n_par = 2 if alpha is None else 1
    if len(b) < n_par + 2:
        raise InputError(
            f"fitting the learning-rate law needs at least {n_par + 2} batch sizes with a "
            f"best learning rate, got {len(b)}"
        )
    if alpha is not None:
        alpha = as_float(alpha, "alpha")
    log_b, y = np.log(b), np.log(lr)
    grid = profile_grid(log_b)
    rss, icpt, al = _lr_profile(y[None, :], log_b, grid, alpha)
    k = int(np.argmin(rss[0]))
    if 0 < k < len(grid) - 1:
        def obj(g: float) -> float:
            r, _, _ = _lr_profile(y[None, :], log_b, np.array([g]), alpha)
            return float(r[0, 0])

        res = optimize.minimize_scalar(obj, bounds=(grid[k - 1], grid[k + 1]),
                                       method="bounded", options={"xatol": 1e-10})
        lbs = float(res.x)
    else:
        lbs = float(grid[k])
    _, icpt, al = _lr_profile(y[None, :], log_b, np.array([lbs]), alpha)
    eps_star, a_fit = exp_or_inf(float(icpt[0, 0])), float(al[0, 0])
    fitted = icpt[0, 0] - a_fit * np.logaddexp(0.0, lbs - log_b)
    resid = y - fitted
    draws, (e_ci, b_ci, a_ci) = _power_draws(fitted, resid, log_b, grid, alpha, n_par, ci,
                                             n_boot, np.random.default_rng(seed))
    status, b_ci = _edge_status(rss[0], grid, len(b) - n_par - 1, ci, b_ci, family)
    return LRScalingFit(
        eps_star=eps_star, b_star=exp_or_inf(lbs), alpha=a_fit, status=status,
        eps_star_interval=Interval(*e_ci, ci), b_star_interval=Interval(*b_ci, ci),
        alpha_interval=Interval(*a_ci, ci),
        alpha_fixed=alpha is not None,
        batch_sizes=tuple(b.tolist()), learning_rates=tuple(lr.tolist()),
        log_residuals=tuple(resid.tolist()), refined=tuple(bool(v) for v in refined),
        tradeoff_fit=tradeoff_fit, _draws=draws, family="sgd" if family == "sgd" else "power",
        note=_overflow_note(float(icpt[0, 0]), lbs),
    )


def _power_draws(fitted: np.ndarray, resid: np.ndarray, log_b: np.ndarray,
                 grid: np.ndarray, alpha: float | None, n_par: int, ci: float, n_boot: int,
                 rng: np.random.Generator
                 ) -> tuple[np.ndarray | None, tuple[tuple[float, float], ...]]:
    r"""The residual bootstrap of the power law: centred log-residuals resampled and
    scaled by $\sqrt{n/(n - p - 1)}$, each draw fitted on the grid; the draws of
    $(\epsilon_*, B_*, \alpha)$ (``None`` with ``n_boot=0``) and their expanded
    percentile intervals (`_tails`; NaN without draws)."""
    n = len(fitted)
    q = _tails(ci, n - n_par - 1)
    if n_boot <= 0:
        nan2 = (math.nan, math.nan)
        return None, (nan2, nan2, nan2)
    scale = math.sqrt(n / (n - n_par - 1))
    Y = fitted[None, :] + scale * (resid - resid.mean())[rng.integers(0, n, (n_boot, n))]
    rss_b, ic_b, al_b = _lr_profile(Y, log_b, grid, alpha)
    kk = np.argmin(rss_b, axis=1)
    r = np.arange(n_boot)
    with np.errstate(over="ignore"):  # beyond the float range: inf (see ``note``)
        draws = np.column_stack([np.exp(ic_b[r, kk]), np.exp(grid[kk]), al_b[r, kk]])
    return draws, tuple((float(np.quantile(draws[:, j], q[0])),
                         float(np.quantile(draws[:, j], q[1]))) for j in range(3))


def _overflow_note(log_eps_star: float, log_b_star: float) -> str:
    """The note of a fit whose constants exceed the float range (empty when they do not)."""
    if np.isfinite(exp_or_inf(log_eps_star)) and np.isfinite(exp_or_inf(log_b_star)):
        return ""
    return (f"a fitted constant exceeds the float range (log eps_star = {log_eps_star:.4g}, "
            f"log b_star = {log_b_star:.4g}): set to inf; the learning rates are many "
            "decades apart")


def _select(b: np.ndarray, lr: np.ndarray, refined: np.ndarray, ci: float, n_boot: int,
            seed: int | np.random.Generator | None,
            tradeoff_fit: TradeoffFit | None) -> LRScalingFit:
    """Fit every family and select one by `lr_selection.select_family`."""
    from dataclasses import replace

    from .lr_selection import K, select_family

    table = pd.DataFrame({"batch_size": b, "learning_rate": lr})
    n = len(b)
    fits, rss = {}, {}
    for fam in ("sgd", "surge", "power"):
        if n < K[fam] + 2 if fam == "power" else n < 3:
            continue
        with warnings.catch_warnings():  # only the selected law's bound is reported
            warnings.simplefilter("ignore", FitWarning)
            f = fit_lr_scaling(table, family=fam, level=ci, n_boot=n_boot, seed=seed)
        fits[fam] = f
        rss[fam] = float(np.sum(np.square(f.log_residuals)))
    if not fits:
        raise InputError(f"selecting a learning-rate law needs at least 3 batch sizes with a "
                         f"best learning rate, got {n}")
    rss_half = math.nan
    if "power" in fits:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)
            half = fit_lr_scaling(table, family="power", alpha=0.5, n_boot=0)
        rss_half = float(np.sum(np.square(half.log_residuals)))
    sel = select_family(b, lr, rss, rss_half)
    rows = tuple((fam, sel.aicc[fam], rss[fam], K[fam]) for fam in rss)
    chosen = fits[sel.family]
    if chosen.status != "identified":
        warn(f"learning-rate law ({sel.family}): B* is only a "
             f"{chosen.status.replace('_', ' ')} ({chosen.b_star_interval.low:.4g}, "
             f"{chosen.b_star_interval.high:.4g})", FitWarning)
    return replace(chosen, refined=tuple(bool(v) for v in refined),
                   tradeoff_fit=tradeoff_fit, selection=rows,
                   selection_status=sel.status, candidates=sel.candidates,
                   selection_note=sel.note)
