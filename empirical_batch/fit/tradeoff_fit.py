r"""Fitting the steps/examples hyperbola with bootstrap intervals (§2.3, §3).

How the fit works: see `empirical_batch.fit`; the profile over
$B_{crit}$ is in `empirical_batch.fit.profile`. `fit_tradeoff` runs in stages:
`read_points` (the table read and checked), then `point_fit`, `fit_intervals` and
`b_crit_status` (`empirical_batch.fit.tradeoff_intervals`), then `_assemble`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from .._validate import as_float, check_level, check_positive
from ..errors import EmpiricalBatchWarning, FitError, InputError, UsageError, warn
from ..params import INTEGER, instance_of, removed_keywords, validate_params
from ..result import Interval, Result, TableResult, unwrap_table
from ..tradeoff import Tradeoff
from ..units import UnitMismatch, check_unit
from .profile import active_bound
from .steps import Combine, StepsTable, check_combine, check_seeds, seed_groups
from .tradeoff_intervals import (
    BCritProfile,
    Intervals,
    PointFit,
    SeedPoints,
    b_crit_interval_at,
    b_crit_status,
    fit_intervals,
    point_fit,
)

__all__ = ["FitWarning", "NotEnoughBatchSizes", "TradeoffFit", "fit_tradeoff"]


class FitWarning(EmpiricalBatchWarning):
    """A condition that weakens a fit (also listed in the result's ``warnings``)."""


class NotEnoughBatchSizes(FitError):
    """Fewer than 3 batch sizes reached the target: the hyperbola cannot be fitted."""


class TargetAtStart(FitError):
    """Some batch size needs zero steps: the target is not below its starting metric
    (it is met at the first logged point, step 0), so no tradeoff can be read off it."""


@dataclass(frozen=True, repr=False)
class TradeoffFit(Result):
    r"""A fitted tradeoff $S(B) = S_{min}(1 + B_{crit}/B)$ with bootstrap intervals.

    Attributes
    ----------
    s_min, e_min, b_crit : float
        Point estimates; ``b_crit = e_min / s_min``. NaN where the ``status`` does not
        determine them (`determined`): a bound has no point value.
    b_crit_interval : Interval
        Interval on $B_{crit}$ (see ``interval`` in `fit_tradeoff`); its level is
        ``level``.
    s_min_interval, e_min_interval : Interval
        Percentile bootstrap intervals at the same level; for a bound on $B_{crit}$ the
        quantity it leaves open keeps only its upper end (low 0: $S_{min}$ of a
        ``"lower_bound"``, $E_{min}$ of an ``"upper_bound"``), NaN when unidentified.
    level : float
        The confidence level of the intervals.
    bootstrap : str
        ``"seeds"`` (seeds resampled within each batch size) or ``"residuals"``
        (log-residuals resampled, used when a batch size has a single value).
    batch_sizes, steps, log_residuals : tuple of float
        The fitted points (seeds combined) and $\log S_i - \log \hat S(B_i)$.
    n_below, n_above : int
        Batch sizes below / above $B_{crit}$.
    extrapolation : bool
        ``True`` when $B_{crit}$ lies outside the measured batch-size range
        (it is then an extrapolation of the fitted curve, not a measurement).
    bound : str
        With ``bounded=True``, the constraint active at the optimum (``"none"``,
        ``"s_min <= min S"`` or ``"e_min <= min E"``); unbounded fits that exceed a
        bound say so (``"unbounded: s_min > min S"``).
    unreached_batch_sizes : tuple of float
        Batch sizes in the input table that did not reach the target (not fitted).
    status : str
        What the data say about $B_{crit}$: ``"identified"`` (the interval is
        bounded on both sides), ``"lower_bound"`` (only a lower bound: the interval
        reaches the top of the searched range, e.g. steps still halving at the largest
        batch size), ``"upper_bound"`` or ``"unidentified"``; ``"unknown"`` when no
        interval was computed (``n_boot=0`` with a bootstrap interval).
        Read `b_crit_bound`, not the point estimate, unless it is identified.
    warnings : tuple of str
        Conditions that weaken the fit (best learning rate at the edge of its grid,
        steps rising with batch size, fewer than 3 batch sizes on a side of
        $B_{crit}$, too few bootstrap draws for the level); also issued as
        `FitWarning`.
    unit : str
        What ``batch_sizes``, ``b_crit`` and ``e_min`` count: ``"examples"``,
        ``"sequences"`` or ``"tokens"`` (`empirical_batch.units`); steps are steps.
    b_crit_profile : BCritProfile or None
        What ``b_crit_interval`` is recomputed from at another level: the fitted points,
        the estimate and the interval method (`BCritProfile`);
        ``fit.interval("b_crit", 0.8)`` is the interval `fit_tradeoff` gives at level
        0.8 with the same draws. None for a fit not made by `fit_tradeoff`.
    draws : dict of str to ndarray
        The bootstrap draws of ``s_min``, ``e_min``, ``b_crit`` and the profile
        statistic at the estimate (``stat``, what calibrates the ``"profile"``
        interval); empty with ``n_boot=0`` and in a fit read back from JSON:
        ``fit.interval("s_min", 0.9)`` is their interval at another level
        (`Result.interval`).
    """

    s_min: float
    e_min: float
    b_crit: float
    b_crit_interval: Interval
    s_min_interval: Interval
    e_min_interval: Interval
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
    status: str = "identified"
    warnings: tuple[str, ...] = ()
    unit: str = "examples"
    b_crit_profile: BCritProfile | None = field(default=None, repr=False)
    draws: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)
    #: the fitted curve's (S_min, E_min): for a bound, the optimum at the searched
    #: range's edge, which draws the curve but is no estimate (not in to_dict)
    _curve: tuple[float, float] = field(default=(math.nan, math.nan), compare=False)

    def __post_init__(self) -> None:
        if math.isnan(self._curve[0]):
            object.__setattr__(self, "_curve", (self.s_min, self.e_min))
        d = self.determined()
        for k in ("s_min", "e_min", "b_crit"):
            object.__setattr__(self, k, d[k])
        for k in ("s_min", "e_min"):
            object.__setattr__(self, f"{k}_interval", self._opened(k, getattr(self,
                                                                              f"{k}_interval")))

    def _opened(self, name: str, ci: Interval) -> Interval:
        """The quantity the status leaves open keeps only its upper end (none when
        unidentified)."""
        open_ = {"lower_bound": ("s_min",), "upper_bound": ("e_min",),
                 "unidentified": ("s_min", "e_min")}.get(self.status, ())
        if name not in open_:
            return ci
        return (Interval(math.nan, math.nan, ci.level) if self.status == "unidentified"
                else Interval(0.0, ci.high, ci.level))

    def interval(self, name: str, level: float | None = None) -> Interval:
        """The interval of ``name`` at ``level`` (`Result.interval`); ``"b_crit"`` at
        another level than the fit's is recomputed from `b_crit_profile` and the draws
        (`b_crit_interval_at`): what `fit_tradeoff` gives at that level."""
        if name != "b_crit" or level is None:
            return super().interval(name, level)
        level = check_level(level)
        if level == self.level:
            return self.b_crit_interval
        if self.b_crit_profile is None:
            raise UsageError(
                f"{type(self).__name__} stores no profile of b_crit (it was not made by "
                f"fit_tradeoff): its interval is at level={self.level:g} only; recompute "
                f"it with level={level:g}")
        try:
            low, high = b_crit_interval_at(self.b_crit_profile, level, self.draws,
                                           self.n_boot)
        except UsageError as exc:
            raise UsageError(f"{type(self).__name__} stores {exc}: its interval is at "
                             f"level={self.level:g} only; refit with level={level:g} "
                             "(interval='f' needs no draws)") from None
        return Interval(low, high, level)

    @property
    def tradeoff(self) -> Tradeoff:
        """The fitted curve as a `Tradeoff` (for a bound on $B_{crit}$, the curve at the
        edge of the searched range: it draws the fitted values, its S_min, E_min and
        B_crit are not estimates; read `determined` and `b_crit_bound`)."""
        return Tradeoff(*self._curve)

    @property
    def level(self) -> float:
        """Confidence level of the intervals."""
        return self.b_crit_interval.level

    def determined(self) -> dict[str, float]:
        """``s_min``, ``e_min``, ``b_crit`` as the data determine them (NaN where they do
        not) and ``b_crit_bound``: all three for ``"identified"`` and ``"unknown"`` (no
        interval asked for); for ``"lower_bound"`` $B_{crit}$ and $S_{min}$ are not
        determined (steps still fall like 1/B at the largest batch sizes, $E_{min}$ is);
        for ``"upper_bound"`` $B_{crit}$ and $E_{min}$ are not; for ``"unidentified"``
        none is. Tables, JSON and the command line report these values."""
        s, e, b = self.s_min, self.e_min, self.b_crit
        if self.status in ("lower_bound", "unidentified"):
            s = b = math.nan
        if self.status in ("upper_bound", "unidentified"):
            e = b = math.nan
        return {"s_min": s, "e_min": e, "b_crit": b, "b_crit_bound": self.b_crit_bound}

    def to_dict(self) -> dict[str, Any]:
        """The fields, with the values the data do not determine as NaN (`determined`)."""
        out = super().to_dict() | self.determined()
        out.pop("_curve", None)
        out.pop("draws", None)
        return out

    def to_frame(self) -> pd.DataFrame:
        """Per batch size: measured steps/examples, fitted values, log-residual."""
        b = np.asarray(self.batch_sizes)
        s = np.asarray(self.steps)
        return pd.DataFrame({
            "batch_size": b, "steps": s, "examples": s * b,
            "steps_fit": self.tradeoff.steps(b), "examples_fit": self.tradeoff.examples(b),
            "log_residual": np.asarray(self.log_residuals),
        })

    @property
    def b_crit_bound(self) -> float:
        """What the data support: the lower end of the interval for ``"lower_bound"``,
        the upper end for ``"upper_bound"``, the estimate when identified, NaN else."""
        if self.status == "lower_bound":
            return self.b_crit_interval.low
        if self.status == "upper_bound":
            return self.b_crit_interval.high
        return self.b_crit if self.status == "identified" else math.nan

    def b_crit_text(self) -> str:
        """B_crit as the data support it, in words: a value with its interval, a bound or
        "not identified"."""
        lo, hi = self.b_crit_interval
        u = self.unit
        if self.status == "lower_bound":
            return f"B_crit > {lo:.4g} {u} (lower bound only)"
        if self.status == "upper_bound":
            return f"B_crit < {hi:.4g} {u} (upper bound only)"
        if self.status == "unidentified":
            return "B_crit not identified by the data"
        flag = " (extrapolated)" if self.extrapolation else ""
        return f"B_crit = {self.b_crit:.4g} [{lo:.4g}, {hi:.4g}] {u}{flag}"

    def __repr__(self) -> str:
        noted = f", {len(self.warnings)} warnings" if self.warnings else ""
        known = "".join(f"{k}={v:.4g}, " for k, v in self.determined().items()
                        if k in ("s_min", "e_min") and math.isfinite(v))
        return (
            f"TradeoffFit({self.b_crit_text()}, status={self.status!r}, "
            f"{known}{self.n_batch_sizes} batch sizes{noted})"
        )

    def summary(self) -> str:
        """The fit, its interval and its warnings, in a few lines."""
        d = {k: (f" = {v:.4g} {u}" if math.isfinite(v) else " not determined")  # status
             for (k, v), u in zip(self.determined().items(),
                                  ("steps", self.unit, self.unit, self.unit), strict=True)}
        lines = [f"{self.b_crit_text()} ({self.level:.0%}, {self.bootstrap} bootstrap, "
                 f"n_boot={self.n_boot}); status {self.status}",
                 f"S_min{d['s_min']}, E_min{d['e_min']}; "
                 f"{self.n_batch_sizes} batch sizes ({self.n_below} below, {self.n_above} "
                 f"above B_crit), log-RMSE {self.log_rmse:.3g}"
                 + ("" if self.target is None else f"; target {self.target:.6g}")]
        if self.unreached_batch_sizes:
            lines.append(f"not reached at batch sizes {list(self.unreached_batch_sizes)}")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


