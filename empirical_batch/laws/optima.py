r"""Per-cell optima of a grid: $B_{opt}$, $\eta_{opt}$ or $B_{crit}$ in each $(N, D)$ cell.

**Loss grids.** In each cell the runs whose loss is within a relative ``band`` of the
cell's best, $L \le L_{best}(1 + \text{band})$ (0.25 % by default: DeepSeek LLM 2024
§3.1, and the ``filter_threshold`` of StepLaw's fitting code), form the near-optimal
band; $B_{opt}$ and $\eta_{opt}$ are the band's geometric means,

$$B_{opt} = \exp\Big(\frac{1}{|\mathcal{B}|}\sum_{i\in\mathcal{B}} \log B_i\Big), \qquad
\eta_{opt} = \exp\Big(\frac{1}{|\mathcal{B}|}\sum_{i\in\mathcal{B}} \log \eta_i\Big),$$

as `empirical_batch.budget.fit_fixed_budget` does. Their intervals come from a residual
bootstrap of the loss surface: a quadratic in $(\log B, \log\eta)$ is fitted by least
squares to the runs within $\max(10\cdot\text{band}, 2\,\%)$ of the best loss, its
residuals are resampled onto the fitted values, and the band is re-read on each draw
(percentile interval, widened to contain the estimate). A band that touches the
smallest or largest batch size (learning rate) tried in its cell makes that optimum a
bound: it is flagged (``b_opt_at_edge``) and left out of laws.

**Steps grids.** In each cell $S(B) = S_{min}(1 + B_{crit}/B)$ is fitted
(`empirical_batch.fit.fit_tradeoff`, eq. 2.11 of McCandlish et al. 2018) with its
interval; a $B_{crit}$ that is not identified (a bound) is flagged and left out.

**Estimator.** The band's geometric mean (``estimator="band"``, the default) can only
take values on the grid's batch sizes and their means: with a narrow band it is the tried
batch nearest the optimum, an error of up to half a grid step in $\log B$ that is the
same in every bootstrap draw (the bootstrap moves the band, not the grid) and that, across
cells, is not independent noise. ``estimator="vertex"`` reads the optimum off the
quadratic surface instead: the minimum of the quadratic in $(\log B, \log\eta)$ fitted
for the bootstrap, refitted on every draw for its interval. A vertex outside the tried
range, a surface that is not convex, or a band that touches the edge makes it a bound.

A cell with fewer than three batch sizes has no optimum to read: `cell_optima` raises
`NotEnoughBatchSizes` naming it.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Literal, get_args

import numpy as np
import pandas as pd

from .._validate import check_count, check_level
from ..errors import FitError, InputError
from ..fit.tradeoff_fit import FitWarning, NotEnoughBatchSizes, fit_tradeoff
from ..params import NON_NEGATIVE, REAL, instance_of, validate_params
from ..result import TableResult
from .grid import RunGrid

__all__ = ["CellOptima", "cell_optima"]

DEFAULT_BAND = 0.0025


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class CellOptima(TableResult):
    """One row per $(N, D)$ cell (see the module's text).

    ``frame`` columns: ``cell``, ``n_params``, ``tokens``, ``compute`` ($6ND$ FLOPs
    where both are known), ``loss`` (the cell's best loss, or its target), the number
    of batch sizes, and per quantity ``q`` in ``b_opt``, ``lr_opt`` (loss grids) or
    ``b_crit`` (steps grids): ``q``, ``q_low``, ``q_high`` and ``q_at_edge``.
    """

    kind: str = "loss"
    unit: str = "tokens"
    band: float = DEFAULT_BAND
    level: float = 0.95
    n_boot: int = 0
    tokens_per_sequence: float | None = None
    estimator: str = "band"

    @property
    def quantities(self) -> tuple[str, ...]:
        """The optima held: ``("b_opt", "lr_opt")`` or ``("b_crit",)``."""
        return ("b_opt", "lr_opt") if self.kind == "loss" else ("b_crit",)

    def __repr__(self) -> str:
        q = self.quantities[0]
        edge = int(self.frame[f"{q}_at_edge"].sum())
        return (f"CellOptima({len(self.frame)} cells, {q} in {self.unit}, {edge} at the "
                f"grid's edge, band {self.band:.2%})")

    def summary(self) -> str:
        return f"{self!r}\n{self.frame.to_string(index=False)}"


Estimator = Literal["band", "vertex"]
"""How `cell_optima` locates a cell's optimum: the near-optimal band or the parabola's vertex."""
ESTIMATORS = get_args(Estimator)


@validate_params(grid=instance_of(RunGrid, what="a RunGrid (load_grid)"),
                 band=REAL.within(NON_NEGATIVE), level="level", estimator=Estimator)
def cell_optima(grid: RunGrid, *, band: float = DEFAULT_BAND, n_boot: int = 200,
                level: float | None = None, seed: int = 0,
                estimator: Estimator = "band") -> CellOptima:
    """$B_{opt}$ and $\\eta_{opt}$ (loss grids) or $B_{crit}$ (steps grids) per cell,
    with intervals and edge flags (see the module's text)."""
    band = float(band)
    n_boot = check_count(n_boot, "n_boot", 0)
    lvl = check_level(level)
    rng = np.random.default_rng(seed)
    short = []
    rows = []
    for cell, g in grid.frame.groupby("cell", sort=False):
        nb = int(g["batch_size"].nunique())
        if nb < 3:
            short.append(f"{cell} ({nb})")
            continue
        n_params, tokens = float(g["n_params"].iloc[0]), float(g["tokens"].iloc[0])
        base: dict[str, object] = {"cell": cell, "n_params": n_params, "tokens": tokens,
                                   "n_batch_sizes": nb, "n_runs": len(g),
                                   "compute": 6.0 * n_params * tokens}
        if grid.kind == "loss":
            base.update(_loss_cell(g, float(band), n_boot, lvl, rng, estimator))
        else:
            base.update(_steps_cell(g, n_boot, lvl, rng, grid.unit))
        rows.append(base)
    if short:
        raise NotEnoughBatchSizes(
            f"cells with fewer than 3 batch sizes (an optimum needs a smaller and a larger "
            f"batch on each side): {', '.join(short)}")
    frame = pd.DataFrame(rows)
    return CellOptima(frame=frame, kind=grid.kind, unit=grid.unit, band=float(band),
                      level=lvl, n_boot=n_boot, estimator=estimator,
                      tokens_per_sequence=grid.tokens_per_sequence)


def _design(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    cols = [np.ones_like(x), x, x * x]
    if np.ptp(y) > 0:
        cols += [y, y * y, x * y]
    return np.column_stack(cols)


def _band_centres(losses: np.ndarray, lb: np.ndarray, llr: np.ndarray,
                  band: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Geometric means of B and lr over the band of each row of ``losses`` (draws ×
    runs), and the band masks."""
    best = np.min(losses, axis=-1, keepdims=True)
    near = losses <= best + band * np.abs(best)
    w = near / near.sum(axis=-1, keepdims=True)
    return np.exp(w @ lb), np.exp(w @ llr), near


def _loss_cell(g: pd.DataFrame, band: float, n_boot: int, level: float,
               rng: np.random.Generator, estimator: str = "band"
               ) -> dict[str, float | bool | int]:
    b = g["batch_size"].to_numpy(float)
    lr = g["learning_rate"].to_numpy(float)
    loss = g["loss"].to_numpy(float)
    if not np.isfinite(loss).any():
        raise InputError(f"every run in cell {g['cell'].iloc[0]} diverged (loss inf)")
    lb, llr = np.log(b), np.log(lr)
    b_opt, lr_opt, near = _band_centres(loss[None, :], lb, llr, band)
    near = near[0]
    out: dict[str, float | bool | int] = {
        "loss": float(np.min(loss)), "n_band": int(near.sum()),
        "b_opt": float(b_opt[0]), "lr_opt": float(lr_opt[0]),
        "b_opt_at_edge": bool(np.isin(b[near], [b.min(), b.max()]).any()),
        "lr_opt_at_edge": bool(np.isin(lr[near], [lr.min(), lr.max()]).any()),
    }
    surface = _surface(b, lr, loss, band)
    if estimator == "vertex":
        vb, vl = (np.array([math.nan]), np.array([math.nan])) if surface is None else \
            _vertices(surface[0], surface[1][None, :], llr)
        for q, v, tried in (("b_opt", vb[0], b), ("lr_opt", vl[0], lr)):
            inside = math.isfinite(v) and tried.min() <= v <= tried.max()
            out[q] = float(v) if math.isfinite(v) else out[q]
            out[f"{q}_at_edge"] = bool(out[f"{q}_at_edge"]) or not inside
    ci = _bootstrap(surface, b, lr, loss, band, n_boot, level, rng, estimator)
    for q in ("b_opt", "lr_opt"):
        lo, hi = ci[q]
        out[f"{q}_low"] = min(lo, float(out[q]))
        out[f"{q}_high"] = max(hi, float(out[q]))
    return out


def _surface(b: np.ndarray, lr: np.ndarray, loss: np.ndarray, band: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The quadratic in $(\\log B, \\log\\eta)$ fitted near the best loss: its design
    matrix, the losses it was fitted to, its fitted values and the window (or None)."""
    finite = np.isfinite(loss)
    best = loss[finite].min()
    window = finite & (loss <= best + max(10 * band, 0.02) * abs(best))
    x, y = np.log(b), np.log(lr)
    X = _design(x[window], y[window])
    if window.sum() <= X.shape[1]:
        window = finite
        X = _design(x[window], y[window])
        if window.sum() <= X.shape[1]:
            return None
    coef, *_ = np.linalg.lstsq(X, loss[window], rcond=None)
    return X, loss[window], X @ coef, window


def _vertices(X: np.ndarray, losses: np.ndarray, llr: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The minimum of the quadratic fitted to each row of ``losses`` (draws × window
    runs), as $(B, \\eta)$; NaN where the quadratic is not convex."""
    coef = np.linalg.lstsq(X, losses.T, rcond=None)[0].T
    if X.shape[1] == 3:  # one learning rate: a parabola in log B
        c1, c2 = coef[:, 1], coef[:, 2]
        ok = c2 > 0
        xb = np.where(ok, -c1 / np.where(ok, 2 * c2, 1.0), np.nan)
        return np.exp(xb), np.where(ok, math.exp(float(np.mean(llr))), np.nan)
    c1, c2, c3, c4, c5 = (coef[:, i] for i in range(1, 6))
    det = 4 * c2 * c4 - c5 * c5
    ok = (c2 > 0) & (det > 0)
    d = np.where(ok, det, 1.0)
    xb = np.where(ok, (-2 * c4 * c1 + c5 * c3) / d, np.nan)
    yl = np.where(ok, (-2 * c2 * c3 + c5 * c1) / d, np.nan)
    return np.exp(xb), np.exp(yl)


def _bootstrap(surface: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None,
               b: np.ndarray, lr: np.ndarray, loss: np.ndarray, band: float,
               n_boot: int, level: float, rng: np.random.Generator,
               estimator: str = "band") -> dict[str, tuple[float, float]]:
    nan = {"b_opt": (math.nan, math.nan), "lr_opt": (math.nan, math.nan)}
    if n_boot == 0 or surface is None:
        return nan
    X, _, fitted, window = surface
    x, y = np.log(b), np.log(lr)
    resid = loss[window] - fitted
    resid = (resid - resid.mean()) * math.sqrt(len(resid) / (len(resid) - X.shape[1]))
    draws = np.broadcast_to(loss, (n_boot, len(loss))).copy()
    draws[:, window] = fitted + resid[rng.integers(0, len(resid), (n_boot, len(resid)))]
    if estimator == "vertex":
        bb, ll = _vertices(X, draws[:, window], y)
        bb, ll = bb[np.isfinite(bb)], ll[np.isfinite(ll)]
        if bb.size < 2 or ll.size < 2:
            return nan
    else:
        bb, ll, _ = _band_centres(draws, x, y, band)
    q = [(1 - level) / 2, (1 + level) / 2]
    b_lo, b_hi = np.quantile(bb, q)
    l_lo, l_hi = np.quantile(ll, q)
    return {"b_opt": (float(b_lo), float(b_hi)), "lr_opt": (float(l_lo), float(l_hi))}


def _steps_cell(g: pd.DataFrame, n_boot: int, level: float, rng: np.random.Generator,
                unit: str) -> dict[str, float | bool | int | str]:
    steps = g["steps"].to_numpy(float)
    table = pd.DataFrame({"batch_size": g["batch_size"].to_numpy(float),
                          "steps": np.where(np.isfinite(steps), steps, np.nan),
                          "reached": np.isfinite(steps)})
    target = float(g["target_loss"].iloc[0]) if "target_loss" in g.columns else math.nan
    out: dict[str, float | bool | int | str] = {"loss": target}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)
            fit = fit_tradeoff(table, n_boot=max(n_boot, 1), level=level,
                               seed=int(rng.integers(2**31)), unit=unit)
    except FitError as exc:
        out.update({"b_crit": math.nan, "b_crit_low": math.nan, "b_crit_high": math.nan,
                    "b_crit_at_edge": True, "b_crit_status": f"not fitted: {exc}",
                    "s_min": math.nan})
        return out
    out.update({"b_crit": fit.b_crit, "b_crit_low": fit.b_crit_interval.low,
                "b_crit_high": fit.b_crit_interval.high,
                "b_crit_at_edge": fit.status != "identified", "b_crit_status": fit.status,
                "s_min": fit.s_min})
    return out
