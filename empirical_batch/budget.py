r"""The batch size and learning rate that minimise the loss at a fixed budget.

Many teams choose the batch size not by the critical batch but by a compute-optimal
law fitted to a grid of *final* losses: for each budget $C$ (compute, tokens
$D$ or model size $N$) train a grid of (batch size, learning rate), keep the
configurations within a small relative tolerance of the best loss (the near-optimal
band), and fit power laws through the band,

$$
B_{opt}(C) = b\,C^{\beta}, \qquad \eta_{opt}(C) = e\,C^{\gamma}.
$$

DeepSeek LLM (2024) finds $B_{opt} = 0.292\,C^{0.3271}$ tokens and
$\eta_{opt} = 0.3118\,C^{-0.1250}$ (C in FLOPs, band within 0.25 % of the best
loss); the Step Law study (Li et al. 2025) finds $B_{opt}$ depending mainly on the
data size $D$ and $\eta_{opt}$ on both $N$ and $D$.

**B_opt is not B_crit.** $B_{opt}$ minimises the final loss at a fixed budget;
$B_{crit} = E_{min}/S_{min}$ (McCandlish et al. 2018) describes the trade of steps
for examples at a fixed *target*: at $B_{crit}$ a run takes twice the minimal steps
and twice the minimal examples. At a fixed compute budget a batch far above
$B_{crit}$ wastes examples and one far below wastes nothing but takes many steps,
so $B_{opt}$ sits at or below $B_{crit}$ of the loss the budget reaches
whenever the number of steps is not itself limited; the two answer different questions
and are reported side by side (`FixedBudgetFit.compare`).

References
----------
DeepSeek-AI. "DeepSeek LLM: Scaling Open-Source Language Models with Longtermism."
arXiv:2401.02954 (2024), §3.1.

H. Li, W. Zheng, Q. Wang, H. Zhang, Z. Wang, S. Xuyang, Y. Fan, Z. Ding, H. Wang,
N. Ding, S. Zhou, X. Zhang, D. Jiang. "Predictable Scale: Part I — Optimal Hyperparameter
Scaling Law in Large Language Model Pretraining" (Step Law). arXiv:2503.04715 (2025).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ._validate import as_float, check_level
from .errors import InputError, warn
from .fit.power_law import PowerLaw, fit_power_law
from .fit.tradeoff_fit import FitWarning
from .params import INTEGER, Domain, instance_of, removed_keywords, validate_params
from .result import Interval, Result

__all__ = ["FixedBudgetFit", "fit_fixed_budget"]


@dataclass(frozen=True, repr=False)
class FixedBudgetFit(Result):
    """The result of `fit_fixed_budget`.

    Attributes
    ----------
    budget_name : str
        The budget column (e.g. ``"compute"``, ``"tokens"``, ``"params"``).
    optima : pandas.DataFrame
        Per budget: the best configuration (``best_batch_size``, ``best_learning_rate``,
        ``best_loss``), the band's size and its geometric-mean ``b_opt`` and ``lr_opt``.
    band : pandas.DataFrame
        Every configuration within ``tolerance`` of its budget's best loss.
    b_opt, lr_opt : PowerLaw
        Least-squares power laws through the per-budget ``b_opt`` and ``lr_opt``.
    b_opt_exponent_interval, lr_opt_exponent_interval : Interval
        Residual-bootstrap percentile intervals of the exponents, at confidence
        ``level``.
    b_opt_status, lr_opt_status : str
        ``"identified"`` when the law is fitted through at least 3 budgets whose
        near-optimal band stays inside that budget's grid; ``"unidentified"`` otherwise
        (the law's values are then NaN: an optimum at the smallest or largest value
        tried is only a bound, e.g. a flat loss or every optimum at the largest batch).
        Budgets at the edge are flagged in ``optima`` (``b_opt_at_edge``,
        ``lr_opt_at_edge``) and left out of the law.
    """

    budget_name: str
    tolerance: float
    optima: pd.DataFrame = field(repr=False)
    band: pd.DataFrame = field(repr=False)
    b_opt: PowerLaw
    lr_opt: PowerLaw
    b_opt_exponent_interval: Interval
    lr_opt_exponent_interval: Interval
    n_boot: int
    b_opt_status: str = "identified"
    lr_opt_status: str = "identified"

    @property
    def level(self) -> float:
        """Confidence level of the intervals."""
        return self.b_opt_exponent_interval.level

    def batch_size(self, budget: ArrayLike) -> np.ndarray | float:
        """$B_{opt}$ at ``budget`` from the fitted power law."""
        out: np.ndarray | float = self.b_opt(budget)
        return out

    def learning_rate(self, budget: ArrayLike) -> np.ndarray | float:
        """$\\eta_{opt}$ at ``budget`` from the fitted power law."""
        out: np.ndarray | float = self.lr_opt(budget)
        return out

    @validate_params(budget=Domain(0.0, meaning="training budget"), b_crit="b_crit")
    def compare(self, b_crit: float, budget: float) -> dict[str, Any]:
        """$B_{opt}(C)$ next to a $B_{crit}$ (e.g. fitted at the loss the
        budget reaches), with what each means."""
        c = as_float(budget, "budget")
        bc = as_float(b_crit, "b_crit")
        b = float(self.b_opt(c))
        ratio = b / bc
        if math.isinf(ratio):
            raise InputError(f"b_crit={bc!r} is so small that B_opt/b_crit = {b:g}/{bc:g} is "
                             "past the float range: give b_crit in the unit of the fit's "
                             "batch sizes")
        return {
            "budget": c, "b_opt": b, "b_crit": bc,
            "b_opt_over_b_crit": ratio,
            "b_opt_means": "the batch that minimises the final loss at this budget",
            "b_crit_means": "the batch at which reaching a fixed target costs twice the "
                            "minimal steps and twice the minimal examples",
        }

    def _law_text(self, what: str, law: PowerLaw, ci: Interval, status: str, edge: str) -> str:
        if status != "identified":
            n = int(self.optima[edge].sum())
            return f"{what} not identified (at the grid's edge at {n} of {len(self.optima)} " \
                   "budgets)"
        return f"{what} ∝ {self.budget_name}^{law.exponent:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"

    def __repr__(self) -> str:
        b = self._law_text("B_opt", self.b_opt, self.b_opt_exponent_interval, self.b_opt_status,
                           "b_opt_at_edge")
        lr = self._law_text("lr_opt", self.lr_opt, self.lr_opt_exponent_interval,
                            self.lr_opt_status, "lr_opt_at_edge")
        return (f"FixedBudgetFit({b}, {lr}, {len(self.optima)} budgets, tolerance "
                f"{self.tolerance:.2%})")

    def summary(self) -> str:
        return f"{self!r}\n{self.optima.to_string(index=False)}"

    def to_frame(self) -> pd.DataFrame:
        return self.optima.copy()

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_name": self.budget_name, "tolerance": self.tolerance,
            "b_opt": self.b_opt.to_dict(), "lr_opt": self.lr_opt.to_dict(),
            "b_opt_exponent_interval": self.b_opt_exponent_interval.to_dict(),
            "lr_opt_exponent_interval": self.lr_opt_exponent_interval.to_dict(),
            "n_boot": self.n_boot,
            "b_opt_status": self.b_opt_status, "lr_opt_status": self.lr_opt_status,
            "optima": self.optima.to_dict(orient="records"),
            "band": self.band.to_dict(orient="records"),
        }


def _column(frame: pd.DataFrame, name: str, what: str) -> np.ndarray:
    if name not in frame.columns:
        raise InputError(f"{what} column {name!r} not in the table; columns are "
                         f"{list(frame.columns)}")
    col = frame[name]
    if col.dtype == bool or not pd.api.types.is_numeric_dtype(col):
        raise InputError(f"{what} column {name!r} must be numeric, got dtype {col.dtype}")
    v = col.to_numpy(dtype=float)
    if not np.all(np.isfinite(v)):
        bad = np.flatnonzero(~np.isfinite(v))[:5].tolist()
        raise InputError(f"{what} column {name!r} has non-finite values at rows {bad}")
    return v


def _residual_bootstrap(x: np.ndarray, y: np.ndarray, n_boot: int, ci: float,
                        rng: np.random.Generator) -> tuple[float, float]:
    """Percentile interval of the log-log slope: residuals of the least-squares line
    resampled (scaled by sqrt(n/(n-2)) for the two fitted parameters), refitted."""
    lx, ly = np.log(x), np.log(y)
    n = len(lx)
    xc = lx - lx.mean()
    k = float(np.sum(xc * (ly - ly.mean())) / np.sum(xc * xc))
    fitted = ly.mean() + k * xc
    resid = ly - fitted
    draws = fitted + math.sqrt(n / (n - 2)) * resid[rng.integers(0, n, size=(n_boot, n))]
    slopes = np.sum(xc * (draws - draws.mean(1, keepdims=True)), 1) / np.sum(xc * xc)
    lo, hi = np.quantile(slopes, [(1 - ci) / 2, (1 + ci) / 2])
    return min(float(lo), k), max(float(hi), k)


@removed_keywords(ci="level")
@validate_params(tolerance=Domain(0.0, low_open=False, meaning="relative loss tolerance of "
                                  "the near-optimal band"),
                 frame=instance_of(pd.DataFrame, what="a pandas DataFrame"),
                 n_boot=INTEGER.within("n_boot"), level="level")
def fit_fixed_budget(
    frame: pd.DataFrame,
    *,
    budget: str = "compute",
    loss: str = "loss",
    batch_size: str = "batch_size",
    learning_rate: str = "learning_rate",
    tolerance: float = 0.0025,
    n_boot: int = 1000,
    level: float | None = None,
    seed: int | np.random.Generator | None = 0,
) -> FixedBudgetFit:
    r"""Near-optimal band and power laws $B_{opt}(C)$, $\eta_{opt}(C)$.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per trained configuration: the budget, the batch size, the learning
        rate and the final loss (lower is better; diverged runs as ``inf`` or left out).
    budget, loss, batch_size, learning_rate : str
        Column names.
    tolerance : float
        Relative tolerance of the band: a configuration is near-optimal when its loss
        is at most ``best * (1 + tolerance)`` (DeepSeek LLM: 0.25 %).
    n_boot, level, seed
        Interval level. Bootstrap of the exponents: the residuals of each log-log line
        resampled (scaled by $\sqrt{n/(n-2)}$); the laws' own Student-t intervals are in
        ``b_opt.exponent_interval`` and ``lr_opt.exponent_interval``.

    Returns
    -------
    FixedBudgetFit

    Notes
    -----
    Per budget the band's batch sizes and learning rates are summarised by their
    geometric means (a grid of powers of two makes the single best point jump between
    neighbours; the band's centre moves smoothly), and the power laws are fitted
    through those centres by least squares in log space.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> def loss(c, b, lr):  # the optimum moves as B* = 0.3 C^0.33, lr* = 0.3 C^-0.125
    ...     return 2 + 0.01 * (np.log(b / (0.3 * c**0.33))**2 + np.log(lr * c**0.125 / 0.3)**2)
    >>> rows = [(c, b, lr, loss(c, b, lr)) for c in np.geomspace(1e17, 1e21, 9)
    ...         for b in 2.0 ** np.arange(8, 26) for lr in np.geomspace(1e-5, 1, 25)]
    >>> f = fit_fixed_budget(pd.DataFrame(rows, columns=["compute", "batch_size",
    ...                      "learning_rate", "loss"]), n_boot=200)
    >>> round(f.b_opt.exponent, 1), round(f.lr_opt.exponent, 1)
    (0.3, -0.1)

    (Powers of two quantise the band: with exact losses the exponent comes out 0.347;
    with noisy losses, ``tests/test_budget.py`` checks the intervals' coverage.)
    """
    tolerance = as_float(tolerance, "tolerance")
    ci = check_level(level)
    c = _column(frame, budget, "budget")
    b = _column(frame, batch_size, "batch size")
    lr = _column(frame, learning_rate, "learning rate")
    if loss not in frame.columns:
        raise InputError(f"loss column {loss!r} not in the table; columns are "
                         f"{list(frame.columns)}")
    y = pd.to_numeric(frame[loss], errors="coerce").to_numpy(dtype=float)
    if np.isnan(y).any():
        raise InputError(f"loss column {loss!r} has missing or non-numeric values "
                         f"(diverged runs: use inf)")
    for name, v in ((budget, c), (batch_size, b), (learning_rate, lr)):
        if np.any(v <= 0):
            raise InputError(f"column {name!r} must be > 0")
    rows, band = [], []
    for cb in np.unique(c):
        m = c == cb
        ym = y[m]
        if not np.isfinite(ym).any():
            raise InputError(f"every run at {budget}={cb:g} diverged (loss inf)")
        best = float(np.min(ym))
        scale = abs(best) if best != 0 else 1.0
        near = m & (y <= best + tolerance * scale)
        i = np.flatnonzero(m)[np.argmin(ym)]
        # the band touching the smallest or largest value tried (diverged runs included:
        # a rate that diverged is the other side of the edge) makes its centre a bound
        edge_b = bool(np.isin(b[near], [b[m].min(), b[m].max()]).any())
        edge_lr = bool(np.isin(lr[near], [lr[m].min(), lr[m].max()]).any())
        rows.append({
            budget: float(cb), "best_batch_size": b[i], "best_learning_rate": lr[i],
            "best_loss": best, "n_band": int(near.sum()),
            "b_opt": float(np.exp(np.mean(np.log(b[near])))),
            "lr_opt": float(np.exp(np.mean(np.log(lr[near])))),
            "b_opt_at_edge": edge_b, "lr_opt_at_edge": edge_lr,
        })
        band.append(frame.loc[near])
    optima = pd.DataFrame(rows)
    if len(optima) < 3:
        raise InputError(f"fitting a power law in {budget!r} needs at least 3 budgets, got "
                         f"{len(optima)}")
    rng = np.random.default_rng(seed)
    law_b, b_ci, b_status = _law(optima, budget, "b_opt", ci, n_boot, rng)
    law_lr, lr_ci, lr_status = _law(optima, budget, "lr_opt", ci, n_boot, rng)
    return FixedBudgetFit(
        budget_name=budget, tolerance=float(tolerance), optima=optima,
        band=pd.concat(band, ignore_index=True), b_opt=law_b, lr_opt=law_lr,
        b_opt_exponent_interval=Interval(*b_ci, ci),
        lr_opt_exponent_interval=Interval(*lr_ci, ci),
        n_boot=int(n_boot), b_opt_status=b_status, lr_opt_status=lr_status,
    )


def _law(optima: pd.DataFrame, budget: str, col: str, ci: float, n_boot: int,
         rng: np.random.Generator) -> tuple[PowerLaw, tuple[float, float], str]:
    """The power law of ``col`` through the budgets whose band is inside the grid, its
    bootstrap interval and status; NaN and ``"unidentified"`` with fewer than 3."""
    inside = ~optima[f"{col}_at_edge"].to_numpy(dtype=bool)
    x = optima[budget].to_numpy()[inside]
    y = optima[col].to_numpy()[inside]
    if inside.sum() < 3 or np.ptp(x) == 0:
        warn(
            f"{col}: the near-optimal band reaches the smallest or largest value tried at "
            f"{int((~inside).sum())} of {len(inside)} budgets, leaving {int(inside.sum())} "
            "inside the grid; the law needs 3 (widen the grid)", FitWarning)
        nan = Interval(math.nan, math.nan, ci)
        return PowerLaw(math.nan, math.nan, nan, nan, math.nan, int(inside.sum())), \
            (math.nan, math.nan), "unidentified"
    if not inside.all():
        warn(f"{col}: {int((~inside).sum())} budget(s) with the band at the grid's "
                      "edge left out of the law", FitWarning)
    law = fit_power_law(x, y, level=ci)
    interval = _residual_bootstrap(x, y, n_boot, ci, rng) if n_boot else (math.nan, math.nan)
    return law, interval, "identified"
