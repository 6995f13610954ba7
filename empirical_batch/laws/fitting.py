r"""Fit batch-size laws over several inputs, and choose between "D only" and "N and D".

`fit_law` fits $\log y_i = \log a + \sum_j k_j \log x_{ij} + e_i$ by ordinary least
squares over the cells whose optimum is inside its grid (cells at an edge hold a
bound, not a value, and are left out with a `FitWarning`). With design matrix $Z$
(a column of ones and the $\log x_j$), $\hat\theta = (Z^\top Z)^{-1}Z^\top \log y$,
$s^2 = \mathrm{RSS}/(n-p)$ and $\operatorname{Cov}\hat\theta = s^2 (Z^\top Z)^{-1}$;
each exponent's interval is $\hat k_j \pm t_{n-p}\,\mathrm{se}(\hat k_j)$. An interval
that spans zero is flagged (the data do not show $y$ moving with that input), and so
are inputs that move together across the cells ($|r(\log N, \log D)| > 0.98$: their
exponents cannot be told apart, as in a grid along one tokens-per-parameter ratio).

`select_law` fits "D only" ($y = a D^{k}$) and "N and D" ($y = a N^{k_N} D^{k_D}$)
and keeps the larger law only when the data support it: the F test of the added
exponent, $F = (\mathrm{RSS}_D - \mathrm{RSS}_{ND}) / (\mathrm{RSS}_{ND}/(n-3))$
on $(1, n-3)$ degrees of freedom, below ``alpha``; the small-sample AIC
$\mathrm{AIC_c} = n\log(\mathrm{RSS}/n) + 2p + 2p(p+1)/(n-p-1)$ of both is reported.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from .._validate import check_level
from ..errors import FitError, InputError, warn
from ..fit.tradeoff_fit import FitWarning
from ..params import instance_of, validate_params
from ..result import Interval, Result
from .law import INPUTS, QUANTITIES, ScalingLaw, check_inputs
from .optima import CellOptima

__all__ = ["LawSelection", "fit_law", "fit_points", "select_law"]


def fit_points(x: np.ndarray, y: np.ndarray, inputs: tuple[str, ...], *, quantity: str,
               unit: str, level: float = 0.95, name: str = "fitted") -> ScalingLaw:
    """Least squares of $\\log y$ on $\\log x$ (columns of ``x`` in ``inputs`` order)."""
    x = np.asarray(x, float).reshape(len(y), -1)
    y = np.asarray(y, float)
    if x.shape[1] != len(inputs):
        raise InputError(f"x has {x.shape[1]} columns for {len(inputs)} inputs")
    if np.any(~np.isfinite(x)) or np.any(x <= 0) or np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise InputError("a power law is fitted to finite values > 0 only")
    n, p = len(y), len(inputs) + 1
    if n < p + 1:
        raise FitError(f"a law in {list(inputs)} with intervals needs at least {p + 1} "
                       f"cells, got {n}")
    z = np.column_stack([np.ones(n), np.log(x)])
    if np.linalg.matrix_rank(z) < p:
        raise FitError(f"the cells do not vary in {list(inputs)} independently (each input "
                       "needs at least two values, and no input may follow another exactly)")
    ly = np.log(y)
    theta, *_ = np.linalg.lstsq(z, ly, rcond=None)
    resid = ly - z @ theta
    dof = n - p
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.inv(z.T @ z)
    t = float(stats.t.ppf((1 + level) / 2, dof))
    se = np.sqrt(np.diag(cov))
    notes = []
    ivs = tuple(Interval(theta[j + 1] - t * se[j + 1], theta[j + 1] + t * se[j + 1], level)
                for j in range(len(inputs)))
    for name_j, ci in zip(inputs, ivs, strict=True):
        if ci.low <= 0 <= ci.high:
            notes.append(f"the interval of the {name_j} exponent [{ci.low:.3g}, "
                         f"{ci.high:.3g}] spans zero: the data do not show {quantity} "
                         f"moving with {name_j}")
    if len(inputs) > 1:
        r = np.corrcoef(np.log(x).T)
        for i in range(len(inputs)):
            for j in range(i + 1, len(inputs)):
                if abs(r[i, j]) > 0.98:
                    notes.append(f"{inputs[i]} and {inputs[j]} move together across the "
                                 f"cells (r = {r[i, j]:.3f} in log): their exponents "
                                 "cannot be told apart")
    la = float(theta[0])
    return ScalingLaw(
        name=name, quantity=quantity, inputs=inputs, coefficient=math.exp(la),
        coefficient_interval=Interval(math.exp(la - t * se[0]), math.exp(la + t * se[0]),
                                      level),
        exponents=tuple(float(k) for k in theta[1:]), exponent_intervals=ivs, unit=unit,
        ranges=tuple((float(x[:, j].min()), float(x[:, j].max()))
                     for j in range(len(inputs))),
        n=n, log_rmse=float(np.sqrt(np.mean(resid**2))),
        covariance=tuple(tuple(float(v) for v in row) for row in cov), dof=dof,
        residuals=tuple(float(r) for r in resid), source="fitted",
        formula=" · ".join(f"{i}^k" for i in inputs), notes=tuple(notes))


OPTIMA = instance_of(CellOptima, what="a CellOptima (cell_optima)")
"""The constraint of an ``optima`` parameter."""


def _usable(optima: CellOptima, quantity: str, inputs: tuple[str, ...]) -> pd.DataFrame:
    if quantity not in optima.quantities:
        raise InputError(f"a {optima.kind} grid gives {list(optima.quantities)}, not "
                         f"{quantity!r}" + (" (b_crit needs a steps-to-target grid)"
                                            if quantity == "b_crit" else ""))
    f = optima.frame
    for i in inputs:
        if i not in f.columns or not np.isfinite(f[i].to_numpy(float)).all():
            raise InputError(f"the grid has no {i} for every cell ({INPUTS[i]}); fit the "
                             f"law in inputs the grid holds")
    edge = f[f"{quantity}_at_edge"].to_numpy(bool) | ~np.isfinite(f[quantity].to_numpy(float))
    if edge.all():
        raise FitError(f"the {QUANTITIES[quantity]} is at the edge of its grid (or not "
                       f"identified) in every one of the {len(f)} cells: each is only a "
                       "bound; widen the grid of batch sizes (and learning rates)")
    if edge.any():
        warn(f"{quantity}: {int(edge.sum())} of {len(f)} cells with the optimum at "
                      f"the grid's edge left out of the law ({', '.join(f['cell'][edge])})",
                      FitWarning)
    usable: pd.DataFrame = f[~edge]
    return usable


@validate_params(optima=OPTIMA, level="level")
def fit_law(optima: CellOptima, quantity: str = "b_opt", inputs: Any = ("tokens",), *,
            level: float | None = None, name: str | None = None) -> ScalingLaw:
    """Fit ``quantity`` (``b_opt``, ``lr_opt`` or ``b_crit``) as a power law in
    ``inputs`` over the cells of ``optima`` (see the module's text)."""
    inputs = check_inputs(inputs)
    lvl = check_level(level)
    f = _usable(optima, quantity, inputs)
    unit = "learning rate" if quantity == "lr_opt" else optima.unit
    law = fit_points(f[list(inputs)].to_numpy(float), f[quantity].to_numpy(float), inputs,
                     quantity=quantity, unit=unit, level=lvl,
                     name=name or f"{quantity}({','.join(inputs)})")
    left = len(optima.frame) - len(f)
    if left:
        note = f"{left} cell(s) with the optimum at the grid's edge left out"
        law = dataclasses.replace(law, notes=(*law.notes, note))
    for note in law.notes:
        warn(f"{law.name}: {note}", FitWarning)
    return law


@dataclasses.dataclass(frozen=True, repr=False)
class LawSelection(Result):
    """"D only" against "N and D" for one quantity (see `select_law`)."""

    quantity: str
    chosen: str
    reason: str
    d_only: ScalingLaw
    n_and_d: ScalingLaw | None
    f_statistic: float
    p_value: float
    aicc_d_only: float
    aicc_n_and_d: float

    @property
    def law(self) -> ScalingLaw:
        """The law the data support."""
        return self.d_only if self.chosen == "tokens" or self.n_and_d is None else \
            self.n_and_d

    def __repr__(self) -> str:
        return f"LawSelection({self.quantity}: {self.chosen!r}; {self.reason})"[:300]

    def summary(self) -> str:
        parts = [repr(self), self.d_only.summary()]
        if self.n_and_d is not None:
            parts.append(self.n_and_d.summary())
        return "\n".join(parts)


def _aicc(law: ScalingLaw) -> float:
    n, p = law.n, len(law.inputs) + 1
    rss = float(np.sum(np.square(law.residuals)))
    if n - p - 1 <= 0 or rss <= 0:
        return math.nan
    return n * math.log(rss / n) + 2 * p + 2 * p * (p + 1) / (n - p - 1)


@validate_params(optima=OPTIMA, level="level")
def select_law(optima: CellOptima, quantity: str = "b_opt", *, alpha: float = 0.05,
               level: float | None = None) -> LawSelection:
    """Fit $y = aD^k$ and $y = aN^{k_N}D^{k_D}$; keep "N and D" only when the F test
    of the added exponent is below ``alpha`` and its interval excludes zero."""
    lvl = check_level(level)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        d_only = fit_law(optima, quantity, ("tokens",), level=lvl)
        try:
            both = fit_law(optima, quantity, ("n_params", "tokens"), level=lvl)
        except FitError as exc:
            return LawSelection(quantity, "tokens", f"N and D not fitted: {exc}", d_only, None,
                                math.nan, math.nan, _aicc(d_only), math.nan)
    rss_d = float(np.sum(np.square(d_only.residuals)))
    rss_nd = float(np.sum(np.square(both.residuals)))
    dof = both.dof
    f_stat = (rss_d - rss_nd) / (rss_nd / dof) if rss_nd > 0 else math.inf
    p = float(stats.f.sf(f_stat, 1, dof)) if math.isfinite(f_stat) else 0.0
    collinear = any("move together" in n for n in both.notes)
    n_ci = both.exponent_intervals[0]
    if collinear:
        chosen, reason = "tokens", ("N and D move together across the cells; the data "
                                    "cannot tell an N exponent from a D exponent")
    elif p < alpha and not (n_ci.low <= 0 <= n_ci.high):
        chosen = "n_params,tokens"
        reason = (f"adding N lowers the residuals (F = {f_stat:.3g}, p = {p:.3g}); "
                  f"N exponent {both.exponents[0]:.3g} [{n_ci.low:.3g}, {n_ci.high:.3g}]")
    else:
        chosen = "tokens"
        reason = (f"adding N is not supported (F = {f_stat:.3g}, p = {p:.3g}; N exponent "
                  f"{both.exponents[0]:.3g} [{n_ci.low:.3g}, {n_ci.high:.3g}])")
    return LawSelection(quantity, chosen, reason, d_only, both, float(f_stat), p,
                        _aicc(d_only), _aicc(both))
