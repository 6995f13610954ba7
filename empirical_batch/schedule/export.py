"""Batch schedules in the formats training frameworks read, and back.

* Megatron-LM's ``--step-batch-size-schedule``: ``THRESHOLD:BATCH`` entries separated by
  spaces or commas, ``THRESHOLD`` the samples (or, with the sequence length set, tokens)
  consumed when the stage begins, e.g. ``"0:768 250B:1536 500B:3072"``. `parse_megatron`
  reads it as Megatron-core's ``StepBatchsizeNumMicroBatchesCalculator`` does
  (``megatron/core/num_microbatches_calculator.py``): either number may carry a ``K``,
  ``M``, ``B`` or ``T`` suffix in either case (10^3 … 10^12) and be a decimal, read as
  ``int(float(number) * multiplier)``; tokens become samples by floor division by the
  sequence length; entries are sorted by threshold, the first must be 0, thresholds must
  then increase strictly and batch sizes be positive. `to_megatron` writes the canonical
  form (space-separated, integer thresholds with the largest exact suffix).
* Levanter: a list of ``{"start": step, "value": batch_size}`` steps (its schedule of
  integer values by optimizer step).
* JSON and CSV of the stage table (written atomically).
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import pandas as pd

from .._io import atomic_path, atomic_write_text
from .._validate import check_count
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
    if tokens_per_sample is not None:
        tokens_per_sample = check_count(tokens_per_sample, "tokens_per_sample", 1)
    stages: dict[int, int] = {}
    for i, (start, batch) in enumerate(zip(schedule.stages["start_examples"],
                                           schedule.stages["batch_size"], strict=True)):
        n = 0 if i == 0 else math.ceil(start)
        stages[n * (tokens_per_sample or 1)] = int(batch)
    return " ".join(f"{_compact(n)}:{b}" for n, b in stages.items())


def _megatron_number(text: str, entry: str) -> int:
    """One number of a schedule entry: a decimal with an optional K/M/B/T suffix (any
    case), ``int(float(number) * multiplier)`` as Megatron-core computes it."""
    t = text.strip().upper()
    mult = _SUFFIX.get(t[-1:], 1) if t[-1:].isalpha() else 1
    body = t[:-1] if mult != 1 else t
    try:
        value = float(body) * mult
    except ValueError:
        raise InputError(f"not a number in schedule entry {entry!r}: {text!r} (a decimal with "
                         "an optional K, M, B or T suffix, e.g. '250B' or '1.5T')") from None
    if not math.isfinite(value):
        raise InputError(f"not a finite number in schedule entry {entry!r}: {text!r}")
    return int(value)


def parse_megatron(text: str, *, tokens_per_sample: int | None = None) -> pd.DataFrame:
    """The stages of a ``--step-batch-size-schedule`` string, as Megatron reads it.

    Parameters
    ----------
    text : str
        ``THRESHOLD:BATCH`` entries separated by spaces or commas, in any order; either
        number may be a decimal and carry a ``K``/``M``/``B``/``T`` suffix (any case).
    tokens_per_sample : int, optional
        The sequence length, when the thresholds are tokens (Megatron's ``seq_length``):
        each becomes ``threshold // tokens_per_sample`` samples.

    Returns
    -------
    pandas.DataFrame
        ``start`` (samples, or the thresholds as written without ``tokens_per_sample``)
        and ``batch_size``, sorted by ``start``.

    >>> parse_megatron("0:768, 250b:1536 1.5T:3072").values.tolist()
    [[0, 768], [250000000000, 1536], [1500000000000, 3072]]
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError("the schedule string is empty")
    if tokens_per_sample is not None:
        tokens_per_sample = check_count(tokens_per_sample, "tokens_per_sample", 1)
    rows = []
    for entry in text.replace(",", " ").split():
        if ":" not in entry:
            raise InputError(f"not a THRESHOLD:BATCH entry: {entry!r} (e.g. '250B:1536')")
        left, right = entry.split(":", 1)
        start, batch = _megatron_number(left, entry), _megatron_number(right, entry)
        if tokens_per_sample is not None:
            start //= int(tokens_per_sample)
        if batch < 1:
            raise InputError(f"batch size must be >= 1 in {entry!r}, got {batch}")
        rows.append((start, batch))
    rows.sort(key=lambda r: r[0])
    if rows[0][0] != 0:
        raise InputError(f"the first stage must start at 0, got {rows[0][0]}")
    starts = [r[0] for r in rows]
    if any(b <= a for a, b in itertools.pairwise(starts)):
        raise InputError(f"stage thresholds must increase strictly once sorted, got {starts}")
    return pd.DataFrame(rows, columns=["start", "batch_size"])


def to_levanter(schedule: BatchSchedule) -> list[dict[str, int]]:
    """Levanter's schedule of batch sizes by optimizer step (whole steps)."""
    return [{"start": round(s), "value": int(b)}
            for s, b in zip(schedule.stages["start_step"], schedule.stages["batch_size"],
                            strict=True)]


def to_json(schedule: BatchSchedule, path: str | os.PathLike[str]) -> Path:
    """The schedule (stages, predictions, notes) as JSON, written atomically."""
    from ..result import dumps

    return atomic_write_text(path, dumps(schedule.to_dict()) + "\n")


def to_csv(schedule: BatchSchedule, path: str | os.PathLike[str]) -> Path:
    """The stage table as CSV, written atomically."""
    with atomic_path(path) as tmp:
        schedule.to_frame().to_csv(tmp, index=False)
    return Path(path)
