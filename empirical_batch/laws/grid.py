r"""Grids of training runs over model size $N$ and tokens $D$, in one schema.

A *grid* is the table a batch-size law is fitted to: for several cells $(N, D)$, runs
at several batch sizes (and learning rates). Two kinds are read:

``loss`` grids
    One row per run: ``n_params`` ($N$), ``tokens`` ($D$, the run's training tokens),
    ``batch_size``, ``learning_rate`` and the final (or smoothed) ``loss``. Per cell
    the best batch size $B_{opt}$ and learning rate $\eta_{opt}$ are read off
    (`empirical_batch.laws.optima`).
``steps`` grids
    One row per (cell, batch size): ``steps`` to a target loss with hyper-parameters
    tuned at that batch size. Per cell the critical batch
    $B_{crit} = E_{min}/S_{min}$ is fitted (eq. 2.11 of McCandlish et al. 2018).

Batch sizes are held in one unit, ``tokens`` or ``sequences`` (``examples`` for a
grid that is not a language model); a grid whose rows mix units is refused
(`empirical_batch.units.UnitMismatch`).

Layouts read by `load_grid`:

=================  ============================================================
layout             columns
=================  ============================================================
``steplaw``        Li et al. 2025's CSV: ``N``, ``D``, ``bs`` (sequences of
                   ``seq_len`` tokens, 2048 when the file has no ``seq_len``),
                   ``lr``, ``smooth loss``; ``bs`` is converted to tokens, as
                   their fitting code does
``plain``          ``n_params``, ``tokens``, ``batch_size``, ``learning_rate``,
                   ``loss`` (others through ``columns=`` aliases); the unit of
                   ``batch_size`` from a ``unit`` column or the ``unit=`` argument
``zhang``          Zhang et al. 2024's steps-to-target table: ``model``,
                   ``n_params``, ``batch_size`` (sequences of ``seq_len``
                   tokens), ``steps_to_target`` and the tokens of each model's
                   run, ``tokens`` or ``chinchilla_steps_at_bs256`` (tokens =
                   that × 256 × ``seq_len``, the Chinchilla budget of the model)
``batch_science``  Shallue et al. 2018's directory tree (see
                   `load_batch_science`)
=================  ============================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from .._validate import positive_float
from ..errors import DataError, InputError
from ..params import PATH_LIKE, instance_of, validate_params
from ..units import UnitMismatch, check_unit
from .schema import RunGrid, finish_grid, numeric_column

__all__ = ["LAYOUTS", "RunGrid", "load_grid"]

Layout = Literal["auto", "steplaw", "plain", "zhang", "batch_science"]
"""The table layouts `load_grid` reads (``"auto"``: told apart by their columns)."""
LAYOUTS = get_args(Layout)

LOSS_COLUMNS = ("n_params", "tokens", "batch_size", "learning_rate", "loss")
STEPS_COLUMNS = ("n_params", "tokens", "batch_size", "steps")

#: StepLaw's released CSV: their fitting code (``query_optimal_lr_bs_data``) multiplies
#: ``bs`` by ``seq_len`` (default 2048) to get tokens
STEPLAW_SEQ_LEN = 2048
_STEPLAW = {"N": "n_params", "D": "tokens", "bs": "batch_size", "lr": "learning_rate",
            "smooth loss": "loss"}


def _rename(frame: pd.DataFrame, aliases: Mapping[str, str] | None) -> pd.DataFrame:
    if not aliases:
        return frame
    for canonical, given in aliases.items():
        if canonical not in (*LOSS_COLUMNS, "steps", "unit", "cell"):
            raise InputError(f"column alias for unknown field {canonical!r}; fields are "
                             f"{[*list(LOSS_COLUMNS), 'steps', 'unit', 'cell']}")
        if given not in frame.columns:
            raise DataError(f"column {given!r} (given for {canonical!r}) not in the table; "
                            f"columns are {list(frame.columns)}")
    return frame.rename(columns={given: canonical for canonical, given in aliases.items()})


def _detect(frame: pd.DataFrame) -> Layout:
    cols = set(frame.columns)
    if {"N", "D", "bs", "lr"} <= cols:
        return "steplaw"
    if {"model", "batch_size", "steps_to_target"} <= cols:
        return "zhang"
    if {"batch_size"} <= cols and ({"loss", "learning_rate"} <= cols or "steps" in cols):
        return "plain"
    raise DataError("the table's layout is not recognised (StepLaw: N, D, bs, lr, smooth "
                    "loss; plain: n_params, tokens, batch_size, learning_rate, loss or steps; "
                    f"Zhang et al.: model, batch_size, steps_to_target); columns are "
                    f"{list(frame.columns)}")


def _unit_of(frame: pd.DataFrame, unit: str | None, where: str) -> str:
    if "unit" in frame.columns:
        units = {check_unit(u, f"{where}: unit column") for u in frame["unit"].dropna().unique()}
        if len(units) > 1:
            raise UnitMismatch(f"{where}: batch sizes in several units {sorted(units)}; a grid "
                               "holds one unit (convert with tokens per sequence first)")
        if len(units) == 1:
            u = units.pop()
            if unit is not None and check_unit(unit, "unit") != u:
                raise UnitMismatch(f"{where}: the unit column says {u!r} but unit={unit!r} "
                                   "was given")
            return u
    if unit is None:
        raise InputError(f"{where}: say the unit of batch_size (a 'unit' column, or "
                         "unit='tokens'/'sequences'/'examples'; --unit on the command line)")
    return check_unit(unit, "unit")


@validate_params(source=[PATH_LIKE, instance_of(pd.DataFrame, what="a pandas DataFrame")],
                 layout=Layout)
def load_grid(source: Any, *, layout: Layout = "auto", unit: str | None = None,
              columns: Mapping[str, str] | None = None, seq_len: float | None = None,
              target: float | None = None, metric: str | None = None,
              maximize: bool = False) -> RunGrid:
    """Read a grid of runs (a CSV path, a DataFrame, or a ``batch_science`` directory).

    Parameters
    ----------
    source : str, Path or pandas.DataFrame
    layout : {"auto", "steplaw", "plain", "zhang", "batch_science"}
        ``"auto"`` recognises the layout from the columns (a directory is read as
        ``batch_science``).
    unit : str, optional
        Unit of ``batch_size`` in the plain layout (when the table has no ``unit``
        column); the StepLaw and Zhang layouts are converted to tokens.
    columns : mapping, optional
        Aliases ``{field: column}`` for the plain layout, e.g.
        ``{"loss": "val_loss", "tokens": "D"}``.
    seq_len : float, optional
        Tokens per sequence where the file has no ``seq_len`` column (StepLaw: 2048).
    target, metric, maximize
        The ``batch_science`` layout: the objective column, its target and direction
        (see `load_batch_science`).
    """
    if not isinstance(source, pd.DataFrame) and Path(source).is_dir():
        if layout not in ("auto", "batch_science"):
            raise InputError(f"{source} is a directory: only the batch_science layout is one")
        from .batch_science import load_batch_science

        if target is None or metric is None:
            raise InputError("the batch_science layout needs the objective column (metric=, "
                             "--metric) and its target (target=, --target)")
        return load_batch_science(source, metric=metric, target=target, maximize=maximize)
    if layout == "batch_science":
        raise InputError(f"the batch_science layout is a directory; {source!r} is not one")
    if isinstance(source, pd.DataFrame):
        frame, where = source.copy(), "the table"
    else:  # a path (declared)
        from .._io import read_csv

        frame, where = read_csv(source), str(source)
    if layout == "auto":
        layout = _detect(_rename(frame, columns))
    if layout == "steplaw":
        return _steplaw(frame, where, seq_len)
    if layout == "zhang":
        return _zhang(frame, where, seq_len)
    return _plain(_rename(frame, columns), where, unit, seq_len)


def _require(frame: pd.DataFrame, cols: tuple[str, ...], where: str, layout: str) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise DataError(f"{where}: the {layout} layout needs columns {missing}; columns are "
                        f"{list(frame.columns)}")


def _seq_len(frame: pd.DataFrame, seq_len: float | None, default: float | None,
             where: str) -> np.ndarray | None:
    if "seq_len" in frame.columns:
        return numeric_column(frame, "seq_len", where)
    if seq_len is not None:
        seq_len = positive_float(seq_len, "seq_len")
        return np.full(len(frame), float(seq_len))
    return None if default is None else np.full(len(frame), float(default))


def _steplaw(frame: pd.DataFrame, where: str, seq_len: float | None) -> RunGrid:
    loss_col = "smooth loss" if "smooth loss" in frame.columns else "loss"
    _require(frame, ("N", "D", "bs", "lr", loss_col), where, "StepLaw")
    out = frame.rename(columns={k: v for k, v in _STEPLAW.items() if k != "smooth loss"})
    out = out.rename(columns={loss_col: "loss"})
    sl = _seq_len(frame, seq_len, STEPLAW_SEQ_LEN, where)
    assert sl is not None
    out["batch_size"] = numeric_column(out, "batch_size", where) * sl
    tps = float(sl[0]) if np.all(sl == sl[0]) else None
    return finish_grid(out, "loss", "tokens", tps, "steplaw", where)


def _zhang(frame: pd.DataFrame, where: str, seq_len: float | None) -> RunGrid:
    _require(frame, ("model", "batch_size", "steps_to_target"), where, "Zhang et al.")
    sl = _seq_len(frame, seq_len, None, where)
    if sl is None:
        raise DataError(f"{where}: no seq_len column; give seq_len (tokens per sequence) to "
                        "convert batch sizes to tokens")
    out = frame.rename(columns={"steps_to_target": "steps"}).copy()
    out["batch_size"] = numeric_column(out, "batch_size", where) * sl
    if "tokens" not in out.columns:
        if "chinchilla_steps_at_bs256" not in out.columns:
            raise DataError(f"{where}: the model's training tokens are needed: a 'tokens' "
                            "column or 'chinchilla_steps_at_bs256'")
        out["tokens"] = numeric_column(out, "chinchilla_steps_at_bs256", where) * 256 * sl
    out["cell"] = out["model"].astype(str)
    tps = float(sl[0]) if np.all(sl == sl[0]) else None
    return finish_grid(out, "steps", "tokens", tps, "zhang", where)


def _plain(frame: pd.DataFrame, where: str, unit: str | None,
           seq_len: float | None) -> RunGrid:
    kind = "steps" if "steps" in frame.columns and "loss" not in frame.columns else "loss"
    need = ("batch_size", "steps") if kind == "steps" else \
        ("batch_size", "learning_rate", "loss")
    _require(frame, need, where, "plain")
    if "n_params" not in frame.columns and "tokens" not in frame.columns:
        raise DataError(f"{where}: a grid needs n_params or tokens (or both) to fit a law "
                        f"over them; columns are {list(frame.columns)}")
    u = _unit_of(frame, unit, where)
    sl = _seq_len(frame, seq_len, None, where)
    tps = float(sl[0]) if sl is not None and np.all(sl == sl[0]) else None
    out = frame.drop(columns=["unit"]) if "unit" in frame.columns else frame
    return finish_grid(out, kind, u, tps, "plain", where)
