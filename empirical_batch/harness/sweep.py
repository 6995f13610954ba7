"""Run a task's sweep and write it in the sweep schema; split it into shards.

Rows: ``run, batch_size, learning_rate, step, examples, metric`` (the evaluation
loss on the task's fixed evaluation set, logged at log-spaced steps) plus the
pass-through columns ``seed, optimizer, task``. The runs of a sweep are listed in
a fixed order (`SweepSpec.members`); shard ``i`` of ``n`` takes every n-th
run starting at i, so shards are balanced across batch sizes, independent of each
other (a run's result depends only on the run: its initialisation and data come
from its own seed), and their CSV files concatenate, through ``load_sweep``, into
the unsharded sweep.

Two ways to split (``split=``): ``"runs"`` (every n-th run, the default of
``--shard i/n``) and ``"groups"`` (whole vmap groups, see `group_shards`). Runs that
share a batch size are trained as one vmapped program (`group_members`), and the
float32 result of a run depends, at the level of round-off, on which other runs share
its program (the batched kernels sum in another order): ``"runs"`` shards reproduce
the unsharded sweep to about 2e-7 relative (measured on the ``tiny`` teacher–student
sweep), ``"groups"`` shards reproduce it bit for bit on the same device and thread
count. `run_sweep_distributed` (``harness/distribute.py``) uses ``"groups"``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pandas as pd

from .._io import atomic_path
from ..errors import EmpiricalBatchWarning, InputError, warn
from .config import SweepSpec
from .device import sync_device
from .resume import BudgetExhausted, SweepParts, digest, task_identity
from .tasks.base import Task
from .trainer import Member, StepBudget, group_members, log_steps, prefer_batched, train_group

COLUMNS = ["run", "batch_size", "learning_rate", "step", "examples", "metric",
           "seed", "optimizer", "task"]
_SHARD = re.compile(r"^(\d+)/(\d+)$")


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"i/n"`` → ``(i, n)`` with ``0 <= i < n``; None → ``(0, 1)``."""
    if text is None:
        return 0, 1
    match = _SHARD.match(str(text).strip())
    if not match:
        raise InputError(f"--shard must look like i/n (e.g. 0/4), got {text!r}")
    i, n = int(match[1]), int(match[2])
    if n < 1 or not 0 <= i < n:
        raise InputError(f"--shard i/n needs n >= 1 and 0 <= i < n, got {text!r}")
    return i, n


SPLITS = ("runs", "groups")


def shard_members(members: list[Member], shard: tuple[int, int], *, split: str = "runs",
                  budget: StepBudget | None = None, max_group: int | None = None
                  ) -> list[Member]:
    """The runs of shard ``shard = (i, n)``: every n-th run (``split="runs"``), or the
    i-th of `group_shards` (``split="groups"``, which needs the step ``budget``)."""
    i, n = shard
    if split == "runs":
        return members[i::n]
    if split != "groups":
        raise InputError(f"split must be one of {SPLITS}, got {split!r}")
    if budget is None:
        raise InputError("split='groups' needs the step budget (it balances shards by run-steps)")
    return group_shards(members, budget, n, max_group)[i]


def group_shards(members: list[Member], budget: StepBudget, n: int,
                 max_group: int | None = None) -> list[list[Member]]:
    """``members`` in ``n`` shards made of whole vmap groups, balanced by run-steps.

    The groups are those `train_grid` trains as one program (`group_members`: one
    batch size, cut to ``max_group``). Each group costs
    ``steps(B) × runs`` run-steps; groups are placed largest first on the least-loaded
    shard (ties: the earlier group, the lower shard), a deterministic rule. Inside a
    shard runs keep their order in ``members``, so `train_grid` forms exactly the
    groups of the unsharded sweep and every run's result is bit for bit the same.
    Shards beyond the number of groups are empty.
    """
    if not isinstance(n, int) or n < 1:
        raise InputError(f"the number of shards must be an integer >= 1, got {n!r}")
    position = {m: k for k, m in enumerate(members)}
    groups = group_members(members, max_group)
    cost = [budget.steps(g[0].batch_size) * len(g) for g in groups]
    load = [0] * n
    bins: list[list[Member]] = [[] for _ in range(n)]
    for k in sorted(range(len(groups)), key=lambda k: (-cost[k], k)):
        j = min(range(n), key=lambda j: (load[j], j))
        load[j] += cost[k]
        bins[j] += groups[k]
    return [sorted(b, key=position.__getitem__) for b in bins]


