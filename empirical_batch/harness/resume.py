"""Resumable harness runs: finished work kept on disk, a time budget checked between units.

A harness run is cut into units that are written as soon as they finish, each
atomically (a temporary file renamed into place):

- the sweep's vmap groups (one batch size, `trainer.group_members`):
  ``OUT/sweeps/parts/TASK/OPTS-bB-KEY.csv``, the group's rows at full precision
  (read back bit for bit: pandas 3 parses floats exactly, older pandas is asked to
  with ``float_precision="round_trip"``);
- the analysis's training stages per task and optimizer (the reference run with its
  noise scales, the one-step experiment, branched training):
  ``OUT/cache/TASK/STAGE-OPT-KEY.pt`` (`torch.save`).

``KEY`` is a hash of everything the unit's result depends on (the task's options and
corpus, the runs, their step budget, the training mode; for the analysis stages the
stage's plan and the sweep rows it reads), so a unit of a changed plan is never
reused and units of different shards or configurations never collide. A rerun of the
same command reads the finished units instead of training them again; since a group's
rows depend only on the group, the sweep it assembles equals an uninterrupted run's
bit for bit (on the same device, dtype and thread count). The manifest records each
group file's rows and sha256 (``parts``, `part_record`): a file damaged since (cut
short, edited) is named and trained again, never read as it is.

`TimeBudget` stops a run cleanly between units: a unit is started only while the
budget has time left for it (its predicted time, from the units already trained in
this process: the seconds per step of the task's last group times the group's steps,
or the time of the last unit of the same analysis stage), otherwise `BudgetExhausted`
is raised and the pipeline reports what remains. A unit that was started runs to its
end, so a piece can overrun its budget by the misprediction of one unit (a group of
large batches costs more per step than the smaller batches before it): leave a margin
under a hard limit. The first unit of a piece always starts, so that every piece
makes progress.

The cache files hold pickled objects (`torch.load` with ``weights_only=False``): load
them only from folders you trust, as for any pickle.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from .._io import atomic_path
from ..errors import EmpiricalBatchError, EmpiricalBatchWarning, InputError, warn

__all__ = ["BudgetExhausted", "DamagedPart", "StageCache", "SweepParts", "TimeBudget", "cached",
           "digest", "part_record", "read_part", "stage_cache", "task_identity", "write_part"]

T = TypeVar("T")


class BudgetExhausted(EmpiricalBatchError):
    """The time budget ran out between two units; ``remaining`` names what is left."""

    def __init__(self, remaining: list[str]) -> None:
        self.remaining = list(remaining)
        super().__init__(f"time budget spent; {len(self.remaining)} unit(s) remain: "
                         + ", ".join(self.remaining[:5])
                         + (" …" if len(self.remaining) > 5 else ""))


@dataclass
class TimeBudget:
    """``seconds`` of wall time from ``start`` (`time.monotonic`); None: unlimited."""

    seconds: float | None = None
    start: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.seconds is not None and not (
            isinstance(self.seconds, int | float) and not isinstance(self.seconds, bool)
            and self.seconds > 0 and self.seconds != float("inf")
        ):
            raise InputError(f"--time-budget must be a finite number of seconds > 0, "
                             f"got {self.seconds!r}")

    def left(self) -> float:
        if self.seconds is None:
            return float("inf")
        return self.seconds - (time.monotonic() - self.start)

    #: units finished under this budget (the first unit of a piece always starts, so
    #: that every piece makes progress however small its budget)
    finished: int = 0

    def allows(self, predicted: float = 0.0) -> bool:
        """Is there time for a unit expected to take ``predicted`` seconds?"""
        if self.finished == 0:
            return True
        left = self.left()
        return left > 0 and predicted <= left

    def done(self) -> None:
        """Count a finished unit."""
        self.finished += 1


def digest(*parts: Any) -> str:
    """A short stable hash (16 hex digits) of JSON-able ``parts``."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def task_identity(task) -> dict:
    """What a task's results depend on: its name, options, data (a corpus's sha256) and
    dtype; not where its files lie (``text_path``) nor its device."""
    ident = {k: v for k, v in task.describe().items() if k != "text_path"}
    ident["dtype"] = str(task.dtype)
    return ident


