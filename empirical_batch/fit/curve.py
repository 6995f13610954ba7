r"""$B_{crit}$ as a function of the target: one `fit_tradeoff` per target (§3)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from .._validate import as_array, check_level
from ..errors import InputError
from ..params import FINITE, INTEGER, removed_keywords, validate_params
from ..result import Result
from .steps import (
    SWEEP,
    Combine,
    FrameView,
    StepsTable,
    as_sweep,
    prepare,
    steps_table,
    sweep_unit,
)
from .tradeoff_fit import (
    IntervalMethod,
    NotEnoughBatchSizes,
    TargetAtStart,
    TradeoffFit,
    fit_tradeoff,
)

__all__ = ["CriticalBatchCurve", "critical_batch_curve"]


@dataclass(frozen=True, repr=False, eq=False)
class CriticalBatchCurve(FrameView, Result):
    """The fits of `critical_batch_curve`, one per target.

    Attributes
    ----------
    targets : tuple of float
    fits : tuple of TradeoffFit or None
        ``None`` where the target could not be fitted (``errors="report"``).
    notes : tuple of str
        Why a target was not fitted, or which batch sizes did not reach it.
    metric_name : str
    higher_is_better : bool
    unit : str
        What ``b_crit`` and ``e_min`` count (`empirical_batch.units`).
    tables : tuple of StepsTable
        The steps to each target per batch size that each fit was made from.
    frame : pandas.DataFrame
        One row per target: ``target, s_min, e_min, b_crit, b_crit_low, b_crit_high,
        n_batch_sizes, log_rmse, extrapolation, status, note, b_crit_bound``
        (``to_frame()``). Built from the fields at each access (nothing is stored beside
        them), so editing it changes neither the fits nor ``b_crit`` and ``status``.
        Values the data do not determine are NaN (`TradeoffFit.determined`): ``b_crit``
        is a number only where the status is ``"identified"`` (or ``"unknown"``, no
        interval asked for); a one-sided interval's end is in ``b_crit_bound`` (a lower
        bound for ``"lower_bound"``). Fits on top of the curve (a power law in the
        target) use the identified rows.
    """

    targets: tuple[float, ...]
    fits: tuple[TradeoffFit | None, ...]
    notes: tuple[str, ...]
    metric_name: str
    higher_is_better: bool
    tables: tuple[StepsTable, ...] = field(repr=False)
    unit: str = "examples"

    def __post_init__(self) -> None:
        n = {len(self.targets), len(self.fits), len(self.notes), len(self.tables)}
        if len(n) != 1:
            raise InputError("CriticalBatchCurve needs one fit, note and steps table per "
                             f"target; got {len(self.targets)} targets, {len(self.fits)} "
                             f"fits, {len(self.notes)} notes, {len(self.tables)} tables")

    @property
    def frame(self) -> pd.DataFrame:  # type: ignore[override]
        rows = [_row(t, fit, note, table) for t, fit, note, table
                in zip(self.targets, self.fits, self.notes, self.tables, strict=True)]
        return pd.DataFrame(rows, columns=list(COLUMNS))

    @property
    def b_crit(self) -> np.ndarray:
        """B_crit per target where the data determine it, NaN elsewhere (bounds included:
        see ``b_crit_bound`` in the frame)."""
        return np.array([np.nan if f is None else f.determined()["b_crit"] for f in self.fits],
                        dtype=float)

    @property
    def status(self) -> tuple[str, ...]:
        return tuple("not fitted" if f is None else f.status for f in self.fits)

    def __repr__(self) -> str:
        ok = sum(f is not None for f in self.fits)
        ident = sum(s == "identified" for s in self.status)
        b = self.b_crit[np.isfinite(self.b_crit)]
        span = f", B_crit {b.min():.4g}..{b.max():.4g} {self.unit}" if b.size else ""
        bounds = [float(f.b_crit_bound) for f in self.fits
                  if f is not None and f.status == "lower_bound"]
        low = f", B_crit > {min(bounds):.4g} at {len(bounds)} targets" if bounds else ""
        return (f"CriticalBatchCurve({len(self.targets)} targets of {self.metric_name}, {ok} "
                f"fitted, {ident} identified{span}{low})")

    def summary(self) -> str:
        cols = ["target", "b_crit", "b_crit_bound", "b_crit_low", "b_crit_high", "status",
                "n_batch_sizes"]
        return f"{self!r}\n{self.frame[cols].to_string(index=False)}"

    def to_dict(self) -> dict[str, Any]:
        """The fields: the targets, their fits (None where not fitted), notes and steps
        tables, and the table's ``rows`` (records, derived from them)."""
        return {
            "metric_name": self.metric_name, "higher_is_better": self.higher_is_better,
            "unit": self.unit, "targets": list(self.targets),
            "fits": [None if f is None else f.to_dict() for f in self.fits],
            "notes": list(self.notes), "tables": [t.to_dict() for t in self.tables],
            "rows": self.frame.to_dict(orient="records"),
        }


