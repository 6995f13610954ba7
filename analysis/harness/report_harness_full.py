"""The report stage on ``data/harness-full`` with the configuration its sweeps were made with.

    python -m analysis.harness.report_harness_full

``data/harness-full`` holds sweeps of an older version of the harness (three tasks on one
H100; ``teacher_student`` and ``digits`` analysed). Its configuration is today's ``full``
preset of those two tasks without branched training (a stage added later; the
manifests compare equal), so ``empirical-batch harness --config full --stage report``
refuses the folder; this script passes that configuration to `run_study` instead.
Rewrites the target-dependent tables, the claims and ``report.md`` (CPU, no training).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from empirical_batch.harness.config import get_config
from empirical_batch.validation.study import run_study

OUT = Path(__file__).resolve().parents[2] / "data" / "harness-full"


def main() -> dict:
    config = get_config("full", ["teacher_student", "digits"])
    config = dataclasses.replace(config, plans=tuple(dataclasses.replace(p, branched=None)
                                                     for p in config.plans))
    run = run_study(config, OUT, stage="report", device="cpu", threads=1, progress=False,
                      command="python -m analysis.harness.report_harness_full")
    return run.wall_s


if __name__ == "__main__":
    print(main())
