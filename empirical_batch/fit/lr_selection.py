r"""Which learning-rate law the data support: the selection rule of
``fit_lr_scaling(family="auto")``.

The three families of `empirical_batch.fit.lr_scaling` are special cases of one
four-parameter law in log space,

$$
\log\epsilon(B) = a - \alpha\,\log(1 + B_*/B) - \beta\,\log B ,
$$

``"sgd"`` ($\alpha = 1, \beta = 0$; eq. 2.6 of McCandlish et al. 2018), ``"power"``
($\beta = 0$) and ``"surge"`` ($\alpha = 1, \beta = \tfrac12$, since
$\tfrac12(\sqrt{B_n/B} + \sqrt{B/B_n}) = (1 + B_n/B)\sqrt{B/B_n}$, Li et al. 2024).
Each family with $k$ parameters is tested against the general law by the extra-sum-of-
squares F test (Seber & Wild, *Nonlinear Regression*, Wiley 1989),

$$
F = \frac{(\mathrm{RSS}_k - \mathrm{RSS}_4)/(4 - k)}{\mathrm{RSS}_4/(n - 4)}
\sim F_{4-k,\,n-4},
$$

(exact for the linear parts, approximate in $B_*$) and is *consistent with the data*
when the test does not reject it at ``level``.
``"sgd"`` is nested in ``"power"``: when both are consistent, ``"power"`` is kept only if
the data reject $\alpha = 1$ within it, and ``"sgd"`` only if they reject the
square-root law $\alpha = \tfrac12$ of Adam-like optimizers (otherwise the exponent is
not determined and both stay). One family left is *selected*; several (or none) leave
the choice *undecided*: the designs cannot tell those laws apart (e.g. every batch far
below $B_*$, where the surge and $\alpha = \tfrac12$ laws coincide, or far above, where
the SGD and power laws are flat). Akaike's criterion alone (``n log(RSS/n) + 2k``)
instead always names a family and, on 12 batch sizes, is right about SGD-generated
rates three times in four (``benchmarks/lr_selection.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from .profile import profile_grid

__all__ = ["Selection", "select_family"]

K = {"sgd": 2, "surge": 2, "power": 3}


@dataclass(frozen=True)
class Selection:
    """The outcome of `select_family`.

    ``status`` is ``"selected"`` (one family left: ``family``) or ``"undecided"``
    (``family`` is then the consistent family with the smallest AICc, or of all three
    when none is consistent); ``candidates`` the families consistent with the data after
    the nested comparison; ``p_values`` the F test of each family against the general
    law; ``aicc`` the corrected Akaike criterion of each family.
    """

    family: str
    status: str
    candidates: tuple[str, ...]
    p_values: dict[str, float]
    aicc: dict[str, float]
    note: str


def _general_rss(log_b: np.ndarray, y: np.ndarray) -> float:
    """Least RSS of the four-parameter law: linear in (a, α, β) for fixed B*, profiled
    over a grid of log B* and refined by a bounded scalar search."""

    def rss(grid: np.ndarray) -> np.ndarray:
        x1 = np.logaddexp(0.0, grid[:, None] - log_b[None, :])
        X = np.stack([np.ones_like(x1), x1, np.broadcast_to(log_b, x1.shape)], axis=2)
        coef = np.einsum("gij,gj->gi", np.linalg.pinv(np.einsum("gni,gnj->gij", X, X)),
                         np.einsum("gni,n->gi", X, y))
        r = y[None, :] - np.einsum("gni,gi->gn", X, coef)
        out: np.ndarray = np.sum(r * r, axis=1)
        return out

    grid = profile_grid(log_b, per_decade=50)
    values = rss(grid)
    k = int(np.argmin(values))
    best = float(values[k])
    if 0 < k < len(grid) - 1:
        res = optimize.minimize_scalar(lambda g: float(rss(np.array([g]))[0]),
                                       bounds=(grid[k - 1], grid[k + 1]), method="bounded")
        best = min(best, float(res.fun))
    return best


def _aicc(rss: float, n: int, k: int, floor: float) -> float:
    return n * math.log(max(rss, floor) / n) + 2 * k + 2 * k * (k + 1) / max(n - k - 1, 1)


def select_family(b: np.ndarray, lr: np.ndarray, rss: dict[str, float], rss_half: float,
                  level: float = 0.05) -> Selection:
    """Select the law from the fitted families' RSS (``rss``: family → RSS of the log
    rates) and the RSS of the power law at $\\alpha = \\tfrac12$ (``rss_half``); see
    the module docstring. Needs at least 6 batch sizes (two degrees of freedom left
    for the general law's residuals); with fewer the result is ``"undecided"``."""
    n = len(b)
    floor = 1e-12 * n  # exact data: RSS at rounding level counts as zero
    aicc = {f: _aicc(r, n, K[f], floor) for f, r in rss.items()}
    by_aicc = sorted(rss, key=lambda f: aicc[f])
    if n < 6 or len(rss) < 3:
        return Selection(by_aicc[0], "undecided", tuple(by_aicc), {}, aicc,
                         f"{n} batch sizes: at least 6 are needed to test the laws")
    rss4 = max(min(_general_rss(np.log(b), np.log(lr)), *rss.values()), floor)
    df2 = n - 4

    def p_against(r: float, df1: int, rss_full: float, df_full: int) -> float:
        f = max(r - rss_full, 0.0) / df1 / (rss_full / df_full)
        return float(stats.f.sf(f, df1, df_full))

    p = {f: p_against(max(r, floor), 4 - K[f], rss4, df2) for f, r in rss.items()}
    cand = [f for f in ("sgd", "power", "surge") if p[f] >= level]
    note = ""
    if "sgd" in cand and "power" in cand:
        rp = max(rss["power"], floor)
        p_one = p_against(max(rss["sgd"], floor), 1, rp, n - 3)
        p_half = p_against(max(rss_half, floor), 1, rp, n - 3)
        if p_one < level:
            cand.remove("sgd")
        elif p_half < level:
            cand.remove("power")
        else:
            note = "the exponent is not determined: alpha = 1 and alpha = 1/2 both fit"
    if len(cand) == 1:
        return Selection(cand[0], "selected", tuple(cand), p, aicc, note)
    if not cand:
        return Selection(by_aicc[0], "undecided", (), p, aicc,
                         "no family is consistent with the data at level "
                         f"{level:g}; the smallest AICc is shown")
    best = min(cand, key=lambda f: aicc[f])
    return Selection(best, "undecided", tuple(cand), p, aicc,
                     note or f"these batch sizes cannot tell {' and '.join(cand)} apart; "
                             "the one with the smallest AICc is shown")