Bootstrap = Literal["auto", "seeds", "residuals"]
"""How `fit_tradeoff` resamples: by seed, by residual, or seeds where every batch size
has two or more."""
IntervalMethod = Literal["profile", "f", "percentile"]
"""How `fit_tradeoff` turns the fit into an interval on B_crit."""


@removed_keywords(ci="level")
@validate_params(table=instance_of(StepsTable, pd.DataFrame, TableResult,
                                   what="a StepsTable or a pandas DataFrame"),
                 level="level", n_boot=INTEGER.within("n_boot"), combine=Combine,
                 bootstrap=Bootstrap, interval=IntervalMethod)
def fit_tradeoff(table: StepsTable | pd.DataFrame, *, level: float | None = None,
                 n_boot: int = 1000, seed: int | np.random.Generator | None = 0,
                 combine: Combine | None = None, bootstrap: Bootstrap = "auto",
                 interval: IntervalMethod = "profile", bounded: bool = False,
                 unit: str | None = None) -> TradeoffFit:
    r"""Fit $S(B) = S_{min}(1 + B_{crit}/B)$ (eq. 2.11) in log space, with a bootstrap.

    Parameters
    ----------
    table : StepsTable or pandas.DataFrame
        The result of `steps_to_target` (whose ``seed_steps`` give the seeds, and whose
        target, combine rule and learning-rate grid edges are used), or a DataFrame with
        columns ``batch_size`` and ``steps`` (or ``examples``, then ``steps = examples /
        batch_size``): one row per batch size or one row per seed (repeated batch sizes).
        Rows with ``reached == False`` are not fitted and are listed in
        ``unreached_batch_sizes``.
    level : float
        Level of the intervals (default 0.95).
    n_boot : int
        Bootstrap draws (all fitted at once, vectorised).
    seed : int or numpy.random.Generator
    combine : {"mean", "median", "min"}, optional
        How seeds are combined per batch size; default the StepsTable's rule, or
        ``"mean"``.
    bootstrap : {"auto", "seeds", "residuals"}
        ``"seeds"`` resamples seeds within each batch size (needs ≥ 2 at every
        batch size); ``"residuals"`` resamples the point fit's log-residuals
        (scaled by $\sqrt{n/(n-2)}$ for the two fitted parameters);
        ``"auto"`` picks seeds when available.
    interval : {"profile", "f", "percentile"}
        How ``b_crit_interval`` is formed (`empirical_batch.fit`, "The interval on
        B_crit"): ``"profile"`` (default) the profile-likelihood set $\{B : F(B) \le c\}$
        with $c$ calibrated on the bootstrap draws; ``"f"`` the same set with $c$ the
        F(1, n − 2) quantile (no draws needed); ``"percentile"`` the draws' quantiles.
    bounded : bool
        Constrain $S_{min} \le \min_i S_i$ and $E_{min} \le \min_i E_i$ (off by default:
        it biases $B_{crit}$ upwards, `empirical_batch.fit`); ``bound`` in the result
        reports whether the constraint was active. ``s_min_interval`` and
        ``e_min_interval`` are always percentile intervals.
    unit : {"examples", "sequences", "tokens"}, optional
        What ``batch_size`` counts (carried into the result's ``unit``); default the
        StepsTable's unit, else ``"examples"``. A unit that contradicts the
        StepsTable's raises `empirical_batch.units.UnitMismatch`.

    Raises
    ------
    NotEnoughBatchSizes
        Fewer than 3 batch sizes reached the target (a ``ValueError``).
    ValueError
        Non-positive steps, steps that are not their ``seed_steps`` combined, bad options.

    Warns
    -----
    FitWarning
        For each entry of the result's ``warnings``.

    References
    ----------
    S. McCandlish, J. Kaplan, D. Amodei and the OpenAI Dota Team. "An Empirical Model
    of Large-Batch Training." arXiv:1812.06162 (2018), eq. 2.11 and §3.

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
    pts = read_points(table, level, n_boot, combine, bootstrap, interval, unit)
    pt = point_fit(pts.batch_sizes, pts.groups, pts.combine, bounded)
    ivl = fit_intervals(pts, pt, interval, bounded, np.random.default_rng(seed))
    b_ci, status = b_crit_status(pt, ivl.b_crit, interval, pts.level, bounded)
    notes = _warnings(pts, pt, interval)
    for w in notes:
        warn(w, FitWarning)
    return _assemble(pts, pt, ivl, b_ci, status, notes, interval, bounded)


def read_points(table: StepsTable | pd.DataFrame, level: float | None, n_boot: int,
                combine: str | None, bootstrap: str, interval: str,
                unit: str | None) -> SeedPoints:
    """The first stage of `fit_tradeoff`: options checked, the steps checked against
    their seeds (`check_seeds`, with the StepsTable's rule), the rows that reached the
    target grouped by batch size (seeds), their steps checked; raises `TargetAtStart`,
    `NotEnoughBatchSizes` or `InputError`."""
    stepstable = table if isinstance(table, StepsTable) else None
    unit = _unit(stepstable, unit)
    frame = _check_table(table)
    ci, n_boot = _check_options(check_level(level), n_boot)
    combine = combine or (stepstable.combine if stepstable is not None else "mean")
    check_combine(combine)
    check_seeds(frame, stepstable.combine if stepstable is not None else combine)
    unreached: tuple[float, ...] = ()
    if "reached" in frame.columns:
        mask = frame["reached"].astype(bool).to_numpy()
        unreached = tuple(sorted(set(frame.loc[~mask, "batch_size"].astype(float))))
        frame = frame.loc[mask]
    b, groups = seed_groups(frame)
    _check_steps(b, groups)
    if len(b) < 3:
        target = stepstable.target if stepstable is not None else None
        best = stepstable.best_metric if stepstable is not None else None
        raise NotEnoughBatchSizes(
            f"only {len(b)} batch size(s) reached the target"
            + (f" {target:g}" if target is not None else "")
            + f" ({b.tolist()}; unreached: {list(unreached)}); fitting S_min and B_crit "
            "needs at least 3"
            + (f"; the best value logged by any non-diverged point is {best:g}"
               if best is not None and math.isfinite(best) else "")
        )
    sizes = np.array([len(g) for g in groups])
    if bootstrap == "auto":
        bootstrap = "seeds" if np.all(sizes >= 2) else "residuals"
    if bootstrap == "seeds" and np.any(sizes < 2):
        raise InputError(
            "bootstrap='seeds' needs at least 2 seeds at every batch size; batch sizes "
            f"{b[sizes < 2].tolist()} have one"
        )
    return SeedPoints(batch_sizes=b, groups=groups, combine=combine, bootstrap=bootstrap,
                      level=ci, n_boot=n_boot, unit=unit, unreached=unreached,
                      stepstable=stepstable)


def _check_steps(b: np.ndarray, groups: Sequence[np.ndarray]) -> None:
    """Raise unless every batch size's steps are finite and > 0 (`TargetAtStart` where
    some are 0: the target was met at step 0)."""
    for bi, g in zip(b, groups, strict=True):
        if np.all(np.isfinite(g)) and np.all(g >= 0) and np.any(g == 0):
            raise TargetAtStart(
                f"steps at batch_size={bi:g} are {g.tolist()}: the target is met at the "
                "first logged point (step 0), so it is not below that run's starting "
                "metric; choose a target every batch size has to train for")
        if not np.all(np.isfinite(g)) or np.any(g <= 0):
            raise InputError(
                f"steps at batch_size={bi:g} must be finite and > 0, got {g.tolist()}; "
                "mark batch sizes that never reached the target with reached=False"
            )


def _assemble(pts: SeedPoints, pt: PointFit, ivl: Intervals, b_ci: tuple[float, float],
              status: str, notes: tuple[str, ...], interval: str,
              bounded: bool) -> TradeoffFit:
    """The last stage of `fit_tradeoff`: the stages' results as a `TradeoffFit`."""
    b, ci, target = pts.batch_sizes, pts.level, pts.target
    s_min = math.exp(pt.lsm)
    b_crit = math.exp(pt.lc)
    return TradeoffFit(
        _curve=(s_min, s_min * b_crit),
        s_min=s_min,
        e_min=s_min * b_crit,
        b_crit=b_crit,
        b_crit_interval=Interval(*b_ci, ci),
        s_min_interval=Interval(*ivl.s_min, ci),
        e_min_interval=Interval(*ivl.e_min, ci),
        bootstrap=pts.bootstrap,
        n_boot=int(pts.n_boot),
        batch_sizes=tuple(b.tolist()),
        steps=tuple(np.exp(pt.y).tolist()),
        log_residuals=tuple(pt.resid.tolist()),
        log_rmse=float(np.sqrt(np.mean(pt.resid**2))),
        n_batch_sizes=pt.n,
        n_below=int(np.sum(b < b_crit)),
        n_above=int(np.sum(b > b_crit)),
        extrapolation=bool(b_crit < b.min() or b_crit > b.max()),
        bound=active_bound(pt.y, pt.log_b, pt.lc, pt.lsm),
        unreached_batch_sizes=pts.unreached,
        target=None if target is None else float(target),
        status=status,
        warnings=notes,
        unit=pts.unit,
        b_crit_profile=BCritProfile(method=interval, log_batch_sizes=tuple(pt.log_b.tolist()),
                                    log_steps=tuple(pt.y.tolist()), log_b_crit=pt.lc,
                                    bounded=bounded),
        draws={} if ivl.draws is None else dict(ivl.draws),
    )


