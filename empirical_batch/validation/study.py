"""The validation study driven end to end: the engine's sweeps, then the study's analysis.

`run_study` is `empirical_batch.harness.pipeline.run_harness` with the study as its
analysis (`STUDY`): the engine trains the sweeps (resumable, budgeted, sharded or
through an executor) and the study's ``analyze`` and ``report`` stages
(`empirical_batch.validation.report`) turn them into tables, figures and
``report.md``. ``empirical-batch harness`` runs it. The dependency points one way:
the study uses the engine, the engine never imports the study.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..harness.config import HarnessConfig
from ..harness.pipeline import HarnessRun, run_harness
from . import report as _report

__all__ = ["STUDY", "Study", "run_study"]


class Study:
    """The validation study as the engine's `Analysis`."""

    def analyze(self, config: HarnessConfig, out: Path, *, device: torch.device,
                progress: bool, timings: dict) -> list[Path]:
        return _report.analyze(config, out, device=device, progress=progress,
                               timings=timings)

    def report(self, config: HarnessConfig, out: Path, *, timings: dict) -> list[Path]:
        return _report.report(config, out, timings=timings)

    def planned_files(self, config: HarnessConfig, out: Path) -> list[Path]:
        return _report.planned_files(config, out)


STUDY = Study()


def run_study(config: HarnessConfig, out: str | Path, **options) -> HarnessRun:
    """`run_harness` (same options, same manifests and file rules) with the study's
    ``analyze`` and ``report`` stages."""
    return run_harness(config, out, analysis=STUDY, **options)
