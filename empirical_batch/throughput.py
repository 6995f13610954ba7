r"""A step-time model fitted to measured timings (Pollux's throughput model).

A data-parallel step on $n$ devices with per-device micro-batch $m$ and
$k$ accumulation micro-batches takes

$$
T(m, n, k) = (k - 1)\,T_{grad}(m) + \left(T_{grad}(m)^{\gamma} +
T_{sync}(n)^{\gamma}\right)^{1/\gamma},
T_{grad}(m) = \alpha_{g} + \beta_{g} m, \qquad
T_{sync}(n) = \mathbb{1}[n > 1]\,(\alpha_{s} + \beta_{s}(n - 2)),
$$

compute growing affinely with the per-device batch, communication with the number of
devices, and $\gamma \ge 1$ the overlap of the last micro-batch's backward pass
with the gradient synchronisation ($\gamma = 1$: none, the times add;
$\gamma \to \infty$: full, the longer one counts). This is the model of Pollux
(Qiao et al. 2021), fitted here by least squares on the relative error of a handful of
measured step times. The global batch is $B = n\,m\,k$.

References
----------
A. Qiao, S. K. Choe, S. J. Subramanya, W. Neiswanger, Q. Ho, H. Zhang, G. R. Ganger,
E. P. Xing. "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning." OSDI 2021, §3.2 (eq. 5-7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import optimize

from ._validate import as_float
from .errors import EmpiricalBatchWarning, InputError, warn
from .params import Domain, instance_of, validate_params
from .result import Result

__all__ = ["ThroughputModel", "fit_throughput"]

COLUMNS = ("micro_batch", "devices", "accumulation", "step_seconds")


@dataclass(frozen=True, repr=False)
class ThroughputModel(Result):
    """The fitted step-time model (see the module docstring for the equation)."""

    alpha_grad: float
    beta_grad: float
    alpha_sync: float
    beta_sync: float
    gamma: float
    rms_relative_error: float
    n_timings: int
    notes: tuple[str, ...] = field(default=())
    status: str = "fitted"
    """``"fitted"``, or ``"poor_fit"`` when the rms relative error exceeds `POOR_FIT`
    (also a note and an `EmpiricalBatchWarning`)."""

    def grad_seconds(self, micro_batch: ArrayLike) -> np.ndarray:
        return self.alpha_grad + self.beta_grad * np.asarray(micro_batch, dtype=float)

    def sync_seconds(self, devices: ArrayLike) -> np.ndarray:
        n = np.asarray(devices, dtype=float)
        return np.where(n > 1, self.alpha_sync + self.beta_sync * np.maximum(n - 2, 0), 0.0)

    def step_seconds(self, micro_batch: ArrayLike, devices: ArrayLike = 1,
                     accumulation: ArrayLike = 1) -> float | np.ndarray:
        """$T(m, n, k)$; broadcasts."""
        k = np.asarray(accumulation, dtype=float)
        tg = self.grad_seconds(micro_batch)
        ts = self.sync_seconds(devices)
        g = self.gamma
        with np.errstate(over="ignore"):
            last = (tg**g + ts**g) ** (1.0 / g)
        out = (k - 1.0) * tg + last
        return float(out) if np.ndim(out) == 0 else out

    def examples_per_second(self, micro_batch: ArrayLike, devices: ArrayLike = 1,
                            accumulation: ArrayLike = 1) -> float | np.ndarray:
        """Throughput of the whole job, $n m k / T$."""
        b = np.asarray(micro_batch, float) * np.asarray(devices, float) * np.asarray(
            accumulation, float)
        out = b / self.step_seconds(micro_batch, devices, accumulation)
        return float(out) if np.ndim(out) == 0 else out

    @validate_params(fraction=Domain(0.0, 1.0, meaning="share of the device's limit"))
    def saturating_micro_batch(self, fraction: float = 0.9) -> float:
        r"""Smallest per-device batch whose throughput reaches ``fraction`` of the
        device's limit $1/\beta_g$ (compute only): $m = f\alpha_g /
        ((1 - f)\beta_g)$. Below it the device idles on fixed costs."""
        fraction = as_float(fraction, "fraction")
        if self.beta_grad <= 0:
            return math.inf
        return fraction * self.alpha_grad / ((1 - fraction) * self.beta_grad)

    def __repr__(self) -> str:
        return (
            f"ThroughputModel(T_grad = {self.alpha_grad:.3g} + {self.beta_grad:.3g}·m s, "
            f"T_sync = {self.alpha_sync:.3g} + {self.beta_sync:.3g}·(n-2) s, "
            f"gamma={self.gamma:.3g}, rms rel. error {self.rms_relative_error:.1%} over "
            f"{self.n_timings} timings" + (", POOR FIT" if self.status == "poor_fit" else "")
            + ")"
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "alpha_grad", "beta_grad", "alpha_sync", "beta_sync", "gamma",
            "rms_relative_error", "n_timings", "status")} | {"notes": list(self.notes)}


def _timings(frame: pd.DataFrame) -> tuple[np.ndarray, ...]:
    missing = [c for c in ("micro_batch", "step_seconds") if c not in frame.columns]
    if missing:
        raise InputError(f"timings need columns {list(COLUMNS)} (devices and accumulation "
                         f"default to 1); missing {missing}, got {list(frame.columns)}")
    out = []
    for c in COLUMNS:
        col = frame[c] if c in frame.columns else pd.Series(1.0, index=frame.index)
        if col.dtype == bool or not pd.api.types.is_numeric_dtype(col):
            raise InputError(f"timings column {c!r} must be numeric, got dtype {col.dtype}")
        v = col.to_numpy(dtype=float)
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise InputError(f"timings column {c!r} must be finite and > 0")
        if c in ("micro_batch", "devices", "accumulation") and np.any(v != np.round(v)):
            raise InputError(f"timings column {c!r} must hold integers")
        out.append(v)
    return tuple(out)


@validate_params(timings=instance_of(pd.DataFrame, what="a pandas DataFrame"))
def fit_throughput(timings: pd.DataFrame) -> ThroughputModel:
    r"""Fit `ThroughputModel` to measured step times.

    Parameters
    ----------
    timings : pandas.DataFrame
        Columns ``micro_batch`` (per device), ``devices`` and ``accumulation`` (both
        default 1 when absent) and ``step_seconds`` (the measured time of one optimizer
        step, e.g. a median over many steps).

    Returns
    -------
    ThroughputModel
        Least squares of $\log T$ (relative errors), all parameters $\ge 0$
        and $1 \le \gamma \le 10$. Parameters the settings cannot identify are
        fixed and named in ``notes``: with one device only, no communication; with a
        single multi-device count, $\beta_s = 0$; without multi-device timings at
        two or more micro-batches, $\gamma = 1$ (no overlap, the conservative
        choice).

    Raises
    ------
    ValueError
        Fewer than two distinct single-step micro-batches (compute cannot be split into
        its fixed and per-example parts), or bad columns.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"micro_batch": [8, 16, 32, 64], "step_seconds": [0.03, 0.04, 0.06, 0.10]})
    >>> m = fit_throughput(t)
    >>> round(m.alpha_grad, 4), round(m.beta_grad, 6)
    (0.02, 0.00125)
    """
    m, n, k, t = _timings(timings)
    notes = []
    if np.unique(m).size < 2:
        raise InputError("timings need at least 2 different micro_batch values to separate "
                         "the fixed and the per-example compute time")
    multi = n > 1
    fit_sync = bool(multi.any())
    fit_beta_s = fit_sync and np.unique(n[multi]).size >= 2
    fit_gamma = fit_sync and np.unique(m[multi]).size >= 2
    if not fit_sync:
        notes.append("one device only: no communication term")
    elif not fit_beta_s:
        notes.append("a single multi-device count: communication taken as constant "
                      "(beta_sync = 0)")
    if fit_sync and not fit_gamma:
        notes.append("multi-device timings at one micro_batch: no overlap assumed "
                     "(gamma = 1)")

    def unpack(p: np.ndarray) -> tuple[float, float, float, float, float]:
        ag, bg, as_, bs, g = p[0], p[1], 0.0, 0.0, 1.0
        i = 2
        if fit_sync:
            as_ = p[i]
            i += 1
            if fit_beta_s:
                bs = p[i]
                i += 1
            if fit_gamma:
                g = p[i]
        return ag, bg, as_, bs, g

    def model(p: np.ndarray) -> float | np.ndarray:
        ag, bg, as_, bs, g = unpack(p)
        return ThroughputModel(ag, bg, as_, bs, g, 0.0, 0).step_seconds(m, n, k)

    def resid(p: np.ndarray) -> np.ndarray:
        return np.asarray(np.log(np.maximum(model(p), 1e-300)) - np.log(t), dtype=float)

    # start: compute from the single-device points, sync from the rest
    single = (~multi) & (k == 1)
    src = single if np.unique(m[single]).size >= 2 else np.ones_like(multi)
    slope, icpt = np.polyfit(m[src], t[src] / k[src], 1)
    x0 = [max(icpt, 1e-6), max(slope, 1e-9)]
    lo, hi = [0.0, 0.0], [np.inf, np.inf]
    if fit_sync:
        x0.append(max(float(np.median(t[multi])) * 0.3, 1e-6))
        lo.append(0.0)
        hi.append(np.inf)
        if fit_beta_s:
            x0.append(1e-6)
            lo.append(0.0)
            hi.append(np.inf)
        if fit_gamma:
            x0.append(2.0)
            lo.append(1.0)
            hi.append(10.0)
    res = optimize.least_squares(resid, np.array(x0), bounds=(lo, hi), x_scale="jac")
    ag, bg, as_, bs, g = unpack(res.x)
    r = resid(res.x)
    rms = float(np.sqrt(np.mean(np.expm1(r) ** 2)))
    if rms > POOR_FIT:
        note = (f"the model misses the timings by {rms:.0%} rms (more than "
                f"{POOR_FIT:.0%}): its predictions are not reliable; check the timings "
                "(warm-up steps, other jobs) or whether the setup fits the model")
        notes.append(note)
        warn(note, EmpiricalBatchWarning)
    return ThroughputModel(
        alpha_grad=float(ag), beta_grad=float(bg), alpha_sync=float(as_),
        beta_sync=float(bs), gamma=float(g),
        rms_relative_error=rms, n_timings=len(t), notes=tuple(notes),
        status="poor_fit" if rms > POOR_FIT else "fitted",
    )


POOR_FIT = 0.10
"""rms relative error above which `fit_throughput` flags its model (``status``)."""
