r"""The batch for the next run: a law, anchored and extrapolated, rounded, with a status.

**Anchored.** A batch $B_{ref}$ measured at a reference point $x_{ref}$ (a
noise-scale $B_{crit}$, a sweep's $B_{opt}$) and a law's exponents $k_j$ (fitted or
published) give, at $x$,

$$B(x) = B_{ref}\prod_j \Big(\frac{x_j}{x_{ref,j}}\Big)^{k_j},$$

so only the exponents are borrowed from the law (its coefficient is not used). Its
interval comes from the exponents' intervals: with $\ell_j = \log(x_j/x_{ref,j})$, a
fitted law's covariance of the exponents $\Sigma_k$ gives
$\log B \pm t_{\nu}\sqrt{\ell^\top\Sigma_k\ell}$; a law with intervals only (published,
or given) gives the extreme corners,
$\log B_{ref} + \sum_j \min/\max(k_{j,lo}\ell_j, k_{j,hi}\ell_j)$. An interval on the
anchor itself ($B_{ref}$'s own) widens both ends.

**Unanchored.** $B(x) = a\prod_j x_j^{k_j}$ with the fitted law's interval at $x$
(`ScalingLaw.interval_at`).

**Rounding.** ``"pow2"``: $2^{\operatorname{round}(\log_2 B)}$ (nanochat's rule
$B = 2^{\operatorname{round}(\log_2(B_{ref}(D/D_{ref})^{0.383}))}$ is this with the
Power Lines exponent); then, or with ``"multiple"``, a multiple of the granule
(devices × micro-batch, × tokens per sequence for a batch in tokens).

**Status.** How far the point lies beyond the anchor ($\max(x/x_{ref}, x_{ref}/x)$ per
input) and beyond the law's fitted range, e.g. "extrapolating 30× beyond the anchor";
``"outside_range"`` when the point is outside the law's recorded range in some input.

**As an input.** `load_prediction` reads a prediction written as JSON
(``empirical-batch law predict --out``, `BatchPrediction.to_json`) back as the batch, its
interval, unit and status: the one reader behind ``plan --b-crit-from`` and
``schedule --b-crit-from``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Literal, get_args

import numpy as np
from scipy import stats

from ..errors import InputError, warn
from ..fit.tradeoff_fit import FitWarning
from ..params import POSITIVE, REAL, Options, check_fields, instance_of, validate_params
from ..result import Interval, Result
from .law import INPUTS, ScalingLaw

__all__ = ["Anchor", "BatchPrediction", "PredictedBatch", "load_prediction", "predict_batch",
           "round_batch"]

Rounding = Literal["pow2", "multiple", "none"]
"""How a predicted batch size is rounded: to a power of two, a multiple of the granule, or not."""
ROUNDING = get_args(Rounding)
GRANULE = REAL.within(POSITIVE, "a real number > 0 (devices × micro-batch)")
"""The constraint of ``granule``: the batch sizes' step."""


@dataclasses.dataclass(frozen=True)
class Anchor:
    """A measured batch (or learning rate) ``value`` at the reference ``point``
    (``{"tokens": …, "n_params": …}``), with its interval where known."""

    value: float
    point: Mapping[str, float]
    low: float = math.nan
    high: float = math.nan

    def __post_init__(self) -> None:
        check_fields(self, {"value": REAL.within(POSITIVE)}, error=lambda _, message:
                     InputError(f"the anchor's batch {message.removeprefix('value ')}"))
        v = float(self.value)
        for k, x in self.point.items():
            if k not in INPUTS:
                raise InputError(f"anchor input {k!r} is not one of {list(INPUTS)}")
            if not (math.isfinite(float(x)) and float(x) > 0):
                raise InputError(f"the anchor's {k} must be finite and > 0, got {x!r}")
        if math.isfinite(self.low) and math.isfinite(self.high) and \
                not (0 < self.low <= v <= self.high):
            raise InputError(f"the anchor's interval [{self.low}, {self.high}] must hold its "
                             f"value {v} and be > 0")


