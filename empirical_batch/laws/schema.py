"""The grid schema: `RunGrid`, the table every grid layout is read into (see
`empirical_batch.laws.grid` for the layouts)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from ..errors import DataError, InputError
from ..result import TableResult

__all__ = ["RunGrid"]


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class RunGrid(TableResult):
    """A grid of runs over $(N, D)$ (see the module's text).

    Attributes
    ----------
    frame : pandas.DataFrame
        ``loss`` grids: ``n_params``, ``tokens``, ``batch_size``, ``learning_rate``,
        ``loss``; ``steps`` grids: ``n_params``, ``tokens``, ``batch_size``,
        ``steps``; a ``cell`` label (``"N=…,D=…"`` or the model's name) and any
        extra columns. ``n_params`` or ``tokens`` is NaN where the source gives none.
    kind : str
        ``"loss"`` or ``"steps"``.
    unit : str
        Unit of ``batch_size``: ``"tokens"``, ``"sequences"`` or ``"examples"``.
    tokens_per_sequence : float or None
        Tokens per sequence where known (converts sequences and tokens).
    layout : str
        The layout the grid was read from.
    """

    kind: str = "loss"
    unit: str = "tokens"
    tokens_per_sequence: float | None = None
    layout: str = "plain"

    @property
    def n_cells(self) -> int:
        """Number of $(N, D)$ cells."""
        return int(self.frame["cell"].nunique())

    def __repr__(self) -> str:
        return (f"RunGrid({self.kind}, {len(self.frame)} rows, {self.n_cells} cells, "
                f"batch in {self.unit}, layout {self.layout!r})")


def _cell_label(n: float, d: float) -> str:
    parts = [f"N={n:.4g}" if math.isfinite(n) else "", f"D={d:.4g}" if math.isfinite(d) else ""]
    return ",".join(p for p in parts if p) or "all"


def numeric_column(frame: pd.DataFrame, col: str, where: str, *, positive: bool = True,
             allow_nan: bool = False, allow_inf: bool = False) -> np.ndarray:
    values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(values) if not allow_nan else np.zeros(len(values), bool)
    if not allow_inf:
        bad |= np.isinf(values)
    if bad.any():
        rows = np.flatnonzero(bad)[:5].tolist()
        raise DataError(f"{where}: column {col!r} has missing or non-numeric values at rows "
                        f"{rows}")
    if positive:
        finite = np.isfinite(values)
        nonpos = finite & (values <= 0)
        if nonpos.any():
            rows = np.flatnonzero(nonpos)[:5].tolist()
            raise InputError(f"{where}: column {col!r} must be > 0 (a model size, a token "
                             f"count and a batch size are positive); rows {rows} are not")
    return values


def finish_grid(frame: pd.DataFrame, kind: str, unit: str, tps: float | None,
            layout: str, where: str) -> RunGrid:
    frame = frame.copy()
    for col in ("n_params", "tokens"):
        if col not in frame.columns:
            frame[col] = np.nan
        frame[col] = numeric_column(frame, col, where, allow_nan=True)
    frame["batch_size"] = numeric_column(frame, "batch_size", where)
    if kind == "loss":
        frame["learning_rate"] = numeric_column(frame, "learning_rate", where)
        # diverged runs as inf (or NaN, read as diverged): they bound the grid, never win
        loss = pd.to_numeric(frame["loss"], errors="coerce").to_numpy(dtype=float)
        frame["loss"] = np.where(np.isnan(loss), np.inf, loss)
    else:
        frame["steps"] = numeric_column(frame, "steps", where, allow_inf=True)
    if "cell" not in frame.columns:
        frame["cell"] = [_cell_label(n, d) for n, d in zip(frame["n_params"], frame["tokens"],
                                                            strict=True)]
    if frame.empty:
        raise DataError(f"{where}: no rows")
    return RunGrid(frame=frame.reset_index(drop=True), kind=kind, unit=unit,
                   tokens_per_sequence=tps, layout=layout)
