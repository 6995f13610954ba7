"""Per-step log of a noise-scale collector to a DataFrame / CSV."""

from __future__ import annotations

import math
from pathlib import Path

__all__ = ["NoiseScaleLog"]


class NoiseScaleLog:
    """Record the smoothed estimate of any collector (or a ``GNSEstimator``) per step.

    Each `record` appends one row: ``step``, the optional ``loss``, the
    smoothed ``g2``, ``trace_sigma``, ``b_simple``, ``b_simple_se``, the interval
    ``b_simple_low``/``b_simple_high`` at ``level``, ``n_eff``, ``skipped`` and any
    extra keyword columns. The raw per-step components stay available from the
    collector's ``to_frame()``.

    Examples
    --------
    >>> from empirical_batch.estimators import GNSEstimator
    >>> est, log = GNSEstimator(beta=0.5), NoiseScaleLog()
    >>> for step in range(3):
    ...     _ = est.update(12.0, 4, 4.5, 16)
    ...     _ = log.record(step, est, loss=1.0 / (step + 1))
    >>> log.to_frame()[["step", "b_simple"]].values.tolist()
    [[0.0, 20.0], [1.0, 20.0], [2.0, 20.0]]
    """

    def __init__(self, level: float = 0.95):
        self.level = level
        self.rows: list[dict] = []

    def record(self, step: int, source, *, loss: float | None = None, **extra) -> dict:
        est = getattr(source, "estimator", source)
        row = {"step": step, "loss": math.nan if loss is None else float(loss)}
        if est.steps:
            row.update(est.estimate(self.level).to_dict())
            row["updates"] = row.pop("steps")
        row["skipped"] = int(getattr(source, "skipped_steps", 0))
        row.update(extra)
        self.rows.append(row)
        return row

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows)

    def to_csv(self, path) -> Path:
        from .._io import atomic_path

        path = Path(path)
        with atomic_path(path) as tmp:  # an interrupted write leaves the old file intact
            self.to_frame().to_csv(tmp, index=False)
        return path
