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

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, overload

import numpy as np
from numpy.typing import ArrayLike

from .._numeric import progress_mean
from ..errors import DataError, EmpiricalBatchWarning, InputError, warn
from ..params import POSITIVE, validate_params
from ..units import check_unit, convert

if TYPE_CHECKING:
    import pandas as pd

    from ..branched import BranchedCriticalBatch
    from ..noise_log import Quantity
    from ..tradeoff import Tradeoff

__all__ = ["NoiseTrajectory"]

Unresolved = Literal["refuse", "drop"]
"""What `NoiseTrajectory.from_log` does with rows not resolved: refuse them, or drop them."""


@dataclass(frozen=True, repr=False)
class NoiseTrajectory:
    """$\\mathcal B(s)$ on a grid of progress ``s`` (infinite-batch steps).

    ``lower`` (optional) is a lower confidence bound of the critical batch at each
    point (used by the doubling policy to double only when the data support it).
    ``unit`` is what ``b_noise`` (and the batch sizes of schedules designed from it)
    count (`empirical_batch.units`); ``quantity`` names what was measured
    (``"b_noise"``, or ``"b_simple"`` used as its approximation; see
    `empirical_batch.noise_log`); ``n_dropped`` counts log rows left out by
    `from_log` (``unresolved="drop"``).
    """

    progress: np.ndarray
    b_noise: np.ndarray
    lower: np.ndarray | None = field(default=None)
    source: str = ""
    unit: str = "examples"
    quantity: str = "b_noise"
    n_dropped: int = 0

    def __post_init__(self) -> None:
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
        object.__setattr__(self, "unit", check_unit(self.unit))

    @overload
    def __call__(self, s: float) -> float: ...
    @overload
    def __call__(self, s: np.ndarray | Sequence[float]) -> np.ndarray: ...

    def __call__(self, s: float | np.ndarray | Sequence[float]) -> np.ndarray | float:
        """$\\mathcal B$ at progress ``s`` (log-linear interpolation, held at the
        ends)."""
        out: np.ndarray | float = np.exp(np.interp(np.asarray(s, dtype=float), self.progress,
                                                   np.log(self.b_noise)))
        return out  # a float (numpy's) for a scalar s

    @overload
    def lower_at(self, s: float) -> float: ...
    @overload
    def lower_at(self, s: np.ndarray | Sequence[float]) -> np.ndarray: ...

    def lower_at(self, s: float | np.ndarray | Sequence[float]) -> np.ndarray | float:
        """The lower bound at ``s`` (``b_noise`` itself when no bound was given)."""
        if self.lower is None:
            return self(s)
        lo = np.maximum(self.lower, 1e-300)
        out: np.ndarray | float = np.exp(np.interp(np.asarray(s, dtype=float), self.progress,
                                                   np.log(lo)))
        return out

    @property
    def total(self) -> float:
        """Total progress $s_{end}$."""
        return float(self.progress[-1])

    @property
    def b_crit(self) -> float:
        r"""The critical batch of a fixed-batch run over the whole trajectory: the
        paper's App. D progress average $E_s[\mathcal B] = \frac{1}{s_{end}}
        \int_0^{s_{end}} \mathcal B(s)\,ds$ (the weighting of
        `empirical_batch.validation.experiments.noise.averaged_scale` with ``weight="progress"``).
        A run at batch $B$ takes $S = \int_0^{s_{end}} (1 + \mathcal B(s)/B)\,ds =
        S_{min}(1 + E_s[\mathcal B]/B)$ steps with $S_{min} = s_{end}$: eq. 2.11 with
        $B_{crit} = E_s[\mathcal B]$ (`empirical_batch._numeric.progress_mean` over the
        progress from 0: $\mathcal B$ held at the first point before it, trapezoid rule
        after). This is the model's prediction when every step takes the
        optimal rate $\epsilon_{opt}(B)$ (§2.2); runs on another learning-rate schedule
        can fit a different $B_{crit}$."""
        return progress_mean(self.b_noise, at=self.progress, start=0.0)

    def tradeoff(self) -> Tradeoff:
        """The `Tradeoff` of a target reached at the end of the trajectory:
        $S_{min} = s_{end}$, $B_{crit}$ = `b_crit` (in ``unit``)."""
        from ..tradeoff import Tradeoff

        return Tradeoff.from_b_crit(self.b_crit, s_min=self.total)

    def __repr__(self) -> str:
        what = "B_noise" if self.quantity == "b_noise" else "B_noise ~ B_simple"
        return (f"NoiseTrajectory({self.progress.size} points, progress 0..{self.total:.4g}, "
                f"{what} {self.b_noise.min():.4g}..{self.b_noise.max():.4g} {self.unit}"
                + (f", from {self.source}" if self.source else "")
                + (f", {self.n_dropped} log rows dropped" if self.n_dropped else "") + ")")

    def to_unit(self, unit: str, *,
                tokens_per_example: float | None = None) -> NoiseTrajectory:
        """The same trajectory with ``b_noise`` (and ``lower``) in ``unit``; progress,
        counted in steps, does not change. Tokens need ``tokens_per_example``."""
        f = convert(1.0, self.unit, unit, tokens_per_example=tokens_per_example)
        lo = None if self.lower is None else self.lower * f
        return replace(self, b_noise=self.b_noise * f, lower=lo, unit=check_unit(unit))

    # --- constructors ---------------------------------------------------------
    @classmethod
    @validate_params(batch_size="batch_size")
    def from_examples(cls, examples: ArrayLike, b_noise: ArrayLike, batch_size: float, *,
                      lower: ArrayLike | None = None,
                      source: str = "", unit: str = "examples") -> NoiseTrajectory:
        r"""From a reference run at ``batch_size``: $\mathcal B$ against the examples
        it had used; progress by $ds = de/(B_{ref} + \mathcal B)$ (trapezoid).
        ``examples``, ``b_noise`` and ``batch_size`` all count ``unit``."""
        e = np.asarray(examples, dtype=float)
        b = np.asarray(b_noise, dtype=float)
        if e.ndim != 1 or e.shape != b.shape or e.size < 2:
            raise InputError("examples and b_noise must be 1-D of the same length >= 2")
        if np.any(np.diff(e) <= 0) or e[0] < 0:
            raise InputError("examples must start at >= 0 and increase strictly")
        rate = 1.0 / (batch_size + b)
        s = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(e))])
        s = s + e[0] * rate[0]
        lo = None if lower is None else np.asarray(lower, dtype=float)
        return cls(s, b, lo, source, unit)

    @classmethod
    @validate_params(batch_size="batch_size", unresolved=Unresolved)
    def from_log(cls, log: object, batch_size: float, *, quantity: Quantity | None = None,
                 column: str | None = None, level_column: str | None = None,
                 unresolved: Unresolved = "refuse", where: str | None = None,
                 unit: str | None = None,
                 tokens_per_example: float | None = None) -> NoiseTrajectory:
        r"""From a noise log (`empirical_batch.noise_log`: a path, or a DataFrame such
        as `empirical_batch.measure.NoiseScaleLog.to_frame()`) of a run at
        ``batch_size`` (in the log's ``unit``).

        The noise scale is ``quantity`` (``"b_noise"`` or ``"b_simple"``; default
        ``b_noise`` where the log has it, else ``b_simple`` with a `BSimpleForBNoise`
        warning, since the model needs $B_{noise}$), or the named ``column``.
        ``level_column`` (e.g. ``"b_simple_low"``) is the lower bound. A column named
        ``*_tokens`` (the callbacks' ``b_simple_tokens``) is in tokens, whatever the
        log's ``unit``: the trajectory is then in tokens, and ``batch_size`` (still in
        the log's unit) is converted with the tokens per example the log measured
        (its ``tokens`` over its ``examples``). Progress is
        counted along the log's ``examples`` (``tokens`` for a log in tokens), or
        ``step × batch_size`` where the log has no such column.

        Rows whose noise scale or bound is NaN or not > 0 (nothing measured yet, or
        not resolved) are refused with their count (``unresolved="refuse"``), or
        left out with a warning and counted in ``n_dropped`` (``"drop"``): leaving
        them out silently would move the trajectory's start and change its progress.
        ``where`` keeps one run of a table of several (`load_noise_log`).

        ``unit`` (default the log's) is the unit of the trajectory returned: tokens from
        a log in sequences are read from its measured per-token column (``b_simple_tokens``,
        with the bound scaled row by row by the same measured ratio) where it has one,
        else converted with ``tokens_per_example`` (`to_unit`).
        """
        from ..noise_log import choose_quantity, load_noise_log, token_column

        unit_ = unit  # the unit asked for (``unit`` below is the log's)
        f = load_noise_log(log, where)
        if column is None:
            column, _ = choose_quantity(f, quantity)
        else:
            if quantity is not None:
                raise InputError("give quantity or column, not both")
        missing = [c for c in (column, level_column) if c is not None and c not in f.columns]
        if missing:
            raise DataError(f"the log has missing columns {missing}; got {list(f.columns)}")
        unit = str(f["unit"].iat[0])
        _check_batch_size(f, float(batch_size), unit)
        want = None if unit_ is None else check_unit(unit_, "unit")
        measured = token_column(f, column) if want == "tokens" else None
        if measured is not None:
            if level_column is not None:  # the bound by the same measured ratio
                ratio = f[measured].to_numpy(dtype=float) / f[column].to_numpy(dtype=float)
                f = f.assign(**{level_column: f[level_column].to_numpy(dtype=float) * ratio})
            column = measured
        if column.endswith("_tokens") and unit != "tokens":
            # the callbacks' per-token column of a log in sequences: batch_size is in
            # the log's unit, converted with the tokens per sequence the log measured
            batch_size = batch_size * _tokens_per_example(f, column, unit)
            unit = "tokens"
        counter = "tokens" if unit == "tokens" else "examples"
        if counter in f.columns:
            e = f[counter].to_numpy(dtype=float)
        elif "step" in f.columns:
            e = f["step"].to_numpy(dtype=float) * batch_size
        else:
            raise DataError(f"a log in {unit} needs a {counter!r} or 'step' column to count "
                            f"progress; got {list(f.columns)}")
        cols = [column, *([level_column] if level_column else [])]
        vals = f[cols].to_numpy(dtype=float)
        bad = ~np.all(np.isfinite(vals) & (vals > 0), axis=1) | ~np.isfinite(e)
        if bad.any():
            at = "step" if "step" in f.columns else counter
            steps = f[at][bad]
            what = (f"{int(bad.sum())} of {len(f)} rows ({at} {steps.iloc[0]:g}"
                    + (f"..{steps.iloc[-1]:g}" if bad.sum() > 1 else "")
                    + f") have a NaN or non-positive {' or '.join(cols)}")
            if unresolved == "refuse":
                raise DataError(f"{what}: not resolved yet. Smooth the log, start it later, "
                                "or pass unresolved='drop' to leave them out (counted)")
            warn(f"{what}: left out", EmpiricalBatchWarning)
        keep = ~bad
        traj = cls.from_examples(e[keep], vals[keep, 0], batch_size,
                                 lower=vals[keep, 1] if level_column else None,
                                 source=f"log ({column})", unit=unit)
        traj = replace(traj, quantity="b_simple" if column.startswith("b_simple")
                       else "b_noise", n_dropped=int(bad.sum()))
        if want is not None and traj.unit != want:
            traj = traj.to_unit(want, tokens_per_example=tokens_per_example)
        return traj

    @classmethod
    def from_power_law(cls, law: Callable[[np.ndarray], ArrayLike], examples: ArrayLike,
                       loss: ArrayLike, batch_size: float) -> NoiseTrajectory:
        r"""From a $B_{crit}(L)$ law (a `PowerLaw`, or any callable of the loss) and
        the loss curve ``loss(examples)`` of a reference run at ``batch_size``."""
        b = np.asarray(law(np.asarray(loss, dtype=float)), dtype=float)
        return cls.from_examples(examples, b, batch_size, source="B_crit(L) law")

    @classmethod
    @validate_params(b_crit="b_crit", loss=POSITIVE, batch_size="batch_size",
                     alpha=POSITIVE)
    def from_b_crit(cls, b_crit: float, examples: ArrayLike, loss: ArrayLike,
                    batch_size: float, *,
                    alpha: float, low: float | None = None, unit: str = "examples",
                    source: str = "") -> NoiseTrajectory:
        r"""A trajectory whose critical batch is ``b_crit`` (a fixed-batch $B_{crit}$, e.g.
        a law's prediction for the run): the shape $\mathcal B \propto L^{-1/\alpha}$
        along the loss curve ``loss(examples)`` of a reference run at ``batch_size``
        (Kaplan et al. 2020's $B_{crit}(L)$ form), scaled so that its progress average
        `b_crit` equals ``b_crit``. The scale is solved for (the progress itself depends
        on it); ``low`` (the lower end of ``b_crit``'s interval) gives the lower bound,
        the trajectory times ``low / b_crit``. ``b_crit``, ``examples`` and
        ``batch_size`` count ``unit``."""
        from scipy.optimize import brentq

        target = float(b_crit)
        lo_end = None if low is None or not np.isfinite(low) else float(low)
        if lo_end is not None and not 0 < lo_end <= target:
            raise InputError(f"low must be in (0, b_crit], got {low!r}")
        ell = np.asarray(loss, dtype=float)
        if ell.ndim != 1:
            raise InputError(f"loss must be 1-D, got shape {ell.shape}")
        shape = ell ** (-1.0 / alpha)
        shape = shape / np.exp(np.mean(np.log(shape)))

        def gap(log_c: float) -> float:
            t = cls.from_examples(examples, np.exp(log_c) * shape, batch_size, unit=unit)
            return float(np.log(t.b_crit) - np.log(target))

        a = b = float(np.log(target))
        while gap(a) > 0:  # the progress average grows with the scale
            a -= 2.0
        while gap(b) < 0:
            b += 2.0
        c = float(np.exp(brentq(gap, a, b, xtol=1e-12, rtol=1e-12)))
        b_noise = c * shape
        lower = None if lo_end is None else b_noise * (lo_end / target)
        return cls.from_examples(examples, b_noise, batch_size, lower=lower, unit=unit,
                                 source=source or f"B_crit {target:.4g} {unit}, "
                                 f"shape L^(-1/{alpha:g})")

    @classmethod
    def from_branched(cls, examples: ArrayLike, results: Iterable[BranchedCriticalBatch],
                      batch_size: float) -> NoiseTrajectory:
        """From branched-training brackets (`empirical_batch.branched_critical_batch`
        results) taken at ``examples`` of a run at ``batch_size``: the critical batch is
        the bracket's geometric middle (its lower end when unbounded above), its lower
        bound the bracket's lower end."""
        lo = np.array([r.b_crit_interval.low for r in results], dtype=float)
        hi = np.array([r.b_crit_interval.high for r in results], dtype=float)
        mid = np.where(np.isfinite(hi), np.sqrt(lo * hi), lo)
        t = cls.from_examples(examples, mid, batch_size, lower=lo, source="branched training")
        return t


