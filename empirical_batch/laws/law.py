r"""The one result type of batch-size laws, fitted or published: `ScalingLaw`.

A law is a power law in one or more inputs $x_j$ (``tokens`` $D$, ``n_params`` $N$,
``compute`` $C$ in FLOPs, ``loss`` $L$ in nats per token):

$$y = a \prod_j x_j^{k_j}, \qquad \log y = \log a + \sum_j k_j \log x_j,$$

for a quantity $y$: ``b_opt`` (the batch of lowest final loss at given $N, D$),
``lr_opt`` (the learning rate of lowest loss) or ``b_crit`` (the critical batch,
$E_{min}/S_{min}$). Each exponent carries an interval; the law carries the range of
each input it was fitted on (``ranges``), so that a prediction outside it can say so
(`empirical_batch.laws.predict`). A published law whose coefficient is not confirmed
has ``coefficient`` NaN: it predicts only from an anchor (a batch measured at a
reference point).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Literal, get_args

import numpy as np
from scipy import stats

from ..errors import InputError
from ..params import Options
from ..result import Interval, Result

__all__ = ["INPUTS", "QUANTITIES", "ScalingLaw", "check_inputs", "law_from_dict"]

INPUTS = {"tokens": "tokens", "n_params": "parameters", "compute": "FLOPs",
          "loss": "nats per token"}
"""The inputs a law may take, with their units."""

Quantity = Literal["b_opt", "lr_opt", "b_crit"]
"""The quantities a law predicts."""

QUANTITIES = dict(zip(get_args(Quantity), ("optimal batch size", "optimal learning rate",
                                           "critical batch size"), strict=True))
"""Each quantity's meaning."""

_QUANTITY = Options.of(Quantity)


def check_inputs(inputs: Any) -> tuple[str, ...]:
    """``inputs`` as a tuple of known input names (a comma-separated string is split)."""
    if isinstance(inputs, str):
        inputs = [s.strip() for s in inputs.split(",") if s.strip()]
    out = tuple(inputs)
    unknown = [i for i in out if i not in INPUTS]
    if not out or unknown or len(set(out)) != len(out):
        raise InputError(f"inputs must be distinct names from {list(INPUTS)}, got "
                         f"{list(out)}")
    return out