def write_part(frame: pd.DataFrame, path: Path) -> Path:
    """A sweep group's rows, atomically, at full precision."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return path


#: pandas before 3 parses floats exactly only when asked (3 does by default and
#: deprecates the option)
_EXACT: dict = ({} if int(pd.__version__.split(".")[0]) >= 3
                else {"float_precision": "round_trip"})


class DamagedPart(InputError):
    """A finished part whose file no longer holds what its run recorded (rows, sha256)."""


def part_record(path: Path) -> dict:
    """What a finished part holds, as the manifest records it: its data rows and the
    sha256 of its bytes."""
    data = Path(path).read_bytes()
    rows = max(data.count(b"\n") - 1, 0) if data.endswith(b"\n") else data.count(b"\n")
    return {"rows": rows, "sha256": hashlib.sha256(data).hexdigest()}


def read_part(path: Path, columns: list[str], record: dict | None = None) -> pd.DataFrame:
    """The rows `write_part` wrote, bit for bit; a file with other columns is an error.

    With ``record`` (`part_record` of the file when it was written, from the run's
    manifest) a file that no longer matches it (cut short, edited) is `DamagedPart`,
    naming the file, the rows recorded and the rows found."""
    if record is not None:
        now = part_record(path)
        if now != {k: record.get(k) for k in now}:
            raise DamagedPart(f"{path}: damaged: the manifest recorded {record.get('rows')} "
                              f"rows (sha256 {str(record.get('sha256'))[:12]}...), the file "
                              f"holds {now['rows']} (sha256 {now['sha256'][:12]}...)")
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""], **_EXACT)
    if list(frame.columns) != list(columns):
        raise InputError(f"{path}: not a sweep group file of this harness (columns "
                         f"{list(frame.columns)}); remove it to train the group again")
    return frame


@dataclass(frozen=True)
class SweepParts:
    """Where a sweep's finished vmap groups are kept, and the run's bookkeeping of them.

    ``folder``: the group files (None: none kept); ``budget``: the `TimeBudget` a group
    is started under; ``files`` receives every group file read or written; ``guard(path)``
    is called before a group file is written; ``records`` maps a group file's name to
    its `part_record` (from the manifests of the runs that wrote it) and receives those
    of the files read or written.
    """

    folder: Path | None = None
    budget: TimeBudget | None = None
    files: list[Path] | None = None
    guard: Callable[[Path], None] | None = None
    records: dict[str, dict] | None = None

    def path(self, name: str) -> Path | None:
        """Where the group file ``name`` is kept (None without a folder)."""
        return None if self.folder is None else Path(self.folder) / name

    def read(self, path: Path | None, columns: list[str]) -> pd.DataFrame | None:
        """The finished group at ``path``; None when there is none, or when it no longer
        matches its record (`DamagedPart`, warned about: the group is trained again)."""
        if path is None or not path.is_file():
            return None
        try:
            frame = read_part(path, columns, (self.records or {}).get(path.name))
        except DamagedPart as exc:
            warn(f"{exc}; training the group again", EmpiricalBatchWarning)
            return None
        self._note(path, keep_record=True)
        return frame

    def write(self, frame: pd.DataFrame, path: Path | None) -> None:
        """Keep a finished group's rows at ``path`` (nothing without a folder)."""
        if path is None:
            return
        if self.guard is not None:
            self.guard(path)
        write_part(frame, path)
        self._note(path, keep_record=False)

    def _note(self, path: Path, *, keep_record: bool) -> None:
        if self.files is not None:
            self.files.append(path)
        if self.records is not None:
            if keep_record:
                self.records.setdefault(path.name, part_record(path))
            else:
                self.records[path.name] = part_record(path)


@dataclass
class StageCache:
    """Where the analysis's training stages keep their results, and the run's budget.

    ``files`` collects every cache file read or written (the manifest lists them);
    ``guard(path)`` is called before a file is written (the pipeline refuses to write
    over a file it does not own).
    """

    folder: Path
    budget: TimeBudget = field(default_factory=TimeBudget)
    files: list[Path] = field(default_factory=list)
    guard: Callable[[Path], None] | None = None
    #: seconds the last unit of each stage took in this process (the prediction)
    last: dict[str, float] = field(default_factory=dict)


_CACHE: contextvars.ContextVar[StageCache | None] = contextvars.ContextVar(
    "empirical_batch_harness_stage_cache", default=None)


@contextlib.contextmanager
def stage_cache(cache: StageCache) -> Iterator[StageCache]:
    """Within the block, `cached` units read and write under ``cache.folder``."""
    token = _CACHE.set(cache)
    try:
        yield cache
    finally:
        _CACHE.reset(token)


def cached(task: str, stage: str, name: str, key: Any, compute: Callable[[], T]) -> T:
    """``compute()``, or its result from the active `stage_cache` when one is kept.

    Outside a `stage_cache` block this is just ``compute()``. Inside: the result of
    ``(task, stage, name)`` for ``key`` is read from ``FOLDER/TASK/STAGE-NAME-HASH.pt``
    if present; otherwise the budget is checked (`BudgetExhausted` when no time is
    left for the stage's predicted time), ``compute()`` runs and its result is saved.
    """
    cache = _CACHE.get()
    if cache is None:
        return compute()
    import torch

    path = cache.folder / task / f"{stage}-{name}-{digest(task, stage, name, key)}.pt"
    if path.is_file():
        try:
            value = torch.load(path, weights_only=False)  # written by this harness (notes)
        except (ModuleNotFoundError, AttributeError) as exc:
            # pickled with a class at a path an earlier version of the library had
            warn(f"{path} holds a result saved by an earlier version of empirical_batch "
                 f"({exc}); it is computed again and replaced")
        else:
            cache.files.append(path)
            return value
    if not cache.budget.allows(cache.last.get(stage, 0.0)):
        raise BudgetExhausted([f"analysis: {stage} of {task}/{name} and what follows it"])
    t0 = time.monotonic()
    value = compute()
    cache.last[stage] = time.monotonic() - t0
    cache.budget.done()
    path.parent.mkdir(parents=True, exist_ok=True)
    if cache.guard is not None:
        cache.guard(path)
    with atomic_path(path) as tmp:
        torch.save(value, tmp)
    cache.files.append(path)
    return value
