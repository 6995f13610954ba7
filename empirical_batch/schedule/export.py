"""Batch schedules in the formats training frameworks read, and back.

* Megatron-LM's ``--step-batch-size-schedule``: space-separated ``START:BATCH`` pairs,
  ``START`` the samples (or tokens) consumed when the stage begins, written with an
  optional ``K``/``M``/``B``/``T`` suffix (thousands, millions, billions, trillions),
  the first at 0, e.g. ``"0:768 250B:1536"``. This is the syntax of the option's
  published description (its example above), not checked against Megatron-LM's
  argument parser; `parse_megatron` accepts exactly this syntax and refuses anything
  else.
* Levanter: a list of ``{"start": step, "value": batch_size}`` steps (its schedule of
  integer values by optimizer step).
* JSON and CSV of the stage table (written atomically).
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pandas as pd

from .._io import atomic_path, atomic_write_text
from ..errors import InputError
from .policies import BatchSchedule

__all__ = ["parse_megatron", "to_csv", "to_json", "to_levanter", "to_megatron"]

_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def _compact(n: int) -> str:
    for suffix in ("T", "B", "M", "K"):
        unit = _SUFFIX[suffix]
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def to_megatron(schedule: BatchSchedule, *, tokens_per_sample: int | None = None) -> str:
    """``--step-batch-size-schedule`` string: stage starts in samples, or in tokens with
    ``tokens_per_sample`` (the sequence length). Starts are rounded up to whole samples
    (the first is 0); stages that would start at the same sample keep the later one."""
    if tokens_per_sample is not None and (not isinstance(tokens_per_sample, int)
                                          or tokens_per_sample < 1):
        raise InputError(f"tokens_per_sample must be a positive integer, got "
                         f"{tokens_per_sample!r}")
    stages: dict[int, int] = {}
    for i, (start, batch) in enumerate(zip(schedule.stages["start_examples"],
                                           schedule.stages["batch_size"], strict=True)):
        n = 0 if i == 0 else math.ceil(start)
        stages[n * (tokens_per_sample or 1)] = int(batch)
    return " ".join(f"{_compact(n)}:{b}" for n, b in stages.items())


def parse_megatron(text: str) -> pd.DataFrame:
    """The stages of a ``--step-batch-size-schedule`` string: ``start``, ``batch_size``."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("the schedule string is empty")
    rows = []
    for item in text.split():
        m = re.fullmatch(r"(\d+)([KMBT]?):(\d+)", item)
        if m is None:
            raise InputError(f"not a START:BATCH pair: {item!r} (e.g. '250B:1536')")
        start = int(m[1]) * _SUFFIX[m[2]]
        batch = int(m[3])
        if batch < 1:
            raise InputError(f"batch size must be >= 1 in {item!r}")
        rows.append((start, batch))
    if rows[0][0] != 0:
        raise InputError(f"the first stage must start at 0, got {rows[0][0]}")
    starts = [r[0] for r in rows]
    if any(b <= a for a, b in itertools.pairwise(starts)):
        raise InputError(f"stage starts must increase strictly, got {starts}")
    return pd.DataFrame(rows, columns=["start", "batch_size"])


def to_levanter(schedule: BatchSchedule) -> list[dict]:
    """Levanter's schedule of batch sizes by optimizer step (whole steps)."""
    return [{"start": round(s), "value": int(b)}
            for s, b in zip(schedule.stages["start_step"], schedule.stages["batch_size"],
                            strict=True)]


def to_json(schedule: BatchSchedule, path) -> Path:
    """The schedule (stages, predictions, notes) as JSON, written atomically."""
    from ..result import dumps

    return atomic_write_text(path, dumps(schedule.to_dict()) + "\n")


def to_csv(schedule: BatchSchedule, path) -> Path:
    """The stage table as CSV, written atomically."""
    with atomic_path(path) as tmp:
        schedule.to_frame().to_csv(tmp, index=False)
    return Path(path)