def _check_batch_size(f: pd.DataFrame, batch_size: float, unit: str) -> None:
    """A log of a fixed-batch run (its counter grows by one amount a step) was run at that
    batch: another ``batch_size`` is refused, naming both."""
    counter = "tokens" if unit == "tokens" else "examples"
    if not {"step", counter} <= set(f.columns):
        return
    steps, seen = f["step"].to_numpy(dtype=float), f[counter].to_numpy(dtype=float)
    ok = np.isfinite(steps) & np.isfinite(seen)
    ds, de = np.diff(steps[ok]), np.diff(seen[ok])
    rates = de[ds > 0] / ds[ds > 0]
    if rates.size == 0 or not np.allclose(rates, rates[0], rtol=1e-6):
        return  # a batch that changed along the run: nothing to compare with
    if not np.isclose(batch_size, rates[0], rtol=1e-6):
        raise InputError(f"batch_size={batch_size:g} {unit}, but the log's {counter!r} grow "
                         f"by {rates[0]:g} a step: the run's batch size is {rates[0]:g} "
                         f"{unit} (batch_size is in the log's unit)")


def _tokens_per_example(f: pd.DataFrame, column: str, unit: str) -> float:
    """Tokens per example (sequence) a log measured: its last ``tokens``/``examples``."""
    if not {"tokens", "examples"} <= set(f.columns):
        raise DataError(f"column {column!r} counts tokens and batch_size is in the log's "
                        f"unit ({unit}): the log needs 'examples' and 'tokens' columns to "
                        "convert it (or use a column in the log's unit)")
    t, e = f["tokens"].to_numpy(dtype=float), f["examples"].to_numpy(dtype=float)
    ok = np.isfinite(t) & np.isfinite(e) & (e > 0) & (t > 0)
    if not ok.any():
        raise DataError(f"column {column!r} counts tokens: the log has no row with "
                        "'examples' and 'tokens' > 0 to convert batch_size from its unit "
                        f"({unit})")
    i = int(np.flatnonzero(ok)[-1])
    return float(t[i] / e[i])
