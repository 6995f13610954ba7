"""The options of one harness run, checked once and passed down as one frozen object.

`empirical_batch.harness.pipeline.run_harness` builds a `HarnessOptions` from its
keywords and hands it to its stages; the checks that need only the options run when it
is made, the one that needs the configuration (`HarnessOptions.check_shards`) before
any training.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import InputError
from .config import HarnessConfig
from .resume import TimeBudget
from .sweep import SPLITS
from .trainer import group_members

__all__ = ["STAGES", "HarnessOptions"]

STAGES = ("all", "sweep", "analyze", "report")


@dataclass(frozen=True)
class HarnessOptions:
    """What `run_harness` does and how (its keywords; see its docstring for each)."""

    stage: str = "all"
    shard: tuple[int, int] = (0, 1)
    device: str | torch.device = "auto"
    progress: bool = True
    command: str | None = None
    threads: int | None = None
    overwrite: bool = False
    executor: Executor | None = None
    split: str = "runs"
    time_budget: float | None = None
    #: an `empirical_batch.harness.pipeline.Analysis` (typed loosely: the pipeline,
    #: which defines it, imports this module)
    analysis: Any = None

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise InputError(f"stage must be one of {STAGES}, got {self.stage!r}")
        if self.executor is not None and (self.shard[1] > 1 or self.stage == "analyze"):
            raise InputError("--executor runs the sweep stage, all of its shards: do not "
                             "combine it with --shard i/n or --stage analyze")
        if self.executor is not None and self.time_budget is not None:
            raise InputError("--time-budget pieces a run in one process; with --executor the "
                             "shards run elsewhere: do not combine them")
        if self.analysis is None and self.stage != "sweep":
            raise InputError(f"--stage {self.stage} needs an analysis of the sweeps: run it "
                             "through empirical_batch.validation.study.run_study (what "
                             "`empirical-batch harness` does), or pass analysis=")
        TimeBudget(self.time_budget)  # its own check of the budget
        if self.split not in SPLITS:
            raise InputError(f"--shard-by must be one of {SPLITS}, got {self.split!r}")
        if self.shard[1] > 1 and self.stage != "sweep":
            raise InputError(
                "--shard splits the sweep only: run each shard with --stage sweep, then "
                "--stage analyze once on the folder that holds all shard files"
            )

    @property
    def split_used(self) -> str:
        """How the sweep's runs are split: ``groups`` with an executor, else ``split``."""
        return "groups" if self.executor is not None else self.split

    def check_shards(self, config: HarnessConfig) -> None:
        """Before any training: with ``split="groups"`` every shard must hold a run."""
        if self.split != "groups" or self.executor is not None or self.stage == "analyze":
            return
        i, n = self.shard
        for plan in config.plans:
            n_groups = len(group_members(plan.sweep.members()))
            if n > n_groups:
                raise InputError(
                    f"--shard {i}/{n} --shard-by groups: task {plan.task!r} has only "
                    f"{n_groups} vmap groups (`group_members`), so shards beyond them "
                    f"would be empty; use at most {n_groups} shards")