Errors = Literal["raise", "report"]
"""What `critical_batch_curve` does with a target it cannot fit: raise, or report it."""


@removed_keywords(ci="level")
@validate_params(sweep=SWEEP, targets=FINITE, combine=Combine, level="level",
                 n_boot=INTEGER.within("n_boot"), errors=Errors, interval=IntervalMethod)
def critical_batch_curve(
    sweep: Any,
    targets: ArrayLike,
    *,
    combine: Combine = "mean",
    config: str | Sequence[str] = "learning_rate",
    level: float | None = None,
    n_boot: int = 1000,
    seed: int | np.random.Generator | None = 0,
    errors: Errors = "raise",
    progress: bool = False,
    interval: IntervalMethod = "profile",
    bounded: bool = False,
    unit: str | None = None,
) -> CriticalBatchCurve:
    r"""$B_{crit}$ as a function of the target: one `fit_tradeoff` per target.

    Parameters
    ----------
    sweep : Sweep or DataFrame
    targets : array_like
        Metric values to reach (finite).
    errors : {"raise", "report"}
        What to do with a target that fewer than 3 batch sizes reach
        (`NotEnoughBatchSizes`) or that some batch size meets at step 0
        (`TargetAtStart`): raise, or keep the row with NaN estimates and the reason in
        the ``note`` column. Only those failures are reported; a bad option raises at
        once either way.
    progress : bool
        Show a tqdm progress bar over targets.
    combine, config, level, n_boot, seed, interval, bounded, unit
        As in `steps_to_target` and `fit_tradeoff` (one
        ``numpy.random.Generator`` drives all targets).

    Returns
    -------
    CriticalBatchCurve
        The fits (``None`` for reported failures) and their table (``to_frame()``).
    """
    sweep = as_sweep(sweep)
    targets = as_array(targets, "targets", ndim=(0, 1)).reshape(-1)
    lvl = check_level(level)
    unit = sweep_unit(sweep, unit)
    p = prepare(sweep, config)
    rng = np.random.default_rng(seed)
    it: Any = targets
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(targets, desc="B_crit per target", unit="target")
    fits: list[TradeoffFit | None] = []
    notes: list[str] = []
    tables: list[StepsTable] = []
    for t in it:
        table = steps_table(p, float(t), combine, unit)
        fit, note = _fit_target(table, float(t), errors, level=lvl, n_boot=n_boot,
                                seed=rng, combine=combine, interval=interval,
                                bounded=bounded)
        fits.append(fit)
        notes.append(note)
        tables.append(table)
    return CriticalBatchCurve(
        targets=tuple(float(t) for t in targets), fits=tuple(fits), notes=tuple(notes),
        metric_name=sweep.metric_name, higher_is_better=sweep.higher_is_better,
        tables=tuple(tables), unit=unit,
    )


def _fit_target(table: StepsTable, t: float, errors: str,
                **options: Any) -> tuple[TradeoffFit | None, str]:
    """One target of `critical_batch_curve`: its fit (``None`` for a reported failure)
    and its note. ``options`` go to `fit_tradeoff`."""
    try:
        fit = fit_tradeoff(table, **options)
    except (NotEnoughBatchSizes, TargetAtStart) as exc:
        if errors == "raise":
            raise type(exc)(f"target {t:g}: {exc}") from None
        return None, str(exc)
    parts = [f"unreached: {list(fit.unreached_batch_sizes)}"] \
        if fit.unreached_batch_sizes else []
    if fit.status not in ("identified", "unknown"):  # why b_crit is NaN
        parts.insert(0, fit.b_crit_text())
    return fit, "; ".join(parts)


def _row(t: float, fit: TradeoffFit | None, note: str, table: StepsTable) -> dict[str, Any]:
    """The curve's row of target ``t`` (`CriticalBatchCurve.frame`)."""
    if fit is None:
        return {"target": t, "s_min": np.nan, "e_min": np.nan,
                "b_crit": np.nan, "b_crit_bound": np.nan, "b_crit_low": np.nan,
                "b_crit_high": np.nan,
                "n_batch_sizes": int(table.reached.sum()), "log_rmse": np.nan,
                "extrapolation": False, "status": "not fitted", "note": note}
    return {
        "target": t, **fit.determined(),
        "b_crit_low": fit.b_crit_interval.low, "b_crit_high": fit.b_crit_interval.high,
        "n_batch_sizes": fit.n_batch_sizes, "log_rmse": fit.log_rmse,
        "extrapolation": fit.extrapolation, "status": fit.status, "note": note,
    }


COLUMNS = ("target", "s_min", "e_min", "b_crit", "b_crit_low", "b_crit_high", "n_batch_sizes",
           "log_rmse", "extrapolation", "status", "note", "b_crit_bound")
"""The columns of `CriticalBatchCurve.frame`, in order (also when it has no rows)."""