@validate_params(granule=GRANULE)
def round_batch(value: float, mode: Rounding = "pow2",
                granule: float = 1.0) -> tuple[float, str]:
    """``value`` rounded (``"pow2"``, ``"multiple"`` of ``granule``, ``"none"``), and a
    note where the power of two had to move to a multiple of the granule."""
    Options.of(Rounding).check(mode, "rounding")  # named as predict_batch's option
    if not math.isfinite(value) or value <= 0 or mode == "none":
        return value, ""
    if mode == "pow2":
        p = 2.0 ** round(math.log2(value))
        if granule == 1.0 or (p / granule) == round(p / granule):
            return p, ""
        m = max(granule, round(p / granule) * granule)
        return m, (f"2^{round(math.log2(value))} = {p:.6g} is not a multiple of the "
                   f"granule {granule:g}; the nearest multiple {m:.6g} is used")
    return max(granule, round(value / granule) * granule), ""


@dataclasses.dataclass(frozen=True, repr=False)
class BatchPrediction(Result):
    """A law's value at a point, with its interval, rounding and status.

    Attributes
    ----------
    value, value_interval : float, Interval
        The prediction and its interval (see the module's text); NaN ends where the law
        gives no exponent interval.
    rounded, rounded_interval : float, Interval
        After ``rounding`` (equal to ``value`` for a learning rate).
    unit : str
        Unit of ``value``.
    at, anchor : dict
        The point asked for; the anchor (value, point, interval) or ``None``.
    beyond_anchor, beyond_range : dict
        Per input, the factor beyond the anchor and beyond the law's fitted range (1
        inside it; NaN where the range is not recorded).
    status : str
        ``"at_anchor"``, ``"within_range"``, ``"extrapolating"`` (beyond the anchor or
        a recorded range) or ``"outside_range"`` (outside the law's recorded range in
        some input); ``status_text`` says it in words.
    """

    law: str
    quantity: str
    unit: str
    value: float
    value_interval: Interval
    rounded: float
    rounded_interval: Interval
    rounding: str
    granule: float
    at: dict[str, float]
    anchor: dict[str, Any] | None
    exponents: tuple[float, ...]
    exponent_intervals: tuple[Interval, ...]
    beyond_anchor: dict[str, float]
    beyond_range: dict[str, float]
    status: str
    status_text: str
    notes: tuple[str, ...] = ()

    @property
    def level(self) -> float:
        return self.value_interval.level

    @property
    def batch(self) -> float:
        """The rounded batch (the value for a learning rate)."""
        return self.rounded

    @property
    def extrapolation(self) -> float:
        """The largest factor beyond the anchor or the law's fitted range (1 = none)."""
        vals = [v for v in [*self.beyond_anchor.values(), *self.beyond_range.values()]
                if math.isfinite(v)]
        return max(vals, default=1.0)

    def __repr__(self) -> str:
        iv = self.value_interval
        text = (f"BatchPrediction({self.quantity} = {self.value:.4g} {self.unit} "
                f"[{iv.low:.4g}, {iv.high:.4g}], rounded {self.rounded:.6g}; "
                f"{self.status_text})")
        return text if len(text) <= 300 else text[:296] + "...)"

    def summary(self) -> str:
        return "\n".join([repr(self), *[f"note: {n}" for n in self.notes]])


def _factor(x: float, ref: float) -> float:
    return max(x / ref, ref / x)


def _fmt(d: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:.4g}" for k, v in d.items())


@validate_params(law=instance_of(ScalingLaw), rounding=Rounding, granule=GRANULE,
                 level="level")
