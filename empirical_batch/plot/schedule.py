r"""A batch-size schedule drawn against optimizer steps, with the noise scale it follows."""

from __future__ import annotations

import numpy as np

from ._axes import axes

__all__ = ["plot_schedule", "steps_along"]


def steps_along(schedule, trajectory, progress) -> np.ndarray:
    r"""Optimizer steps taken by ``schedule`` by each ``progress`` $s$ of ``trajectory``:
    $S(s) = \int_0^s (1 + \mathcal B(u)/B(u))\,du$ (eq. 2.11 per unit of progress, with
    $B(u)$ the schedule's batch at $u$), by the trapezoid rule on ``progress``."""
    s = np.asarray(progress, dtype=float)
    b = np.array([schedule.batch_at_progress(u) for u in s])
    rate = 1.0 + trajectory(s) / b
    return np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(s))])


def plot_schedule(schedule, trajectory=None, *, unit: str = "examples", end=None, ax=None):
    """The schedule's batch size against optimizer steps (stages rounded to whole
    steps) up to ``end`` (default the predicted steps); with its ``trajectory``, the
    critical batch $\\mathcal B$ (and its lower bound) along the same steps. Returns
    the Axes."""
    ax = axes(ax, figsize=(6.0, 4.0))
    st = schedule.stages
    starts = np.round(st["start_step"].to_numpy(dtype=float))
    batch = st["batch_size"].to_numpy(dtype=float)
    if end is None:
        end = schedule.predicted.get("steps")
    if end is None:  # no model of the run's length: draw the last stage as long as the one before
        end = starts[-1] + (starts[-1] - starts[-2] if starts.size > 1 else 1.0)
    ax.stairs(batch, np.r_[starts, max(float(end), starts[-1] + 1)], baseline=None,
              label=f"batch size ({schedule.policy})", lw=2)
    if trajectory is not None:
        s = np.linspace(0.0, trajectory.total, 400)
        steps = steps_along(schedule, trajectory, s)
        name = "B_noise" if trajectory.quantity == "b_noise" else "B_noise ~ B_simple"
        ax.plot(steps, trajectory(s), label=name)
        if trajectory.lower is not None:
            ax.plot(steps, trajectory.lower_at(s), ls="--", label=f"{name}, lower bound")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(f"batch size ({unit})")
    ax.legend()
    return ax
