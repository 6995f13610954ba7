"""A sweep's shards through any `concurrent.futures.Executor`: local processes, Dask, Ray.

`run_sweep_distributed` cuts a sweep into shards of whole vmap groups
(`empirical_batch.harness.sweep.group_shards`: the runs that share an optimizer
and a batch size, which `train_grid` trains as one program), submits one picklable
`ShardJob` per shard to an executor, and merges the shards' frames in the row order of
`run_sweep` (`merge_shards`). A job carries the task's class and options, not the
task: each worker rebuilds the task (its data, on its own device) from them. Because
every group is trained exactly as in the sequential sweep, the merged frame equals
``run_sweep(task, spec)`` bit for bit when the workers use the same device, dtype and
torch thread count (tested with a process pool, a Dask cluster and a Ray cluster).

Engines (`open_executor` builds one from a short text, as ``--executor`` of
``empirical-batch harness`` does):

- ``process:N``: `concurrent.futures.ProcessPoolExecutor` with N workers on this
  machine (``spawn`` start method: forking a process that has started torch's
  thread pools can hang).
- ``dask:ADDRESS``: a running Dask scheduler (``dask:tcp://host:8786``), through
  ``distributed.Client(ADDRESS).get_executor()``; ``dask:local[:N]`` starts a local
  cluster of N single-threaded worker processes.
- ``ray:auto``: a running Ray cluster (``ray start --head`` / ``ray up``);
  ``ray:ADDRESS`` one at an address (``ray:ray://host:10001``); ``ray:local[:N]``
  starts a local one with N CPUs. Ray (2.60 checked) ships no
  `concurrent.futures.Executor`, so `RayExecutor` adapts its tasks: ``submit`` runs
  the call as a Ray task and returns ``ObjectRef.future()``.

Slurm and other batch systems need no executor: ``--shard i/n`` runs one shard per
array task (see ``docs/validation.md``, "Sweeps on many machines").
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import os
import platform
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pandas as pd
import torch

from .._optional import optional_import
from ..errors import InputError, UsageError
from .config import SweepSpec
from .device import device_name, sync_device, use_device
from .sweep import group_shards, merge_shards, run_sweep
from .tasks import TASKS, check_task_name
from .tasks.base import Task
from .threads import restores_torch_threads
from .trainer import group_members

__all__ = ["ExecutorSpec", "RayExecutor", "ShardError", "ShardJob", "ShardResult",
           "open_executor", "parse_executor", "run_sweep_distributed", "shard_jobs"]


class ShardError(UsageError):
    """A shard of a distributed sweep failed; the message names the task and the shard."""


class ShardResult(NamedTuple):
    """What a `ShardJob` returns: its frame, and where and how long it ran."""

    frame: pd.DataFrame
    host: str
    device: str
    seconds: float


@dataclass(frozen=True)
class ShardJob:
    """One shard of a sweep as a picklable call: ``job()`` returns a `ShardResult`.

    Rebuilds ``task_cls(**options)`` on ``device`` (``auto``: CUDA when the worker has
    it) in ``dtype``, sets torch's thread count of the worker (``threads``; default 1
    on the CPU, as ``empirical-batch harness`` does) and runs `run_sweep` on shard
    ``shard`` with ``split="groups"``. ``task_cls`` is pickled by reference: a task of
    your own must be importable in the workers (defined in a module, not in
    ``__main__``).
    """

    task_cls: type[Task]
    options: dict
    spec: SweepSpec
    shard: tuple[int, int]
    device: str = "auto"
    dtype: torch.dtype = torch.float32
    threads: int | None = None
    batched: bool | None = None
    max_group: int | None = None
    runs: int = field(default=0, compare=False)  # for messages only

    @restores_torch_threads
    def __call__(self) -> ShardResult:
        t0 = time.perf_counter()
        dev = use_device(self.device, self.threads)
        task = self.task_cls(**self.options).to(dev, self.dtype)
        frame = run_sweep(task, self.spec, shard=self.shard, split="groups",
                          batched=self.batched, max_group=self.max_group)
        sync_device(dev)
        return ShardResult(frame, platform.node(), f"{dev} ({device_name(dev)})",
                           round(time.perf_counter() - t0, 3))

    def describe(self) -> str:
        i, n = self.shard
        return f"shard {i}/{n} ({self.runs} runs) of task {self.task_cls.name!r}"


def shard_jobs(
    task: str | Task,
    spec: SweepSpec,
    *,
    options: dict | None = None,
    n_shards: int | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    threads: int | None = None,
    batched: bool | None = None,
    max_group: int | None = None,
) -> list[ShardJob]:
    """The jobs of `run_sweep_distributed` (one per non-empty shard), without running them."""
    if isinstance(task, Task):
        if options is not None:
            raise InputError("options= is for a task given by name; a Task carries its own")
        task_cls: type[Task] = type(task)
        options = {f.name: getattr(task.options, f.name)
                   for f in dataclasses.fields(task.options)}
        device = task.device if device is None else device
        dtype = task.dtype if dtype is None else dtype
    elif isinstance(task, str):
        check_task_name(task)
        task_cls = TASKS[task]
        options = dict(options or {})
        task_cls(**options)  # a bad option fails here, before anything is submitted
    else:
        raise InputError(f"task must be a task name or a Task, got {type(task).__name__}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise InputError(f"threads must be an integer >= 1, got {threads!r}")
    if max_group is not None and (not isinstance(max_group, int) or max_group < 1):
        raise InputError(f"max_group must be an integer >= 1 or None, got {max_group!r}")
    n_groups = len(group_members(spec.members(), max_group))
    if n_shards is None:
        n_shards = n_groups
    if not isinstance(n_shards, int) or isinstance(n_shards, bool) or n_shards < 1:
        raise InputError(f"n_shards must be an integer >= 1, got {n_shards!r}")
    n = min(n_shards, n_groups)  # a shard holds whole groups: more shards would be empty
    bins = group_shards(spec.members(), spec.budget, n, max_group)
    dev = "auto" if device is None else str(device)
    return [ShardJob(task_cls, options, spec, (i, n), dev, dtype or torch.float32, threads,
                     batched, max_group, runs=len(b))
            for i, b in enumerate(bins) if b]


def run_sweep_distributed(
    task: str | Task,
    spec: SweepSpec,
    executor: cf.Executor,
    *,
    options: dict | None = None,
    n_shards: int | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    threads: int | None = None,
    batched: bool | None = None,
    max_group: int | None = None,
    progress: bool = False,
    log: list[dict] | None = None,
) -> pd.DataFrame:
    """The sweep ``spec`` of ``task``, its shards run by ``executor``; equal to `run_sweep`.

    Parameters
    ----------
    task : str or Task
        A registered task name (with ``options``) or a `Task`, whose class and options
        the workers use to rebuild it (and whose device and dtype are the default).
    spec : SweepSpec
        The grid: batch sizes × learning rates × seeds and the step budget.
    executor : concurrent.futures.Executor
        Anything with ``submit(fn) -> Future``: a ``ProcessPoolExecutor``, a Dask
        ``Client.get_executor()``, a `RayExecutor` (see `open_executor`).
    n_shards : int, optional
        Shards to cut the sweep into; default one per vmap group (optimizer × batch
        size), at most that many (a shard holds whole groups). Shards are balanced
        by run-steps (`group_shards`).
    device : str, optional
        The workers' device: ``auto`` (CUDA where the worker has it), ``cpu``,
        ``cuda[:N]``; default the task's device, or ``auto`` for a name.
    threads : int, optional
        torch's thread count in the workers (default 1 on the CPU).
    progress : bool
        A tqdm bar over completed shards.
    log : list, optional
        Receives one dict per shard, in shard order: ``shard`` (``i/n``), ``runs``,
        ``host``, ``device`` and ``seconds`` (the worker's wall time, task build
        included), e.g. for a manifest.

    Returns
    -------
    pandas.DataFrame
        The sweep in the schema of `run_sweep`, rows in its order (optimizer, batch
        size, learning rate, seed, step): the same frame as ``run_sweep(task, spec)``,
        bit for bit on the same device, dtype and thread count.

    Raises
    ------
    ShardError
        When a shard fails: the message names the task and the shard (``i/n`` and its
        runs) and the worker's error is chained; shards not yet started are cancelled.
    """
    if not callable(getattr(executor, "submit", None)):
        raise InputError("executor must have submit(fn) -> Future (a concurrent.futures."
                        f"Executor), got {type(executor).__name__}")
    jobs = shard_jobs(task, spec, options=options, n_shards=n_shards, device=device,
                      dtype=dtype, threads=threads, batched=batched, max_group=max_group)
    futures = {executor.submit(job): job for job in jobs}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc=f"{jobs[0].task_cls.name} shards", unit="shard")
    results: dict[tuple[int, int], ShardResult] = {}
    try:
        for future in cf.as_completed(futures):
            job = futures[future]
            try:
                results[job.shard] = future.result()
            except Exception as exc:
                for other in futures:
                    other.cancel()
                raise ShardError(f"{job.describe()} failed: {type(exc).__name__}: {exc}"
                                 ) from exc
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    if log is not None:
        for job in jobs:
            r = results[job.shard]
            log.append({"shard": f"{job.shard[0]}/{job.shard[1]}", "runs": job.runs,
                        "host": r.host, "device": r.device, "seconds": r.seconds})
    return merge_shards([results[job.shard].frame for job in jobs])


# ------------------------------------------------------------------------ Ray adapter
def _call(fn, *args, **kwargs):
    return fn(*args, **kwargs)


class RayExecutor(cf.Executor):
    """`concurrent.futures.Executor` over Ray tasks.

    ``submit(fn, *args)`` runs ``fn(*args)`` as a Ray task asking for ``num_cpus``
    CPUs and ``num_gpus`` GPUs (Ray then sets the task's ``CUDA_VISIBLE_DEVICES``) and
    returns ``ObjectRef.future()``. Connects with ``ray.init(address, **init_kwargs)``
    unless Ray is already initialised; `shutdown` disconnects only what it connected
    (and stops a local cluster it started).
    """

    def __init__(self, address: str | None = None, *, num_cpus: float = 1,
                 num_gpus: float = 0, **init_kwargs: Any) -> None:
        with optional_import("ray", by="RayExecutor"):
            import ray

        self._ray = ray
        self._own = not ray.is_initialized()
        if self._own:
            ray.init(address=address, **init_kwargs)
        self._remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus)(_call)
        self._refs: list = []
        self._closed = False

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        if self._closed:
            raise UsageError("cannot submit to a RayExecutor after shutdown")
        ref = self._remote.remote(fn, *args, **kwargs)
        self._refs.append(ref)
        return ref.future()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        if cancel_futures:
            for ref in self._refs:
                with contextlib.suppress(Exception):
                    self._ray.cancel(ref)
        elif wait and self._refs:
            self._ray.wait(self._refs, num_returns=len(self._refs))
        if self._own:
            self._ray.shutdown()


# ---------------------------------------------------------------- --executor parsing
ENGINES = ("process", "dask", "ray")
_FORMS = ("process:N (N local worker processes), dask:ADDRESS (a Dask scheduler, e.g. "
          "dask:tcp://host:8786) or dask:local[:N], ray:auto (a running Ray cluster), "
          "ray:ADDRESS or ray:local[:N]")


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed ``--executor``: the engine, its address (``local`` = start one here) and
    the number of local workers (None: the machine's CPU count, or the engine's default)."""

    engine: str
    address: str | None = None
    workers: int | None = None

    def __str__(self) -> str:
        if self.engine == "process":
            return f"process:{self.workers}"
        text = f"{self.engine}:{self.address}"
        return text + (f":{self.workers}" if self.workers is not None else "")


def parse_executor(text: str) -> ExecutorSpec:
    """``process:N`` | ``dask:ADDRESS`` | ``dask:local[:N]`` | ``ray:auto`` |
    ``ray:ADDRESS`` | ``ray:local[:N]`` → `ExecutorSpec`; a clear error otherwise."""
    if not isinstance(text, str) or ":" not in text:
        raise InputError(f"--executor must look like {_FORMS}; got {text!r}")
    engine, rest = text.strip().split(":", 1)
    engine = engine.lower()
    if engine not in ENGINES:
        raise InputError(f"--executor: unknown engine {engine!r} in {text!r}; use {_FORMS}")
    if engine == "process":
        if not re.fullmatch(r"[1-9]\d*", rest):
            raise InputError(f"--executor process:N needs N >= 1 worker processes, got {text!r}")
        return ExecutorSpec("process", None, int(rest))
    local = re.fullmatch(r"local(?::(\d+))?", rest)
    if local:
        workers = int(local[1]) if local[1] else None
        if workers == 0:
            raise InputError(f"--executor {engine}:local:N needs N >= 1, got {text!r}")
        return ExecutorSpec(engine, "local", workers)
    if not rest:
        raise InputError(f"--executor {engine}: needs an address ({_FORMS}), got {text!r}")
    if engine == "dask" and rest == "auto":
        raise InputError("--executor dask:auto is not a thing: give the scheduler's "
                         "address (dask:tcp://host:8786) or dask:local[:N]")
    return ExecutorSpec(engine, rest, None)


@contextlib.contextmanager
def open_executor(spec: str | ExecutorSpec, *, device: str = "auto"
                  ) -> Iterator[cf.Executor]:
    """The executor that ``spec`` names, shut down (and a cluster it started stopped)
    on exit. The engine's package is imported here, with an install hint if absent.

    With ``device`` ``cuda``/``cuda:N``, each Ray task asks for one GPU.
    """
    if isinstance(spec, str):
        spec = parse_executor(spec)
    if spec.engine == "process":
        import multiprocessing

        with cf.ProcessPoolExecutor(max_workers=spec.workers,
                                    mp_context=multiprocessing.get_context("spawn")) as pool:
            yield pool
        return
    if spec.engine == "dask":
        with optional_import("distributed", by="--executor dask:..."):
            from distributed import Client, LocalCluster
        with contextlib.ExitStack() as stack:
            if spec.address == "local":
                cluster = stack.enter_context(LocalCluster(
                    n_workers=spec.workers or os.cpu_count() or 1, threads_per_worker=1,
                    processes=True, dashboard_address=None))
                client = stack.enter_context(Client(cluster))
            else:
                client = stack.enter_context(Client(spec.address))
            executor = client.get_executor()
            try:
                yield executor
            finally:
                executor.shutdown(wait=False)
        return
    with optional_import("ray", by="--executor ray:..."):
        import ray  # noqa: F401
    gpus = 1 if str(device).startswith("cuda") else 0
    if spec.address == "local":
        kwargs: dict[str, Any] = {"include_dashboard": False}
        if spec.workers is not None:
            kwargs["num_cpus"] = spec.workers
        ray_executor = RayExecutor(None, num_gpus=gpus, **kwargs)
    else:
        ray_executor = RayExecutor(spec.address, num_gpus=gpus)
    try:
        yield ray_executor
    finally:
        ray_executor.shutdown(wait=False, cancel_futures=True)
