r"""Intervals for what is computed from several targets of one sweep: growth and exponent.

B_crit fitted at several targets of *one* sweep shares its runs, so the per-target
intervals cannot simply be combined, and `empirical_batch.fit_power_law`'s regression
interval (which assumes independent points) is too narrow. Here the whole sweep is
resampled instead: a **seed bootstrap** draws, within each batch size, as many seeds
as it has, with replacement (one draw picks a seed's runs at every learning rate of
that batch size, so the best-learning-rate choice is redone in every draw), and refits
B_crit at the same targets (point estimates only: `critical_batch_curve` with
``n_boot=0``, whose point estimate does not depend on the interval options). From each
draw:

- the growth $B_{crit}(L_{hard}) / B_{crit}(L_{loose})$ between the hardest and the
  loosest target;
- the exponent $k$ of $B_{crit} \propto L^k$ (least squares in log-log over the
  targets; Kaplan et al. 2020 write $B_{crit} = B_*/L^{1/\alpha_B}$, $k = -1/\alpha_B$).

The intervals are percentile intervals over the draws in which every target was
fitted. With the 2–3 seeds of the harness presets there are few distinct resamples
per batch size, so the intervals are rough; they are reported beside the conservative
per-target combination for the growth (see `empirical_batch.validation.fits`).

Reference: S. McCandlish, J. Kaplan, D. Amodei et al., "An Empirical Model of
Large-Batch Training", arXiv:1812.06162 (2018), §3 and Table 1 (B_crit grows as the
loss falls).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ..errors import InputError
from ..sweeps import Sweep
from .curves import b_crit_points

#: bootstrap draws for the growth and exponent intervals
N_BOOT = 200


@dataclass(frozen=True)
class GrowthFit:
    """Growth of B_crit between the loosest and the hardest target, and B_crit ∝ L^k.

    ``*_low``/``*_high`` are percentile intervals of the seed bootstrap at ``level``;
    ``n_valid`` of ``n_boot`` draws had every target fitted. With a single seed at some
    batch size there is nothing to resample: ``n_boot`` is 0 and the intervals NaN.
    """

    growth: float
    growth_low: float
    growth_high: float
    exponent: float
    exponent_low: float
    exponent_high: float
    level: float
    n_boot: int
    n_valid: int

    def to_dict(self) -> dict:
        return asdict(self)


def log_slope(x, y) -> float:
    """Least-squares slope of log y on log x (NaN with fewer than 2 finite positive points)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2 or np.ptp(np.log(x[ok])) == 0:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


class SeedPool:
    """A sweep frame split once by batch size and seed, for many seed-bootstrap draws.

    `draw` gives what `resample_seeds` defines, drawing from ``rng`` in the same order
    (one ``rng.choice`` per batch size, sizes ascending), so a pool and
    `resample_seeds` give the same frames from the same generator; the split is done
    once instead of once per draw.
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        for col in ("batch_size", "seed", "run"):
            if col not in frame.columns:
                raise InputError(f"resample_seeds needs a {col!r} column; got "
                                 f"{list(frame.columns)}")
        self.columns = list(frame.columns)
        self.sizes: list[tuple[np.ndarray, dict]] = []
        for _, group in frame.groupby("batch_size", sort=True):
            seeds = np.sort(group["seed"].unique())
            by_seed = {}
            for s, g in group.groupby("seed"):
                g = g.copy()
                g["run"] = g["run"].astype(str)
                by_seed[s] = g
            self.sizes.append((seeds, by_seed))

    def draw(self, rng: np.random.Generator) -> pd.DataFrame:
        """One seed-bootstrap copy (`resample_seeds`)."""
        parts = []
        for seeds, by_seed in self.sizes:
            drawn = rng.choice(seeds, size=len(seeds), replace=True)
            for j, s in enumerate(drawn):
                part = by_seed[s].copy()
                part["seed"] = j
                part["run"] = part["run"] + f"#boot{j}"
                parts.append(part)
        return pd.concat(parts, ignore_index=True)

    def sweep(self, draw: pd.DataFrame) -> Sweep:
        """``draw`` as the `Sweep` `load_sweep` makes of it, without validating again:
        its rows are rows of a validated sweep, renamed (runs stay distinct), so only
        the order `load_sweep` gives (by run and step) is redone."""
        data = draw.sort_values(["run", "step"], kind="stable").reset_index(drop=True)
        return Sweep(data=data, metric_name="metric", higher_is_better=False,
                     source="<DataFrame>")


def resample_seeds(frame: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """One seed-bootstrap copy of a sweep frame (columns ``batch_size``, ``seed``, ``run``).

    Within each batch size, its seeds are drawn with replacement; draw j keeps the
    runs of the drawn seed at every learning rate, renamed to seed j (and runs
    renamed) so that repeated draws stay distinct runs.
    """
    return SeedPool(frame).draw(rng)


def growth_and_exponent(frame: pd.DataFrame, targets, b_crit, *, n_boot: int = N_BOOT,
                        level: float = 0.95, seed: int = 0) -> GrowthFit:
    """Growth and exponent of B_crit over ``targets`` with seed-bootstrap intervals.

    Parameters
    ----------
    frame : DataFrame
        The sweep of one task and optimizer in the sweep schema, with a ``seed`` column.
    targets : array_like
        The fitted targets (at least 2; the exponent needs 2 distinct ones), any order.
    b_crit : array_like
        B_crit fitted at ``targets`` on the whole sweep (the point estimates).
    """
    targets = np.asarray(targets, float)
    b_crit = np.asarray(b_crit, float)
    if targets.shape != b_crit.shape or targets.size < 2:
        raise InputError(f"need at least 2 targets with one B_crit each, got {targets.size} "
                         f"targets and {b_crit.size} values")
    loose, hard = int(np.argmax(targets)), int(np.argmin(targets))
    point_g = b_crit[hard] / b_crit[loose]
    point_k = log_slope(targets, b_crit)
    rng = np.random.default_rng(seed)
    gs, ks = [], []
    seeds_per_size = frame.groupby("batch_size")["seed"].nunique()
    if seeds_per_size.min() < 2:  # one seed: every draw is the sweep itself
        n_boot = 0
    pool = SeedPool(frame) if n_boot else None
    for _ in range(int(n_boot)):
        assert pool is not None
        est = b_crit_points(pool.sweep(pool.draw(rng)), targets)
        if not np.all(np.isfinite(est) & (est > 0)):
            continue
        gs.append(est[hard] / est[loose])
        ks.append(log_slope(targets, est))
    q = [(1 - level) / 2, (1 + level) / 2]
    if not gs:
        g_lo = g_hi = k_lo = k_hi = float("nan")
    else:  # percentile intervals, widened to contain the estimate where they do not
        g_lo, g_hi = np.quantile(gs, q)
        g_lo, g_hi = min(g_lo, point_g), max(g_hi, point_g)
        k_lo, k_hi = np.quantile(ks, q)
        k_lo, k_hi = min(k_lo, point_k), max(k_hi, point_k)
    return GrowthFit(
        growth=float(point_g), growth_low=float(g_lo), growth_high=float(g_hi), exponent=point_k,
        exponent_low=float(k_lo), exponent_high=float(k_hi),
        level=level, n_boot=int(n_boot), n_valid=len(gs))