def run_sweep(
    task: Task,
    spec: SweepSpec,
    *,
    shard: tuple[int, int] = (0, 1),
    split: str = "runs",
    batched: bool | None = None,
    max_group: int | None = None,
    progress: bool = False,
    parts: str | Path | SweepParts | None = None,
) -> pd.DataFrame:
    """Train this shard's runs of ``spec`` on ``task``; a DataFrame in the sweep schema.

    Rows sorted by `ROW_ORDER` (optimizer, batch size, learning rate, seed, step), so
    the shards of a sweep, concatenated and sorted the same way (`merge_shards`), give
    the rows of the unsharded sweep in the same order. ``split`` chooses the runs of
    a shard (`shard_members`); ``batched`` the training mode of every group (None: by
    `empirical_batch.harness.trainer.prefer_batched`).

    With ``parts`` (a folder, or a `SweepParts` with the run's bookkeeping), each vmap
    group's rows are written there as soon as the group finishes
    (`empirical_batch.harness.resume`) and a group already there is read instead of
    trained: a rerun after an interruption trains only what is missing and returns the
    same frame, bit for bit, as an uninterrupted run. With a ``parts.budget``
    (`TimeBudget`), a group is started only while there is time for it;
    `BudgetExhausted` (listing the groups left) is raised otherwise, after every
    finished group has been written. A group file that no longer matches its record in
    ``parts.records`` (cut short, edited) is trained again, with an
    `EmpiricalBatchWarning` naming it; a file no manifest records is read as it is.
    """
    store = parts if isinstance(parts, SweepParts) else SweepParts(
        None if parts is None else Path(parts))
    members = shard_members(spec.members(), shard, split=split, budget=spec.budget,
                            max_group=max_group)
    groups = group_members(members, max_group)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(spec.budget.steps(m.batch_size) for m in members),
                   desc=task.name, unit="run-step", leave=False)

    def path_of(group: list[Member]) -> Path | None:
        mode = prefer_batched(task, group) if batched is None else batched
        return store.path(group_file_name(task, group, spec.budget, mode))

    frames, per_step = [], 0.0
    try:
        for k, group in enumerate(groups):
            steps = spec.budget.steps(group[0].batch_size)
            path = path_of(group)
            kept = store.read(path, COLUMNS)
            if kept is not None:
                frames.append(kept)
                if bar is not None:
                    bar.update(steps * len(group))
                continue
            if store.budget is not None and not store.budget.allows(per_step * steps):
                raise BudgetExhausted([
                    describe_group(task, g, spec.budget) for j, g in enumerate(groups[k:])
                    if j == 0 or (p := path_of(g)) is None or not p.is_file()])
            t0 = time.monotonic()
            mode = prefer_batched(task, group) if batched is None else batched
            rows = train_group(task, group, spec.budget, batched=mode, progress=bar)
            sync_device(task.device)
            per_step = (time.monotonic() - t0) / steps
            if store.budget is not None:
                store.budget.done()
            frame = pd.DataFrame(rows, columns=COLUMNS)
            store.write(frame, path)
            frames.append(frame)
    finally:
        if bar is not None:
            bar.close()
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    return _sorted(pd.concat(frames, ignore_index=True))


def group_file_name(task: Task, group: list[Member], budget: StepBudget, batched: bool) -> str:
    """``OPTS-bB-KEY.csv`` (OPTS: the group's optimizers, e.g. ``adam+sgd``): KEY hashes
    what the group's rows depend on (the task's options and data, dtype, runs, step
    budget, training mode)."""
    m = group[0]
    key = digest(task_identity(task), [g.run for g in group], budget.steps(m.batch_size),
                 log_steps(budget.steps(m.batch_size), budget.n_log), bool(batched))
    return f"{_optimizers(group)}-b{m.batch_size}-{key}.csv"


def _optimizers(group: list[Member]) -> str:
    return "+".join(sorted({g.optimizer for g in group}))


def describe_group(task: Task, group: list[Member], budget: StepBudget) -> str:
    m = group[0]
    return (f"{task.name}/{_optimizers(group)} B={m.batch_size} ({len(group)} runs × "
            f"{budget.steps(m.batch_size)} steps)")


def parts_folder(out_dir: str | Path, task: str) -> Path:
    """``OUT/sweeps/parts/TASK``: where a sweep's finished groups are kept."""
    return Path(out_dir) / "sweeps" / "parts" / task


#: the row order of every sweep frame (a run is fixed by its first four keys)
ROW_ORDER = ["optimizer", "batch_size", "learning_rate", "seed", "step"]


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(ROW_ORDER, kind="stable").reset_index(drop=True)


def merge_shards(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The shard frames of one sweep as one frame in `ROW_ORDER` (the unsharded order).

    A run that appears in two frames is an error (the frames come from overlapping
    shards or from two sweeps).
    """
    if not frames:
        raise InputError("merge_shards needs at least one shard frame")
    full = [f for f in frames if len(f)] or frames[:1]  # an empty frame would change dtypes
    frame = _sorted(pd.concat(full, ignore_index=True))
    twice = frame.duplicated(["run", "step"])
    if twice.any():
        run = frame.loc[twice, "run"].iloc[0]
        raise InputError(f"run {run!r} appears in more than one shard: the shards overlap "
                         "or come from different sweeps")
    return frame


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
            raise InputError(f"{p}: not a shard file name (expected <task>.shard-i-of-n.csv)")
        found[(int(m[1]), int(m[2]))] = p
    counts = {n for _, n in found}
    if len(counts) != 1:
        raise InputError(f"shard files of task {task!r} under {folder} mix shard counts "
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
            warn(f"task {task!r}: using {whole.name}; {why}, so the shard files "
                          "beside it are ignored", EmpiricalBatchWarning)
            return [whole]
        warn(f"task {task!r}: using the {n} shard files, newer than {whole.name}",
                      EmpiricalBatchWarning)
    return files


def load_sweeps(paths):
    """The sweep files ``paths`` (e.g. `sweep_files`), each read and validated by
    `empirical_batch.load_sweep`, concatenated and validated again as one sweep of the
    evaluation loss."""
    from empirical_batch import load_sweep

    parts = [load_sweep(p).to_frame() for p in paths]
    return load_sweep(pd.concat(parts, ignore_index=True), metric_name="eval_loss")
