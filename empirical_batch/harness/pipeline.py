"""The whole harness for one configuration: sweeps, noise scales, one-step experiment, report.

Stages: ``sweep`` (train this shard's runs, write ``OUT/sweeps/TASK[.shard-i-of-n].csv``;
with an ``executor``, all shards of the sweep through it, see ``distribute``)
and ``analyze`` (read the complete sweep of each task back, measure the noise
scales and the one-step experiment on reference runs, fit B_crit and write the
report); ``all`` does both. ``report`` redoes only what depends on the targets from
the sweeps and the measured tables an earlier ``analyze`` left in ``OUT/results``: no
training, so no GPU. ``OUT/manifest.json`` records the configuration, the library
and torch versions, the device and wall times.

The engine trains; what is made of its sweeps is an `Analysis` passed in by its user
(the validation study, `empirical_batch.validation.study.run_study`, which is what
``empirical-batch harness`` runs). The engine never imports the study: without an
``analysis`` it runs the ``sweep`` stage only.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from .._io import atomic_write_text
from ..errors import InputError
from .config import HarnessConfig
from .device import device_name, sync_device, use_device
from .distribute import run_sweep_distributed
from .files import FileGuard, harness_manifests, listed_paths, remove_owned
from .options import HarnessOptions
from .resume import BudgetExhausted, StageCache, SweepParts, TimeBudget, stage_cache
from .sweep import parts_folder, run_sweep, sweep_path, write_sweep
from .threads import restores_torch_threads


class Analysis(Protocol):
    """What the engine's ``analyze`` and ``report`` stages run (the validation study,
    `empirical_batch.validation.study.STUDY`, is one); each returns the files it wrote.

    Both run inside the engine's `stage_cache` (``OUT/cache``): their units — the
    reference runs, one-step and branched training, and whatever the analysis keeps
    there itself (the study's fits per task) — are cached and budgeted;
    ``planned_files`` names the files of fixed name the stages write, so that the
    engine can refuse, before any training, to write over a file it does not own.
    """

    def analyze(self, config: HarnessConfig, out: Path, *, device: torch.device,
                progress: bool, timings: dict) -> list[Path]: ...

    def report(self, config: HarnessConfig, out: Path, *, timings: dict) -> list[Path]: ...

    def planned_files(self, config: HarnessConfig, out: Path) -> list[Path]: ...


@dataclass
class HarnessRun:
    out: Path
    config: str
    device: str
    stage: str
    shard: tuple[int, int]
    wall_s: dict = field(default_factory=dict)
    files: list = field(default_factory=list)
    executor: str | None = None
    split: str = "runs"
    #: with an executor: per task, where and how long each shard ran
    shards: dict = field(default_factory=dict)
    #: False when the time budget stopped the run; ``remaining`` then says what is left
    complete: bool = True
    remaining: list = field(default_factory=list)
    time_budget: float | None = None
    #: per sweep group file (by name): its rows and sha256 when written (`part_record`),
    #: so that a resumed run retrains a file damaged since
    parts: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "config": self.config, "device": self.device, "stage": self.stage,
            "shard": f"{self.shard[0]}/{self.shard[1]}", "split": self.split,
            "executor": self.executor, "shards": self.shards,
            "time_budget_s": self.time_budget, "complete": self.complete,
            "remaining": self.remaining,
            "wall_s": self.wall_s, "files": _relative(self.out, self.files),
            "parts": dict(sorted(self.parts.items())),
        }


def _relative(out: Path, files) -> list[str]:
    root = out.resolve()
    rel = []
    for f in files:
        p = Path(f).resolve()
        try:
            rel.append(p.relative_to(root).as_posix())
        except ValueError:
            rel.append(str(f))
    return list(dict.fromkeys(rel))


@restores_torch_threads
def run_harness(
    config: HarnessConfig,
    out: str | Path,
    *,
    stage: str = "all",
    shard: tuple[int, int] = (0, 1),
    device: str | torch.device = "auto",
    progress: bool = True,
    command: str | None = None,
    threads: int | None = None,
    overwrite: bool = False,
    executor: Executor | None = None,
    split: str = "runs",
    time_budget: float | None = None,
    analysis: Analysis | None = None,
) -> HarnessRun:
    """Run ``stage`` of the harness for every task of ``config``; outputs under ``out``.

    With ``executor`` (any `concurrent.futures.Executor`, e.g. from
    `empirical_batch.harness.distribute.open_executor`), the sweep stage sends each
    task's shards through it (`run_sweep_distributed`: whole vmap groups, rebuilt in
    the workers on ``device``, the string as given, so ``auto`` is resolved by each
    worker) and writes the unsharded sweep file, equal to the sequential run's.

    ``split`` chooses the runs of a ``shard`` (`empirical_batch.harness.sweep.shard_members`):
    ``runs`` (every n-th run) or ``groups`` (whole vmap groups: the merged shards equal
    the unsharded sweep bit for bit; a shard that would hold no run is an error).

    **Resuming.** Without an executor every finished unit is on disk as soon as it
    finishes: each vmap group of a sweep (``OUT/sweeps/parts/TASK/``) and, per task and
    optimizer, the reference run, the one-step experiment and branched training
    (``OUT/cache/TASK/``; `empirical_batch.harness.resume`). Running the same call again
    reuses them and trains only what is missing; the sweep equals an uninterrupted
    run's bit for bit. ``time_budget`` (seconds) stops the run cleanly between units
    when the next one would not fit: the result then has ``complete=False`` and
    ``remaining`` (what is left), the manifest says so, and the same call continues.

    **Files.** An output folder that holds another configuration's results (its
    manifests name a different configuration) is refused unless ``overwrite=True``,
    which removes the files those manifests list (`empirical_batch.harness.files`);
    results of two sweeps are never mixed. A folder from the same configuration is
    reused (a resumed or sharded run, or the analysis of existing sweeps). A file the
    run would write that no harness manifest lists (a user's own ``report.md``) is
    refused, with or without ``overwrite``: the harness never writes over a file it did
    not write, and never removes one. Every manifest lists every file its run wrote or
    reused, relative to ``out``.

    ``analysis`` is what the ``analyze``, ``report`` and ``all`` stages run after the
    sweep (see `Analysis`); without one only the ``sweep`` stage runs.

    ``threads`` sets torch's CPU threads for the call (default: 1 on the CPU, where the
    tiny models of the harness lose more to intra-op threading than they gain; unchanged
    on CUDA); the caller's setting is restored when it returns.

    The keywords become one frozen `empirical_batch.harness.options.HarnessOptions`,
    checked when it is made (before any file is touched) and passed to the stages.
    """
    options = HarnessOptions(stage=stage, shard=shard, device=device, progress=progress,
                             command=command, threads=threads, overwrite=overwrite,
                             executor=executor, split=split, time_budget=time_budget,
                             analysis=analysis)
    return _run(config, Path(out), options)


def _run(config: HarnessConfig, out: Path, opts: HarnessOptions) -> HarnessRun:
    """`run_harness` with its options checked and made one object."""
    budget = TimeBudget(opts.time_budget)
    opts.check_shards(config)
    dev = use_device(opts.device, opts.threads)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file, not a folder")
    _check_folder(out, config, opts.overwrite)
    guard = FileGuard.for_folder(out)
    guard.check_all(_planned_files(out, config, opts.stage, opts.shard, opts.analysis))
    out.mkdir(parents=True, exist_ok=True)
    run = HarnessRun(out, config.name, str(dev), opts.stage, opts.shard,
                     executor=None if opts.executor is None else _describe(opts.executor),
                     split=opts.split_used, time_budget=opts.time_budget)
    t_all = time.perf_counter()
    try:
        if opts.stage in ("all", "sweep"):
            _sweep_stage(run, config, opts, dev, budget, guard)
        if opts.stage in ("all", "analyze", "report"):
            _analysis_stage(run, config, opts, dev, budget, guard)
    except BudgetExhausted as stop:
        run.complete = False
        run.remaining = stop.remaining
        if opts.stage == "all" and not any(r.startswith("analysis") for r in run.remaining):
            run.remaining.append("analysis (noise scales, one-step, branched, fits, report)")
    run.wall_s["total"] = round(time.perf_counter() - t_all, 2)
    _write_manifest(run, config, opts.command, guard)
    return run


def _analysis_stage(run: HarnessRun, config: HarnessConfig, opts: HarnessOptions,
                    dev: torch.device, budget: TimeBudget, guard: FileGuard) -> None:
    """The ``analyze`` stage (``all`` included), or the ``report`` stage alone: the
    analysis passed in, inside the stage cache of ``OUT/cache``."""
    assert opts.analysis is not None
    which = "report" if opts.stage == "report" else "analyze"
    t0 = time.perf_counter()
    cache = StageCache(run.out / "cache", budget, guard=guard.check)
    try:
        with stage_cache(cache):
            if which == "report":
                run.files += opts.analysis.report(config, run.out, timings=run.wall_s)
            else:
                run.files += opts.analysis.analyze(config, run.out, device=dev,
                                                   progress=opts.progress,
                                                   timings=run.wall_s)
    finally:
        run.files += cache.files
    run.wall_s[which] = round(time.perf_counter() - t0, 2)


def _sweep_stage(run: HarnessRun, config: HarnessConfig, opts: HarnessOptions,
                 dev: torch.device, budget: TimeBudget, guard: FileGuard) -> None:
    out = run.out
    for k, plan in enumerate(config.plans):
        t0 = time.perf_counter()
        if opts.executor is not None:  # the device as given: each worker resolves it
            log: list[dict] = []
            frame = run_sweep_distributed(
                plan.task, plan.sweep, opts.executor, options=plan.options,
                device=opts.device if isinstance(opts.device, str) else str(dev),
                threads=opts.threads, progress=opts.progress, log=log)
            run.shards[plan.task] = log
        else:
            task = plan.make_task().to(dev)
            try:
                if not run.parts:  # what the earlier pieces' manifests recorded
                    for m in harness_manifests(out):
                        if isinstance(m.data.get("parts"), dict):
                            run.parts.update(m.data["parts"])
                parts = SweepParts(parts_folder(out, plan.task), budget, run.files,
                                   guard.check, run.parts)
                frame = run_sweep(task, plan.sweep, shard=opts.shard, split=opts.split,
                                  progress=opts.progress, parts=parts)
            except BudgetExhausted as stop:
                run.wall_s[f"sweep/{plan.task}"] = round(time.perf_counter() - t0, 2)
                later = [f"{p.task}: the whole sweep" for p in config.plans[k + 1:]]
                raise BudgetExhausted(stop.remaining + later) from None
            sync_device(dev)
        run.wall_s[f"sweep/{plan.task}"] = round(time.perf_counter() - t0, 2)
        path = sweep_path(out, plan.task, opts.shard)
        guard.check(path)
        run.files.append(write_sweep(frame, path))
        guard.claim(path)


def _planned_files(out: Path, config: HarnessConfig, stage: str,
                   shard: tuple[int, int], analysis: Analysis | None) -> list[Path]:
    """The files of fixed name the stage will write (checked before any training)."""
    files = [out / _manifest_name(stage, shard)]
    if stage in ("all", "sweep"):
        files += [sweep_path(out, p.task, shard) for p in config.plans]
    if stage in ("all", "analyze", "report") and analysis is not None:
        files += analysis.planned_files(config, out)
    return files


#: what a folder of harness results holds besides manifests (sweeps copied from
#: elsewhere, without their manifest, are analysed; files the run would write over are
#: still refused one by one, see `FileGuard`)
_HARNESS_NAMES = ("sweeps", "results", "figures", "cache", "logs", "report.md", "README.md")


def _check_folder(out: Path, config: HarnessConfig, overwrite: bool) -> None:
    """Refuse a folder with another configuration's results (see `run_harness`); with
    ``overwrite``, remove the files of that other run (those its manifests list), so
    that the manifests always describe the files beside them. Files no harness
    manifest lists are never removed."""
    if not out.is_dir():
        return
    mine = json.loads(json.dumps(config.to_dict(), default=str))
    manifests = harness_manifests(out)
    other = [m for m in manifests if m.config != mine]
    if other and not overwrite:
        theirs = other[0].config
        name = theirs.get("name") if isinstance(theirs, dict) else "?"
        raise InputError(
            f"{out} holds results of another harness configuration ({name!r} in "
            f"{other[0].path.name}); use another --out, or --overwrite to replace them "
            "(it removes only the files that run's manifests list)")
    if other:
        remove_owned(out, other)
        manifests = [m for m in manifests if m not in other]
    if not manifests and not overwrite:
        stray = [p.name for p in out.iterdir()
                 if p.name not in _HARNESS_NAMES and not p.name.startswith(".")]
        if stray:
            raise InputError(f"{out} is not empty and holds no harness manifest "
                             f"({sorted(stray)[:3]}); use an empty folder, or pass "
                             "--overwrite to write beside those files (they are kept)")


def _describe(executor: Executor) -> str:
    return type(executor).__name__  # the command line in the manifest has the --executor text


def _manifest_name(stage: str, shard: tuple[int, int]) -> str:
    i, n = shard
    if n > 1:
        return f"manifest.shard-{i}-of-{n}.json"
    return "manifest.json" if stage == "all" else f"manifest.{stage}.json"


def _write_manifest(run: HarnessRun, config: HarnessConfig, command: str | None,
                    guard: FileGuard) -> None:
    from empirical_batch import __version__

    path = run.out / _manifest_name(run.stage, run.shard)
    info = {
        "command": command or " ".join(sys.argv),
        "empirical_batch": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device_name": device_name(run.device, otherwise=platform.processor() or "cpu"),
        "torch_threads": torch.get_num_threads(),
        **run.to_dict(),
        "harness_config": config.to_dict(),
        "tasks": {p.task: p.make_task().describe() for p in config.plans},  # corpus sha256
    }
    # a piece of a resumed run keeps the files its predecessors listed (still there)
    earlier = next((m for m in harness_manifests(run.out) if m.path == path), None)
    if earlier is not None and isinstance(earlier.data.get("files"), list):
        kept = sorted(listed_paths(run.out, earlier.data["files"]))
        info["files"] = _relative(run.out, [*kept, *run.files])
    guard.check(path)
    atomic_write_text(path, json.dumps(info, indent=1, default=str) + "\n")