def predict_batch(law: ScalingLaw, at: Mapping[str, float], *, anchor: Anchor | None = None,
                  rounding: Rounding = "pow2", granule: float = 1.0,
                  exponent_intervals: Mapping[str, tuple[float, float]] | None = None,
                  level: float | None = None) -> BatchPrediction:
    """``law`` at ``at`` (anchored at ``anchor`` when given), rounded, with its status.

    ``exponent_intervals`` supplies intervals for exponents the law gives none for
    (``{"tokens": (0.3, 0.45)}``); the law's own intervals take precedence only where
    they exist.
    """
    x = law.at(at)
    point = dict(zip(law.inputs, (float(v) for v in x), strict=True))
    extra = sorted(set(at) - set(law.inputs))
    if extra:
        raise InputError(f"{law.name} is a law in {list(law.inputs)}; {extra} not used by it")
    ks = np.array(law.exponents, float)
    if not np.isfinite(ks).all():
        raise InputError(f"{law.name}: an exponent is not known ({law.unconfirmed}); fit the "
                         "law (`empirical-batch law fit`) or give a law file")
    lvl = law.level if level is None else float(level)
    ivs = list(law.exponent_intervals)
    for name, (lo, hi) in (exponent_intervals or {}).items():
        j = law._index(name)
        if not lo <= law.exponents[j] <= hi:
            raise InputError(f"the {name} exponent interval [{lo}, {hi}] must hold the "
                             f"exponent {law.exponents[j]}")
        if not math.isfinite(ivs[j].low):
            ivs[j] = Interval(lo, hi, lvl)
    notes: list[str] = []
    if anchor is not None:
        missing = [i for i in law.inputs if i not in anchor.point]
        if missing:
            raise InputError(f"the anchor must give every input of {law.name}: missing "
                             f"{missing} (e.g. --anchor batch=…,{missing[0]}=…)")
        ref = np.array([float(anchor.point[i]) for i in law.inputs])
        ell = np.log(x / ref)
        value = float(anchor.value) * math.exp(float(ks @ ell))
        lo, hi = _anchored_interval(law, ivs, ell, value, lvl)
        if math.isfinite(anchor.low):
            lo, hi = lo * anchor.low / anchor.value, hi * anchor.high / anchor.value
        beyond_anchor = {i: _factor(float(a), float(r))
                         for i, a, r in zip(law.inputs, x, ref, strict=True)}
        anchor_d: dict[str, Any] | None = {"value": float(anchor.value),
                                           **{k: float(v) for k, v in anchor.point.items()},
                                           "low": anchor.low, "high": anchor.high}
    else:
        if law.anchor_only:
            raise InputError(f"{law.name}: its coefficient is not known ({law.unconfirmed}); "
                             "give an anchor (a batch measured at a reference point)")
        value = law(**point)
        ci = law.interval_at(point, lvl) if law.covariance is not None else \
            _corner_interval(law, ivs, x, lvl)
        lo, hi = ci.low, ci.high
        beyond_anchor, anchor_d = {}, None
    beyond_range = {}
    for i, v, r in zip(law.inputs, x, law.ranges, strict=True):
        beyond_range[i] = math.nan if r is None else \
            (v / r[1] if v > r[1] else (r[0] / v if v < r[0] else 1.0))
    for i in (j for j, ci in zip(law.inputs, ivs, strict=True) if ci.low <= 0 <= ci.high):
        notes.append(f"the interval of the {i} exponent spans zero: the data behind the law "
                     f"do not show {law.quantity} moving with {i}")
    if not math.isfinite(lo):
        notes.append("the law gives no interval for its exponent(s): the prediction has none "
                      "(give one: exponent_intervals=, --exponent-interval)")
    if not law.confirmed:
        notes.append(f"the law's constants are not all confirmed: {law.unconfirmed}")
    notes += list(law.notes)
    status, text = _status(beyond_anchor, beyond_range, point, anchor_d)
    if status in ("extrapolating", "outside_range"):
        warn(f"{law.name}: {text}", FitWarning)
    is_batch = law.quantity != "lr_opt"
    mode = rounding if is_batch else "none"
    rounded, rnote = round_batch(value, mode, granule)
    if rnote:
        notes.append(rnote)
    rlo, _ = round_batch(lo, mode, granule)
    rhi, _ = round_batch(hi, mode, granule)
    return BatchPrediction(
        law=law.name, quantity=law.quantity, unit=law.unit, value=value,
        value_interval=Interval(lo, hi, lvl), rounded=rounded,
        rounded_interval=Interval(rlo, rhi, lvl), rounding=mode, granule=float(granule),
        at=point, anchor=anchor_d, exponents=tuple(law.exponents),
        exponent_intervals=tuple(ivs), beyond_anchor=beyond_anchor,
        beyond_range=beyond_range, status=status, status_text=text, notes=tuple(notes))


def _anchored_interval(law: ScalingLaw, ivs: list[Interval], ell: np.ndarray, value: float,
                       level: float) -> tuple[float, float]:
    if law.covariance is not None and law.dof >= 1:
        cov_k = np.asarray(law.covariance)[1:, 1:]
        se = math.sqrt(max(float(ell @ cov_k @ ell), 0.0))
        t = float(stats.t.ppf((1 + level) / 2, law.dof))
        return value * math.exp(-t * se), value * math.exp(t * se)
    if not all(math.isfinite(ci.low) and math.isfinite(ci.high) for ci in ivs):
        return math.nan, math.nan
    base = math.log(value) - float(np.array(law.exponents) @ ell)
    lo = base + sum(min(ci.low * e, ci.high * e) for ci, e in zip(ivs, ell, strict=True))
    hi = base + sum(max(ci.low * e, ci.high * e) for ci, e in zip(ivs, ell, strict=True))
    return math.exp(lo), math.exp(hi)


