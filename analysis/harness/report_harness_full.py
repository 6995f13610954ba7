"""The report stage on data/harness-full with the configuration its sweeps were run with:
the current `full` preset of teacher_student and digits without branched training."""
import dataclasses
import sys

from empirical_batch.harness.config import get_config
from empirical_batch.harness.pipeline import run_harness

c = get_config("full", ["teacher_student", "digits"])
c = dataclasses.replace(c, plans=tuple(dataclasses.replace(p, branched=None) for p in c.plans))
run = run_harness(c, "data/harness-full", stage="report", device="cpu", threads=1,
                  progress=False, command=" ".join(sys.argv[1:]))
print(run.wall_s)
