"""The whole harness for one configuration: sweeps, noise scales, one-step experiment, report.

Stages: ``sweep`` (train this shard's runs, write ``OUT/sweeps/TASK[.shard-i-of-n].csv``;
with an ``executor``, all shards of the sweep through it, see ``distribute``)
and ``analyze`` (read the complete sweep of each task back through ``load_sweep``,
measure the noise scales and the one-step experiment on reference runs, fit
B_crit and write the report); ``all`` does both. ``report`` redoes only what
depends on the targets (targets, B_crit fits, Table-1 summary, claims, report) from
the sweeps and the measured tables an earlier ``analyze`` left in ``OUT/results``: no
training and no Hessian-vector products, so no GPU
(`empirical_batch.validation.report.reanalyze`). ``OUT/manifest.json`` records the
configuration, the library and torch versions, the device and wall times.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .._io import atomic_write_text
from ..errors import InputError
from .config import HarnessConfig
from .sweep import SPLITS, run_sweep, sweep_path, write_sweep
from .threads import restores_torch_threads
from .trainer import group_members

STAGES = ("all", "sweep", "analyze", "report")


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda`` without CUDA is an error.

    Accepts the strings ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or a ``torch.device``
    of type cpu or cuda.
    """
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise InputError(f"device must be a string or torch.device, got {type(device).__name__}")
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise InputError(f"--device must be auto, cpu or cuda[:N], got {device!r}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but torch.cuda.is_available() is False")
    return torch.device(device)


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

    def to_dict(self) -> dict:
        return {
            "config": self.config, "device": self.device, "stage": self.stage,
            "shard": f"{self.shard[0]}/{self.shard[1]}", "split": self.split,
            "executor": self.executor, "shards": self.shards,
            "wall_s": self.wall_s, "files": [str(f) for f in self.files],
        }


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

    An output folder that holds another configuration's results (its manifests name a
    different configuration) is refused unless ``overwrite=True``: results of two
    sweeps are never mixed. A folder from the same configuration is reused (a resumed
    or sharded run, or the analysis of existing sweeps).

    ``threads`` sets torch's CPU threads for the call (default: 1 on the CPU, where the
    tiny models of the harness lose more to intra-op threading than they gain; unchanged
    on CUDA); the caller's setting is restored when it returns.
    """
    if stage not in STAGES:
        raise InputError(f"stage must be one of {STAGES}, got {stage!r}")
    if executor is not None and (shard[1] > 1 or stage == "analyze"):
        raise InputError("--executor runs the sweep stage, all of its shards: do not combine "
                         "it with --shard i/n or --stage analyze")
    if split not in SPLITS:
        raise InputError(f"--shard-by must be one of {SPLITS}, got {split!r}")
    if shard[1] > 1 and stage != "sweep":
        raise InputError(
            "--shard splits the sweep only: run each shard with --stage sweep, then "
            "--stage analyze once on the folder that holds all shard files"
        )
    if split == "groups" and executor is None and stage != "analyze":
        for plan in config.plans:  # before any training: every shard must hold a run
            n_groups = len(group_members(plan.sweep.members()))
            if shard[1] > n_groups:
                raise InputError(
                    f"--shard {shard[0]}/{shard[1]} --shard-by groups: task {plan.task!r} has "
                    f"only {n_groups} vmap groups (optimizer × batch size), so shards beyond "
                    f"them would be empty; use at most {n_groups} shards")
    dev = resolve_device(device)
    if threads is not None:
        if threads < 1:
            raise InputError(f"--threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    elif dev.type == "cpu":
        torch.set_num_threads(1)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file, not a folder")
    _check_folder(out, config, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    run = HarnessRun(out, config.name, str(dev), stage, shard,
                     executor=None if executor is None else _describe(executor),
                     split="groups" if executor is not None else split)
    t_all = time.perf_counter()
    if stage in ("all", "sweep"):
        for plan in config.plans:
            t0 = time.perf_counter()
            if executor is not None:
                from .distribute import run_sweep_distributed

                log: list[dict] = []
                frame = run_sweep_distributed(
                    plan.task, plan.sweep, executor, options=plan.options,
                    device=device if isinstance(device, str) else str(dev),
                    threads=threads, progress=progress, log=log)
                run.shards[plan.task] = log
            else:
                task = plan.make_task().to(dev)
                frame = run_sweep(task, plan.sweep, shard=shard, split=split,
                                  progress=progress)
                sync_device(dev)
            run.wall_s[f"sweep/{plan.task}"] = round(time.perf_counter() - t0, 2)
            run.files.append(write_sweep(frame, sweep_path(out, plan.task, shard)))
    if stage in ("all", "analyze"):
        from ..validation.report import analyze

        t0 = time.perf_counter()
        run.files += analyze(config, out, device=dev, progress=progress, timings=run.wall_s)
        run.wall_s["analyze"] = round(time.perf_counter() - t0, 2)
    if stage == "report":
        from ..validation.report import report

        t0 = time.perf_counter()
        run.files += report(config, out)
        run.wall_s["report"] = round(time.perf_counter() - t0, 2)
    run.wall_s["total"] = round(time.perf_counter() - t_all, 2)
    _write_manifest(run, config, command)
    return run


_OWN = ("sweeps", "results", "figures", "report.md")


def _check_folder(out: Path, config: HarnessConfig, overwrite: bool) -> None:
    """Refuse a folder with another configuration's results (see `run_harness`); with
    ``overwrite``, remove the harness's own files of that other run first, so that the
    manifests always describe the files beside them."""
    if not out.is_dir():
        return
    mine = json.loads(json.dumps(config.to_dict(), default=str))
    for m in sorted(out.glob("manifest*.json")):
        try:
            theirs = json.loads(m.read_text()).get("harness_config")
        except (OSError, ValueError):
            theirs = None
            if not overwrite:
                raise InputError(f"{m} is not a readable manifest; remove it or pass "
                                 "--overwrite") from None
        if theirs != mine and overwrite:
            import shutil

            for name in _OWN:
                target = out / name
                if target.is_dir():
                    shutil.rmtree(target)
                elif target.exists():
                    target.unlink()
            for old in out.glob("manifest*.json"):
                old.unlink()
            return
        if theirs != mine:
            other = theirs.get("name") if isinstance(theirs, dict) else "?"
            raise InputError(
                f"{out} holds results of another harness configuration ({other!r} in "
                f"{m.name}); use another --out, or --overwrite to replace them")
    stray = [p.name for p in out.iterdir()
             if p.name not in (*_OWN, "README.md") and not p.name.startswith(("manifest", "."))]
    if stray and not overwrite:
        raise InputError(f"{out} is not empty and holds no harness manifest ({stray[:3]}); "
                         "use an empty folder or pass --overwrite")


def _describe(executor: Executor) -> str:
    return type(executor).__name__  # the command line in the manifest has the --executor text


def sync_device(dev: torch.device) -> None:
    """Wait for the device's queued work (CUDA), so that a wall time is the work's."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _write_manifest(run: HarnessRun, config: HarnessConfig, command: str | None) -> None:
    from empirical_batch import __version__

    i, n = run.shard
    name = "manifest.json" if n == 1 else f"manifest.shard-{i}-of-{n}.json"
    if run.stage != "all" and n == 1:
        name = f"manifest.{run.stage}.json"
    info = {
        "command": command or " ".join(sys.argv),
        "empirical_batch": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device_name": (torch.cuda.get_device_name(torch.device(run.device))
                        if run.device.startswith("cuda") else platform.processor() or "cpu"),
        "torch_threads": torch.get_num_threads(),
        **run.to_dict(),
        "harness_config": config.to_dict(),
        "tasks": {p.task: p.make_task().describe() for p in config.plans},  # corpus sha256
    }
    atomic_write_text(run.out / name, json.dumps(info, indent=1, default=str) + "\n")
