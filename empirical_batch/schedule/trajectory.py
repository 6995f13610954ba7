r"""The critical batch along training, as a function of progress (App. D).

The model of McCandlish et al. (2018) measures training in *progress* $s$, the
optimizer steps an infinite batch would need: a step at batch $B$ when the noise
scale is $\mathcal B$ advances $ds = 1/(1 + \mathcal B/B)$ and uses
$B$ examples, so $ds/de = 1/(B + \mathcal B)$. A trajectory measured on a
reference run at batch $B_{ref}$ (a collector log, a loss curve and a
$B_{crit}(L)$ law, or branched measurements), indexed by that run's examples
$e$, is converted here to $\mathcal B(s)$, which no longer depends on the
batch size the reference run happened to use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import InputError

__all__ = ["NoiseTrajectory"]


@dataclass(frozen=True, repr=False)
class NoiseTrajectory:
    """$\\mathcal B(s)$ on a grid of progress ``s`` (infinite-batch steps).

    ``lower`` (optional) is a lower confidence bound of the critical batch at each
    point (used by the doubling policy to double only when the data support it).
    """

    progress: np.ndarray
    b_noise: np.ndarray
    lower: np.ndarray | None = field(default=None)
    source: str = ""

    def __post_init__(self):
        s = np.asarray(self.progress, dtype=float)
        b = np.asarray(self.b_noise, dtype=float)
        if s.ndim != 1 or s.shape != b.shape or s.size < 2:
            raise InputError("progress and b_noise must be 1-D arrays of the same length >= 2")
        if not (np.all(np.isfinite(s)) and np.all(np.isfinite(b))):
            raise InputError("progress and b_noise must be finite")
        if np.any(np.diff(s) <= 0) or s[0] < 0:
            raise InputError("progress must start at >= 0 and increase strictly")
        if np.any(b <= 0):
            raise InputError("b_noise must be > 0 (a negative collector estimate means "
                             "'not resolved yet': smooth the log or drop those rows)")
        lo = None if self.lower is None else np.asarray(self.lower, dtype=float)
        if lo is not None and lo.shape != b.shape:
            raise InputError("lower must have the shape of b_noise")
        for name, v in (("progress", s), ("b_noise", b), ("lower", lo)):
            if v is not None:
                v.setflags(write=False)
            object.__setattr__(self, name, v)

    def __call__(self, s) -> np.ndarray:
        """$\\mathcal B$ at progress ``s`` (log-linear interpolation, held at the
        ends)."""
        return np.exp(np.interp(s, self.progress, np.log(self.b_noise)))

    def lower_at(self, s) -> np.ndarray:
        """The lower bound at ``s`` (``b_noise`` itself when no bound was given)."""
        if self.lower is None:
            return self(s)
        lo = np.maximum(self.lower, 1e-300)
        return np.exp(np.interp(s, self.progress, np.log(lo)))

    @property
    def total(self) -> float:
        """Total progress $s_{end}$."""
        return float(self.progress[-1])

    def __repr__(self) -> str:
        return (f"NoiseTrajectory({self.progress.size} points, progress 0..{self.total:.4g}, "
                f"B_noise {self.b_noise.min():.4g}..{self.b_noise.max():.4g}"
                + (f", from {self.source}" if self.source else "") + ")")

    # --- constructors ---------------------------------------------------------
    @classmethod
    def from_examples(cls, examples, b_noise, batch_size: float, *, lower=None,
                      source: str = "") -> NoiseTrajectory:
        r"""From a reference run at ``batch_size``: $\mathcal B$ against the examples
        it had used; progress by $ds = de/(B_{ref} + \mathcal B)$ (trapezoid)."""
        e = np.asarray(examples, dtype=float)
        b = np.asarray(b_noise, dtype=float)
        if not (np.isfinite(batch_size) and batch_size > 0):
            raise InputError(f"batch_size must be > 0, got {batch_size!r}")
        if e.ndim != 1 or e.shape != b.shape or e.size < 2:
            raise InputError("examples and b_noise must be 1-D of the same length >= 2")
        if np.any(np.diff(e) <= 0) or e[0] < 0:
            raise InputError("examples must start at >= 0 and increase strictly")
        rate = 1.0 / (batch_size + b)
        s = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(e))])
        s = s + e[0] * rate[0]
        return cls(s, b, lower, source)

    @classmethod
    def from_log(cls, frame: pd.DataFrame, batch_size: float, *, column: str = "b_simple",
                 level_column: str | None = None) -> NoiseTrajectory:
        """From a collector log (`empirical_batch.measure.NoiseScaleLog.to_frame()` or any
        table with ``examples`` and the noise-scale column) of a run at ``batch_size``.

        With ``level_column`` (e.g. ``"b_simple_lo"``), that column is the lower bound."""
        for c in ("examples", column, *([level_column] if level_column else [])):
            if c not in frame.columns:
                raise InputError(f"the log needs column {c!r}; got {list(frame.columns)}")
        f = frame.dropna(subset=["examples", column]).sort_values("examples")
        f = f[f[column] > 0]
        lower = f[level_column].to_numpy(dtype=float) if level_column else None
        return cls.from_examples(f["examples"].to_numpy(dtype=float),
                                 f[column].to_numpy(dtype=float), batch_size, lower=lower,
                                 source=f"log ({column})")

    @classmethod
    def from_power_law(cls, law, examples, loss, batch_size: float) -> NoiseTrajectory:
        r"""From a $B_{crit}(L)$ law (a `PowerLaw`, or any callable of the loss) and
        the loss curve ``loss(examples)`` of a reference run at ``batch_size``."""
        b = np.asarray(law(np.asarray(loss, dtype=float)), dtype=float)
        return cls.from_examples(examples, b, batch_size, source="B_crit(L) law")

    @classmethod
    def from_branched(cls, examples, results, batch_size: float) -> NoiseTrajectory:
        """From branched-training brackets (`empirical_batch.branched_critical_batch`
        results) taken at ``examples`` of a run at ``batch_size``: the critical batch is
        the bracket's geometric middle (its lower end when unbounded above), its lower
        bound the bracket's lower end."""
        lo = np.array([r.b_crit_interval.low for r in results], dtype=float)
        hi = np.array([r.b_crit_interval.high for r in results], dtype=float)
        mid = np.where(np.isfinite(hi), np.sqrt(lo * hi), lo)
        t = cls.from_examples(examples, mid, batch_size, lower=lo, source="branched training")
        return t
