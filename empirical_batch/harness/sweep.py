"""Run a task's sweep and write it in the sweep schema; split it into shards.

Rows: ``run, batch_size, learning_rate, step, examples, metric`` (the evaluation
loss on the task's fixed evaluation set, logged at log-spaced steps) plus the
pass-through columns ``seed, optimizer, task``. The runs of a sweep are listed in
a fixed order (`SweepSpec.members`); shard ``i`` of ``n`` takes every n-th
run starting at i, so shards are balanced across batch sizes, independent of each
other (a run's result depends only on the run: its initialisation and data come
from its own seed), and their CSV files concatenate, through ``load_sweep``, into
the unsharded sweep.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from .._io import atomic_path
from .config import SweepSpec
from .tasks.base import Task
from .trainer import Member, train_grid

COLUMNS = ["run", "batch_size", "learning_rate", "step", "examples", "metric",
           "seed", "optimizer", "task"]
_SHARD = re.compile(r"^(\d+)/(\d+)$")


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"i/n"`` → ``(i, n)`` with ``0 <= i < n``; None → ``(0, 1)``."""
    if text is None:
        return 0, 1
    match = _SHARD.match(str(text).strip())
    if not match:
        raise ValueError(f"--shard must look like i/n (e.g. 0/4), got {text!r}")
    i, n = int(match[1]), int(match[2])
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"--shard i/n needs n >= 1 and 0 <= i < n, got {text!r}")
    return i, n


def shard_members(members: list[Member], shard: tuple[int, int]) -> list[Member]:
    i, n = shard
    return members[i::n]


def run_sweep(
    task: Task,
    spec: SweepSpec,
    *,
    shard: tuple[int, int] = (0, 1),
    batched: bool = True,
    max_group: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Train this shard's runs of ``spec`` on ``task``; a DataFrame in the sweep schema."""
    members = shard_members(spec.members(), shard)
    rows = train_grid(task, members, spec.budget, batched=batched, max_group=max_group,
                      progress=progress)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values(["optimizer", "batch_size", "learning_rate", "seed", "step"],
                             kind="stable").reset_index(drop=True)


def sweep_path(out_dir: str | Path, task: str, shard: tuple[int, int] = (0, 1)) -> Path:
    """``OUT/sweeps/TASK.csv``, or ``OUT/sweeps/TASK.shard-I-of-N.csv`` for a shard."""
    i, n = shard
    name = f"{task}.csv" if n == 1 else f"{task}.shard-{i}-of-{n}.csv"
    return Path(out_dir) / "sweeps" / name


def write_sweep(frame: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:  # an interrupted run leaves no valid-looking prefix
        frame.to_csv(tmp, index=False, float_format="%.7g")
    return path


def sweep_files(out_dir: str | Path, task: str) -> list[Path]:
    """The sweep files of ``task``: its unsharded file, or a complete set of shard files.

    ``.csv`` or gzip-compressed ``.csv.gz`` (as committed under ``data/harness``). Shard
    sets of different shard counts are never mixed (an error). When both an unsharded
    file and a complete shard set exist, the newer is used and a warning says which and
    why (a stale whole-sweep file must not hide fresh shards, nor the reverse).
    """
    import warnings

    folder = Path(out_dir) / "sweeps"
    whole = next((w for w in (folder / f"{task}.csv", folder / f"{task}.csv.gz")
                  if w.exists()), None)
    shards = sorted(folder.glob(f"{task}.shard-*-of-*.csv*"))
    if not shards:
        if whole is None:
            raise FileNotFoundError(f"no sweep for task {task!r} under {folder}")
        return [whole]
    found = {}
    for p in shards:
        m = re.search(r"shard-(\d+)-of-(\d+)\.csv(\.gz)?$", p.name)
        if m is None:
            raise ValueError(f"{p}: not a shard file name (expected <task>.shard-i-of-n.csv)")
        found[(int(m[1]), int(m[2]))] = p
    counts = {n for _, n in found}
    if len(counts) != 1:
        raise ValueError(f"shard files of task {task!r} under {folder} mix shard counts "
                         f"{sorted(counts)}: they come from different sweeps")
    n = counts.pop()
    missing = [i for i in range(n) if (i, n) not in found]
    if missing and whole is None:
        raise FileNotFoundError(
            f"task {task!r}: shard(s) {missing} of {n} missing under {folder}"
        )
    files = [found[(i, n)] for i in range(n) if (i, n) in found]
    if whole is not None:
        newest_shard = max(p.stat().st_mtime for p in files)
        if missing or newest_shard <= whole.stat().st_mtime:
            why = "the shard set is incomplete" if missing else "the shard files are older"
            warnings.warn(f"task {task!r}: using {whole.name}; {why}, so the shard files "
                          "beside it are ignored", stacklevel=2)
            return [whole]
        warnings.warn(f"task {task!r}: using the {n} shard files, newer than {whole.name}",
                      stacklevel=2)
    return files
