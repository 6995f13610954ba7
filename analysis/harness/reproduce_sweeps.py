"""Train a committed folder's sweeps again and compare them with the committed ones.

    python -m analysis.harness.reproduce_sweeps data/harness teacher_student digits sequence

For each task, the sweep of the folder's configuration (read from its
``manifest.sweep.json``) is trained again on the CPU with one torch thread, and its
evaluation losses are compared run by run and step by step with
``OUT/sweeps/TASK.csv.gz``: how many rows match, whether the same runs diverge (NaN), the
largest and the median relative difference, and the runs that differ by more than
1e-4 at some step (runs at the edge of stability amplify round-off).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from empirical_batch.harness.config import get_config
from empirical_batch.harness.sweep import run_sweep


def compare(old: pd.DataFrame, new: pd.DataFrame) -> dict:
    """Row counts, NaN agreement and relative differences of two sweeps of one task."""
    both = old.merge(new, on=["run", "step"], suffixes=("_old", "_new"))
    a, b = both["metric_old"].to_numpy(float), both["metric_new"].to_numpy(float)
    finite = np.isfinite(a) & np.isfinite(b)
    rel = np.abs(a[finite] - b[finite]) / np.abs(a[finite])
    far = both[~(np.isclose(a, b, rtol=1e-4) | (np.isnan(a) & np.isnan(b)))]
    return {"rows": len(both), "rows_old": len(old), "rows_new": len(new),
            "same_divergence": bool(np.array_equal(np.isfinite(a), np.isfinite(b))),
            "max_rel": float(rel.max()) if rel.size else float("nan"),
            "median_rel": float(np.median(rel)) if rel.size else float("nan"),
            "runs_apart": sorted(far["run"].unique())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("tasks", nargs="+")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    manifest = json.loads((args.folder / "manifest.sweep.json").read_text())
    config = get_config(manifest["config"], args.tasks)
    for plan in config.plans:
        task = plan.make_task().to("cpu")
        new = run_sweep(task, plan.sweep)
        old = pd.read_csv(args.folder / "sweeps" / f"{plan.task}.csv.gz")
        r = compare(old, new)
        print(f"{plan.task}: {r['rows']} rows ({r['rows_old']} committed, {r['rows_new']} "
              f"trained), same runs diverge: {r['same_divergence']}, relative difference "
              f"max {r['max_rel']:.2e}, median {r['median_rel']:.2e}; runs apart by > 1e-4: "
              f"{', '.join(r['runs_apart']) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
