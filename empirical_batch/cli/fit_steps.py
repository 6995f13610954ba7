"""Steps-to-target tables for `empirical-batch fit`: recognise, check, group.

A steps-to-target table has a batch-size column (the sweep schema's names:
``batch_size``, ``bs``, ``global_bs`` ...) and a steps column (``steps_to_target``,
``steps``, ``num_steps`` ...; `empirical_batch.sweeps.STEPS_ALIASES`) and no metric
column; ``--column batch_size=SRC`` / ``--column steps=SRC`` name others. One row per
batch size, or one per seed. Rows of different experiments (models, targets) must not
be fitted as one: a column whose values split the table into several complete tables
over the same batch sizes is named and the table refused, unless ``--where`` keeps one
or ``--group-by`` fits each.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InputError
from ..sweeps import COLUMN_ALIASES, STEPS_ALIASES
from ..units import check_unit

__all__ = ["differing_columns", "steps_columns", "steps_frame", "unit_of"]

#: columns that name replicates of one configuration (combined, never a grouping)
REPLICATE_NAMES = ("seed", "replicate", "rep", *COLUMN_ALIASES["run"])


def _lookup(frame: pd.DataFrame, aliases, what: str, label: str) -> str | None:
    lowered: dict[str, list[str]] = {}
    for c in frame.columns:
        lowered.setdefault(str(c).lower(), []).append(str(c))
    found = [c for a in aliases for c in lowered.get(a, [])]
    if len(found) > 1:
        raise InputError(f"{label}: several columns could be {what}: {found}; pick one with "
                         f"--column {what}=NAME")
    return found[0] if found else None


def steps_columns(frame: pd.DataFrame, column_map: dict[str, str], label: str
                  ) -> tuple[str, str] | None:
    """(batch column, steps column) when ``frame`` is a steps-to-target table, else
    ``None`` (a sweep log: it has a metric column, or ``--column`` named a sweep column)."""
    for key, src in column_map.items():
        if src not in frame.columns:
            raise InputError(f"{label}: column {src!r} (given for {key!r}) not found; "
                             f"columns are {list(map(str, frame.columns))}")
    if {"run", "step", "metric", "learning_rate", "examples"} & set(column_map):
        return None
    if "steps" not in column_map and _lookup(frame, COLUMN_ALIASES["metric"], "metric",
                                             label) is not None:
        return None
    batch = column_map.get("batch_size") or _lookup(frame, COLUMN_ALIASES["batch_size"],
                                                    "batch_size", label)
    steps = column_map.get("steps") or _lookup(frame, STEPS_ALIASES, "steps", label)
    if batch is None or steps is None:
        return None
    return batch, steps


def steps_frame(frame: pd.DataFrame, batch: str, steps: str, label: str, *,
                fractional: bool) -> pd.DataFrame:
    """``batch_size`` and ``steps`` as floats, refusing values that are not batch sizes
    (> 0) or step counts (integers >= 1; fractional ones with ``fractional``)."""
    out = pd.DataFrame(index=frame.index)
    for src, dst in ((batch, "batch_size"), (steps, "steps")):
        raw = frame[src]
        num = pd.to_numeric(raw, errors="coerce")
        bad = num.isna() | ~np.isfinite(num.to_numpy(dtype=float, na_value=np.nan))
        if bad.any():
            i = bad.to_numpy().argmax()
            raise InputError(f"{label}, row {frame.index[i]}, column {src!r}: not a finite "
                             f"number: {raw.iloc[i]!r}")
        out[dst] = num.astype(float)
    b, s = out["batch_size"].to_numpy(), out["steps"].to_numpy()
    if np.any(b <= 0):
        i = int(np.argmax(b <= 0))
        raise InputError(f"{label}, row {frame.index[i]}, column {batch!r}: a batch size "
                         f"must be > 0, got {b[i]:g}")
    if np.any(s < 1):
        i = int(np.argmax(s < 1))
        raise InputError(f"{label}, row {frame.index[i]}, column {steps!r}: {s[i]:g} is not "
                         "a step count (steps to a target are >= 1); is this the right "
                         "column?")
    frac = s != np.round(s)
    if frac.any() and not fractional:
        i = int(np.argmax(frac))
        raise InputError(
            f"{label}, column {steps!r}: {int(frac.sum())} of {len(s)} values are not whole "
            f"steps (e.g. {s[i]:g} at row {frame.index[i]}): is this a loss or another "
            "quantity? Steps interpolated between logged points are fractional: pass "
            "--fractional-steps to fit them")
    return out


def differing_columns(frame: pd.DataFrame, batch: str, exclude=()) -> list[str]:
    """Columns whose values split ``frame`` into several tables over the same batch sizes.

    A column qualifies when it has >= 2 values, every value holds >= 2 rows at distinct
    batch sizes, and some batch size appears under two values: the rows then come from
    different experiments (model, target ...), not seeds. Replicate columns
    (`REPLICATE_NAMES`, or a name containing ``seed``) and ``exclude`` are not
    considered."""
    b = frame[batch]
    if not b.duplicated().any():
        return []
    out = []
    skip = {batch, *exclude}
    for c in frame.columns:
        if c in skip or str(c).lower() in REPLICATE_NAMES or "seed" in str(c).lower():
            continue
        col = frame[c].astype(str)
        if col.nunique() < 2:
            continue
        groups = b.groupby(col)
        if (groups.size() >= 2).all() and (groups.nunique() == groups.size()).all():
            out.append(str(c))
    return out


def unit_of(batch: str, unit: str | None) -> tuple[str, str]:
    """The unit of the batch column and how it was chosen: ``--unit``, else ``tokens``
    when the column's name says tokens, else ``examples``."""
    if unit is not None:
        return check_unit(unit, "--unit"), "--unit"
    if "token" in batch.lower():
        return "tokens", f"column {batch!r} counts tokens"
    return "examples", f"column {batch!r}; pass --unit sequences or tokens to say otherwise"
