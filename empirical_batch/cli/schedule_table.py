"""The table `empirical-batch schedule` prints: whole steps, units, the model's prediction."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["stages_in_whole_steps", "table"]


def stages_in_whole_steps(schedule) -> pd.DataFrame:
    """The schedule's stages starting at whole optimizer steps (rounded to the nearest,
    as the Levanter export does), with ``start_examples`` recounted from those steps
    (the batch of each stage times its whole steps) and each stage's ``steps``;
    the last stage's length comes from the predicted steps when there are any."""
    st = schedule.stages
    start = np.round(st["start_step"].to_numpy(dtype=float)).astype(np.int64)
    batch = st["batch_size"].to_numpy(dtype=float)
    total = schedule.predicted.get("steps")
    end = np.r_[start[1:], np.nan if total is None else round(float(total))]
    steps = end - start
    examples = np.r_[0.0, np.cumsum(batch[:-1] * steps[:-1])]
    out = pd.DataFrame({"start_step": start, "start_examples": examples.astype(np.int64),
                        "batch_size": batch.astype(np.int64),
                        "steps": pd.array(np.where(np.isfinite(steps), steps, -1).astype(
                            np.int64), dtype="Int64"),
                        "lr_factor": st["lr_factor"].to_numpy(dtype=float)})
    out.loc[~np.isfinite(steps), "steps"] = pd.NA  # the last stage's length is unknown
    if "start_progress" in st and np.isfinite(st["start_progress"]).any():
        out.insert(0, "start_progress", st["start_progress"].to_numpy(dtype=float))
    return out


def table(schedule, trajectory, unit: str) -> str:
    """The printed schedule: header, stages in whole steps and the model's prediction
    (steps as whole numbers, batch sizes and examples with their unit)."""
    from .demo import format_table

    lines = [repr(schedule)]
    if trajectory is not None:
        lines.append(f"critical batch: {trajectory!r}")
    lines.append(f"batch sizes and examples in {unit}; stages start at whole optimizer steps")
    frame = stages_in_whole_steps(schedule)
    frame["steps"] = [("–" if pd.isna(v) else str(int(v))) for v in frame["steps"]]
    lines.append(format_table(frame, digits=4))
    p = schedule.predicted
    if p:
        lines.append("predicted by the model (McCandlish et al. 2018, App. D):")
        lines.append(f"  steps {p['steps']:,.0f}, {unit} {p['examples']:,.0f}")
        lines.append(f"  a fixed batch of {p['fixed_batch_same_steps']:,.0f} {unit} would "
                     f"take as many steps and {p['fixed_examples']:,.0f} {unit}: "
                     f"{p['examples_saving']:.1%} saved")
        lines.append(f"  a fixed batch of {p['fixed_batch_same_examples']:,.0f} {unit} would "
                     f"use as many {unit} in {p['fixed_steps']:,.0f} steps: "
                     f"{p['steps_saving']:.1%} saved")
    lines += [f"note: {n}" for n in schedule.notes]
    return "\n".join(lines)