@dataclasses.dataclass(frozen=True, repr=False)
class ScalingLaw(Result):
    r"""$y = a\prod_j x_j^{k_j}$ with intervals, fitted ranges and provenance.

    Attributes
    ----------
    name : str
    quantity : str
        ``"b_opt"``, ``"lr_opt"`` or ``"b_crit"``.
    inputs : tuple of str
        The $x_j$ (see `INPUTS`).
    coefficient, coefficient_interval : float, Interval
        $a$ and its interval (NaN where not known: the law then needs an anchor).
    exponents, exponent_intervals : tuple of float, tuple of Interval
        $k_j$ and their intervals (NaN ends where the source gives none).
    unit : str
        Unit of $y$: ``"tokens"``, ``"sequences"``, ``"examples"`` (batches) or
        ``"learning rate"``.
    ranges : tuple
        Per input, the ``(low, high)`` range the law was fitted on, or ``None`` where it
        is not known.
    n : int
        Points (cells) fitted; 0 for a published law.
    log_rmse : float
        Root-mean-square residual in $\log y$ (NaN for a published law).
    covariance : tuple of tuples, or None
        Covariance of $(\log a, k_1, \dots)$ of a fitted law (prediction intervals).
    dof : int
        Residual degrees of freedom of a fitted law.
    residuals : tuple of float
        $\log y_i - \log \hat y_i$ per fitted cell.
    source, citation, formula : str
        ``"fitted"`` or ``"published"``; the reference; the law as written.
    confirmed : bool
        Whether every constant was checked against the source's text.
    unconfirmed : str
        What is not confirmed (empty when ``confirmed``).
    notes : tuple of str
        Flags: an exponent interval that spans zero, inputs that move together, cells
        left out.
    """

    name: str
    quantity: str
    inputs: tuple[str, ...]
    coefficient: float
    coefficient_interval: Interval
    exponents: tuple[float, ...]
    exponent_intervals: tuple[Interval, ...]
    unit: str
    ranges: tuple[tuple[float, float] | None, ...]
    n: int = 0
    log_rmse: float = math.nan
    covariance: tuple[tuple[float, ...], ...] | None = dataclasses.field(default=None,
                                                                         repr=False)
    dof: int = 0
    residuals: tuple[float, ...] = dataclasses.field(default=(), repr=False)
    source: str = "fitted"
    citation: str = ""
    formula: str = ""
    confirmed: bool = True
    unconfirmed: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _QUANTITY.check(self.quantity, "quantity")
        check_inputs(self.inputs)
        if not (len(self.exponents) == len(self.exponent_intervals) == len(self.inputs)
                == len(self.ranges)):
            raise InputError("a law needs one exponent, interval and range per input")

    @property
    def level(self) -> float:
        """Confidence level of the intervals."""
        return self.exponent_intervals[0].level

    @property
    def exponent_interval(self) -> Interval:
        """The interval of the only exponent (a law in one input)."""
        if len(self.inputs) != 1:
            raise InputError(f"{self.name} has {len(self.inputs)} exponents: use "
                             "exponent_intervals")
        return self.exponent_intervals[0]

    def exponent(self, name: str) -> float:
        """The exponent of input ``name``."""
        return self.exponents[self._index(name)]

    def _index(self, name: str) -> int:
        if name not in self.inputs:
            raise InputError(f"{self.name} is a law in {list(self.inputs)}, not {name!r}")
        return self.inputs.index(name)

    @property
    def anchor_only(self) -> bool:
        """Whether the coefficient is unknown (predictions need an anchor)."""
        return not math.isfinite(self.coefficient)

    @property
    def spans_zero(self) -> tuple[str, ...]:
        """Inputs whose exponent interval contains 0 (growth not shown by the data)."""
        return tuple(i for i, ci in zip(self.inputs, self.exponent_intervals, strict=True)
                     if ci.low <= 0 <= ci.high)

    def at(self, point: Mapping[str, float]) -> np.ndarray:
        """The inputs of ``point`` in the law's order, checked > 0 and finite."""
        missing = [i for i in self.inputs if i not in point]
        if missing:
            raise InputError(f"{self.name} needs {list(self.inputs)}; missing {missing}")
        x = np.array([float(point[i]) for i in self.inputs])
        bad = [i for i, v in zip(self.inputs, x, strict=True)
               if not (math.isfinite(v) and v > 0)]
        if bad:
            raise InputError(f"{', '.join(bad)} must be finite and > 0, got "
                             f"{[point[b] for b in bad]}")
        return x

    def __call__(self, **point: float) -> float:
        """$a\\prod_j x_j^{k_j}$ at ``point`` (keyword inputs)."""
        x = self.at(point)
        if self.anchor_only:
            raise InputError(f"{self.name}: the coefficient is not known "
                             f"({self.unconfirmed or 'not given'}); predict from an anchor")
        return float(self.coefficient * np.prod(x ** np.array(self.exponents)))

    def interval_at(self, point: Mapping[str, float], level: float | None = None) -> Interval:
        """Confidence interval of the law's value at ``point``: from the covariance of a
        fitted law (Student-t, ``dof``), else NaN."""
        x = self.at(point)
        lvl = self.level if level is None else float(level)
        if self.covariance is None or self.dof < 1 or self.anchor_only:
            return Interval(math.nan, math.nan, lvl)
        z = np.concatenate([[1.0], np.log(x)])
        se = math.sqrt(max(float(z @ np.asarray(self.covariance) @ z), 0.0))
        t = float(stats.t.ppf((1 + lvl) / 2, self.dof))
        centre = math.log(self(**dict(zip(self.inputs, x, strict=True))))
        return Interval(math.exp(centre - t * se), math.exp(centre + t * se), lvl)

    def text(self) -> str:
        """The law as one line, with units and intervals."""
        a = "a" if self.anchor_only else f"{self.coefficient:.4g}"
        terms = []
        for i, k, ci in zip(self.inputs, self.exponents, self.exponent_intervals, strict=True):
            sym = {"tokens": "D", "n_params": "N", "compute": "C", "loss": "L"}[i]
            iv = f" [{ci.low:.3g}, {ci.high:.3g}]" if math.isfinite(ci.low) else ""
            terms.append(f"{sym}^{k:.4g}{iv}")
        return f"{self.quantity} = {a} · {' · '.join(terms)}  ({self.unit})"

    def range_text(self) -> str:
        parts = []
        for i, r in zip(self.inputs, self.ranges, strict=True):
            parts.append(f"{i} {r[0]:.3g}–{r[1]:.3g} {INPUTS[i]}" if r else
                         f"{i} range not recorded")
        return "; ".join(parts)

    def __repr__(self) -> str:
        text = f"ScalingLaw({self.name}: {self.text()}"
        text += f", n={self.n})" if self.n else ", published)"
        return text if len(text) <= 300 else text[:296] + "...)"

    def summary(self) -> str:
        lines = [repr(self), f"fitted on: {self.range_text()}"]
        if self.citation:
            lines.append(f"source: {self.citation}")
        if not self.confirmed:
            lines.append(f"unconfirmed: {self.unconfirmed}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["ranges"] = [list(r) if r else None for r in self.ranges]
        out["covariance"] = None if self.covariance is None else [list(r) for r in
                                                                  self.covariance]
        out["kind"] = "scaling_law"
        return out


def _interval(d: Any, level: float) -> Interval:
    if isinstance(d, Mapping):
        return Interval(_num(d.get("low")), _num(d.get("high")), float(d.get("level", level)))
    return Interval(math.nan, math.nan, level)


def _num(v: Any) -> float:
    if v is None:
        return math.nan
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    return float(v)


def law_from_dict(d: Mapping[str, Any]) -> ScalingLaw:
    """A `ScalingLaw` from its ``to_dict()`` (or ``--json``) form."""
    try:
        level = float(d.get("level", 0.95)) if "level" in d else 0.95
        ivs = tuple(_interval(i, level) for i in d["exponent_intervals"])
        cov = d.get("covariance")
        return ScalingLaw(
            name=str(d["name"]), quantity=str(d["quantity"]), inputs=tuple(d["inputs"]),
            coefficient=_num(d["coefficient"]),
            coefficient_interval=_interval(d.get("coefficient_interval"), level),
            exponents=tuple(_num(k) for k in d["exponents"]), exponent_intervals=ivs,
            unit=str(d["unit"]),
            ranges=tuple(tuple(map(_num, r)) if r else None  # type: ignore[misc]
                         for r in d["ranges"]),
            n=int(d.get("n", 0)), log_rmse=_num(d.get("log_rmse")),
            covariance=None if cov is None else tuple(tuple(map(_num, r)) for r in cov),
            dof=int(d.get("dof", 0)), residuals=tuple(map(_num, d.get("residuals", ()))),
            source=str(d.get("source", "fitted")), citation=str(d.get("citation", "")),
            formula=str(d.get("formula", "")), confirmed=bool(d.get("confirmed", True)),
            unconfirmed=str(d.get("unconfirmed", "")), notes=tuple(d.get("notes", ())))
    except (KeyError, TypeError, ValueError) as exc:
        from ..errors import DataError

        raise DataError(f"not a scaling law ({type(exc).__name__}: {exc}); expected the "
                        "output of `empirical-batch law fit --json`") from None