def _corner_interval(law: ScalingLaw, ivs: list[Interval], x: np.ndarray,
                     level: float) -> Interval:
    ca = law.coefficient_interval
    if not (math.isfinite(ca.low) and all(math.isfinite(ci.low) for ci in ivs)):
        return Interval(math.nan, math.nan, level)
    lx = np.log(x)
    lo = math.log(ca.low) + sum(min(ci.low * e, ci.high * e) for ci, e in zip(ivs, lx,
                                                                               strict=True))
    hi = math.log(ca.high) + sum(max(ci.low * e, ci.high * e) for ci, e in zip(ivs, lx,
                                                                                strict=True))
    return Interval(math.exp(lo), math.exp(hi), level)


def _status(beyond_anchor: dict[str, float], beyond_range: dict[str, float],
            point: dict[str, float], anchor: dict[str, Any] | None) -> tuple[str, str]:
    parts = []
    tol = 1 + 1e-9
    far = {i: f for i, f in beyond_anchor.items() if f > tol}
    if far:
        i, f = max(far.items(), key=lambda kv: kv[1])
        assert anchor is not None
        parts.append(f"extrapolating {f:.3g}× beyond the anchor ({i} {anchor[i]:.3g} → "
                     f"{point[i]:.3g})")
    out = {i: f for i, f in beyond_range.items() if math.isfinite(f) and f > tol}
    for i, f in out.items():
        parts.append(f"{f:.3g}× beyond the law's fitted range in {i}")
    unknown = [i for i, f in beyond_range.items() if not math.isfinite(f)]
    if unknown:
        parts.append(f"the law's fitted range in {', '.join(unknown)} is not recorded")
    if out:
        status = "outside_range"
    elif far:
        status = "extrapolating"
    elif anchor is not None:
        status = "at_anchor"
        parts.insert(0, "at the anchor")
    elif unknown:
        status = "range_unknown"
    else:
        status = "within_range"
        parts.insert(0, f"within the law's fitted range ({_fmt(point)})")
    return status, "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class PredictedBatch:
    """A predicted batch read back from JSON (`load_prediction`): ``value`` and its
    interval ``[low, high]`` (NaN where the prediction has none) in ``unit``, the law and
    quantity it came from, and its status in words."""

    value: float
    low: float
    high: float
    unit: str
    law: str
    quantity: str
    status_text: str
    path: str = ""

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    def describe(self, as_what: str = "B_crit") -> str:
        """One line: the value with its interval and unit, the law, and the status."""
        span = (f" [{self.low:.4g}, {self.high:.4g}]" if self.has_interval
                else " (no interval)")
        taken = "" if self.quantity == as_what.lower() else f", taken as {as_what}"
        return (f"{as_what} from {self.path}: {self.value:.4g} {self.unit}{span} predicted by "
                f"the law {self.law} (of {self.quantity}{taken}); {self.status_text}")


def load_prediction(path: Any) -> PredictedBatch:
    """The batch predicted in ``path`` (`BatchPrediction.to_json`, as written by
    ``empirical-batch law predict --out`` or ``--json``). JSON of another kind is a
    `DataError`, a prediction that is not a batch size (a learning rate) an `InputError`."""
    from ..errors import DataError
    from ..result import read_result

    try:
        got = read_result(path)
    except DataError as exc:
        raise DataError(f"{path}: not `empirical-batch law predict --out` output ({exc})") \
            from None
    if not isinstance(got, BatchPrediction):
        raise DataError(f"{path}: not `empirical-batch law predict --out` output (a "
                        f"{type(got).__name__})")
    iv = got.value_interval
    pred = PredictedBatch(value=got.value, low=iv.low, high=iv.high, unit=got.unit,
                          law=got.law, quantity=got.quantity, status_text=got.status_text,
                          path=str(path))
    if pred.unit not in ("tokens", "sequences", "examples"):
        raise InputError(f"{path}: the prediction is a {pred.unit}, not a batch size")
    if not (math.isfinite(pred.value) and pred.value > 0):
        raise InputError(f"{path}: the predicted batch must be finite and > 0, got "
                         f"{pred.value!r}")
    if pred.has_interval and not 0 < pred.low <= pred.value <= pred.high:
        raise DataError(f"{path}: the interval [{pred.low}, {pred.high}] does not hold the "
                        f"predicted batch {pred.value}")
    return pred