def _unit(stepstable: StepsTable | None, unit: str | None) -> str:
    if unit is None:
        return stepstable.unit if stepstable is not None else "examples"
    unit = check_unit(unit)
    if stepstable is not None:
        if stepstable.unit != unit:
            raise UnitMismatch(f"unit={unit!r} but the steps table's batch_size is in "
                               f"{stepstable.unit}")
    return unit


def _check_table(table: Any) -> pd.DataFrame:
    frame = table.frame if isinstance(table, StepsTable) else unwrap_table(table)
    if "batch_size" not in frame.columns or not (
        "steps" in frame.columns or "examples" in frame.columns
    ):
        raise InputError(
            "table needs a 'batch_size' column and a 'steps' or 'examples' column; "
            f"got {list(frame.columns)}"
        )
    check_positive(frame["batch_size"].to_numpy(dtype=float), "table['batch_size']")
    return frame


def _check_options(ci: float, n_boot: int) -> tuple[float, int]:
    """The level as a float and ``n_boot`` as an int (the options, the level's domain,
    ``n_boot`` and ``combine`` are checked by `fit_tradeoff`'s `validate_params`)."""
    return as_float(ci, "level"), int(n_boot)


def _warnings(pts: SeedPoints, pt: PointFit, interval: str) -> tuple[str, ...]:
    """The conditions that weaken the fit (the result's ``warnings``)."""
    b, y, b_crit = pts.batch_sizes, pt.y, math.exp(pt.lc)
    stepstable, n_boot, ci = pts.stepstable, pts.n_boot, pts.level
    notes = []
    if stepstable is not None:
        edge = stepstable.reached & stepstable.lr_at_grid_edge
        if edge.any():
            notes.append(
                "best learning rate at the edge of its grid at batch sizes "
                f"{stepstable.batch_sizes[edge].tolist()}: their steps are upper bounds"
            )
    rises = np.flatnonzero(np.diff(y) > 0)
    if rises.size:
        notes.append(
            "steps rise with batch size from "
            + ", ".join(f"{b[i]:g} to {b[i + 1]:g}" for i in rises)
            + " (the tradeoff assumes they fall)"
        )
    below, above = int(np.sum(b < b_crit)), int(np.sum(b > b_crit))
    if below < 3 or above < 3:
        notes.append(
            f"{below} batch size(s) below and {above} above B_crit: fewer than 3 on a "
            "side, so the curve's bend is poorly constrained"
        )
    needs_draws = interval in ("profile", "percentile")
    if needs_draws and 0 < n_boot and n_boot * (1 - ci) / 2 < 10:
        notes.append(
            f"n_boot={n_boot} leaves fewer than 10 draws in each tail of a {ci:.0%} "
            f"interval; use at least {math.ceil(20 / (1 - ci))}"
        )
    if needs_draws and n_boot == 0:
        notes.append(f"n_boot=0: no {interval} interval (use interval='f' for one without "
                     "draws)")
    return tuple(notes)
