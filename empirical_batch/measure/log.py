"""Per-step log of a noise-scale collector to a DataFrame, CSV or JSON Lines, in the
noise-log schema (`empirical_batch.noise_log`)."""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import InputError
from ..estimators import estimator_of

__all__ = ["NoiseScaleLog"]


class NoiseScaleLog:
    """Record the smoothed estimate of any collector (or a ``GNSEstimator``) per step.

    Each `record` appends one row of the noise-log schema (`empirical_batch.noise_log`):
    ``step`` (optimizer steps completed), the optional ``examples`` and ``tokens``
    processed so far and ``loss``, the smoothed ``g2``, ``trace_sigma``, ``b_simple``,
    ``b_simple_se``, the interval ``b_simple_low``/``b_simple_high`` at ``level``,
    ``n_eff``, ``updates``, ``skipped``, ``unit`` (what the noise scale counts: the
    collectors' per-example values are in ``"examples"``, which for a language model
    are sequences) and any extra keyword columns. The raw per-step components stay
    available from the collector's ``to_frame()``. `to_csv` and `to_jsonl` write
    files that `empirical_batch.noise_log.load_noise_log` reads back.

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

    def __init__(self, level: float = 0.95, unit: str = "examples"):
        from ..units import check_unit

        self.level = level
        self.unit = check_unit(unit)
        self.rows: list[dict] = []

    def record(self, step: int, source, *, loss: float | None = None,
               examples: float | None = None, tokens: float | None = None,
               **extra) -> dict:
        est = estimator_of(source, "source")
        row: dict = {"step": step}
        if examples is not None:
            row["examples"] = float(examples)
        if tokens is not None:
            row["tokens"] = float(tokens)
        row["loss"] = math.nan if loss is None else float(loss)
        if est.steps:
            row.update(est.estimate(self.level).to_dict())
            row["updates"] = row.pop("steps")
        row["skipped"] = int(getattr(source, "skipped_steps", 0))
        row["unit"] = self.unit
        row.update(extra)
        self.rows.append(row)
        return row

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows)

    def to_csv(self, path) -> Path:
        """Write the log as CSV (atomically: an interrupted write leaves the old file)."""
        from ..noise_log import write_noise_log

        if Path(path).suffix.lower() == ".jsonl":
            raise InputError(f"{path}: to_csv writes CSV; use to_jsonl for JSON Lines")
        return write_noise_log(self.to_frame(), path)

    def to_jsonl(self, path) -> Path:
        """Write the log as JSON Lines, one object per row (NaN as ``null``)."""
        from ..noise_log import write_noise_log

        if Path(path).suffix.lower() != ".jsonl":
            raise InputError(f"{path}: a JSON Lines log ends in .jsonl")
        return write_noise_log(self.to_frame(), path)
