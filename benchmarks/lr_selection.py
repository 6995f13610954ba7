"""Model selection and interval coverage of ``fit_lr_scaling`` on synthetic best rates.

Run: ``python benchmarks/lr_selection.py [--reps 200] [--coverage-reps 400]
[--n-boot 400]`` (about five minutes on one CPU core). Truth: 12 batch sizes
1 … 2048; the rates follow one family exactly — ``sgd`` ε = 0.5/(1 + B*/B),
``surge`` (Li et al. 2024) with ε_max = 0.01, or ``power`` ε = 0.3/(1 + B*/B)^½ —
times log-normal noise of σ = 0.1 or 0.2 (the spread of a best rate picked from a
grid spaced 2^¼ to 2^½). Designs: ``wide`` (B* = 64, inside the batch sizes: the
families differ), ``below`` (B* = 2^15: every batch far below it, where the surge law
and α = ½ coincide) and ``above`` (B* = 2^-4: far above it, where the SGD and power
laws are flat).

``--designs`` prints a third table instead (``design_table``): the rule of
``family="auto"`` on other designs of a sweep, B* = 64 and σ = 0.1 throughout:
batch sizes (12 from 1 to 2048 by factors of 2; 6 from 1 to 1024 by factors of 4; 6
from 8 to 256 and 8 from 4 to 512 by factors of 2) crossed with the learning-rate grid
the best rate is read from (``none``: the noisy rate itself; ``2^1/2`` and ``2^1``:
rounded to the nearest point of a grid of that spacing, as a sweep that reports
the best grid point does).

The first table gives, per design, noise and generating family, the share of fits
whose selection names the generating family (``right``), another family (``wrong``) or
is undecided, for the v0.2 rule (plain AIC, always decides), AICc, and the rule of
``family="auto"`` (F tests against the law that contains the three families,
`empirical_batch.fit.lr_selection`). The second gives the coverage of the nominal 95 %
intervals (binomial SE ≈ 0.011 at 400 repetitions) when each family is fitted to its
own data (wide design, σ = 0.1).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from empirical_batch.fit import FitWarning, fit_lr_scaling

B = 2.0 ** np.arange(12)
TRUE = {"sgd": (0.5, 1.0), "surge": (0.01, math.nan), "power": (0.3, 0.5)}
DESIGNS = {"wide": 64.0, "below": 2.0**15, "above": 2.0**-4}
K = {"sgd": 2, "surge": 2, "power": 3}


def law(family: str, b: np.ndarray, b_star: float) -> np.ndarray:
    eps, alpha = TRUE[family]
    if family == "surge":
        return eps / (0.5 * (np.sqrt(b_star / b) + np.sqrt(b / b_star)))
    return eps / (1 + b_star / b) ** alpha


def _aic(fit, n: int, corrected: bool) -> str:
    """The family with the smallest AIC (or AICc) among those ``fit.selection`` lists."""
    best, best_v = "", math.inf
    for fam, _, rss, k in fit.selection:
        v = n * math.log(max(rss, 1e-12 * n) / n) + 2 * k
        if corrected:
            v += 2 * k * (k + 1) / (n - k - 1)
        if v < best_v:
            best, best_v = fam, v
    return best


def selection_table(reps: int) -> pd.DataFrame:
    rows = []
    for design, b_star in DESIGNS.items():
        for sigma in (0.1, 0.2):
            for gen in TRUE:
                picks: dict[str, list[str]] = {"AIC (v0.2)": [], "AICc": [], "auto": []}
                for rep in range(reps):
                    rng = np.random.default_rng(rep)
                    lr = law(gen, B, b_star) * np.exp(sigma * rng.standard_normal(B.size))
                    f = fit_lr_scaling(pd.DataFrame({"batch_size": B, "learning_rate": lr}),
                                       family="auto", n_boot=0)
                    picks["AIC (v0.2)"].append(_aic(f, B.size, False))
                    picks["AICc"].append(_aic(f, B.size, True))
                    picks["auto"].append(f.family if f.selection_status == "selected"
                                         else "undecided")
                for rule, v in picks.items():
                    a = np.array(v)
                    right, undecided = np.mean(a == gen), np.mean(a == "undecided")
                    rows.append({"design": design, "sigma": sigma, "family": gen,
                                 "rule": rule, "right": right, "wrong": 1 - right - undecided,
                                 "undecided": undecided})
    return pd.DataFrame(rows)


#: batch-size designs of `design_table`: name -> batch sizes
BATCH_DESIGNS = {
    "12 sizes, 1-2048 (x2)": 2.0 ** np.arange(12),
    "6 sizes, 1-1024 (x4)": 4.0 ** np.arange(6),
    "6 sizes, 8-256 (x2)": 2.0 ** np.arange(3, 9),
    "8 sizes, 4-512 (x2)": 2.0 ** np.arange(2, 10),
}
#: learning-rate grids of `design_table`: name -> log2 spacing (0: no grid)
GRIDS = {"none": 0.0, "2^1/2": 0.5, "2^1": 1.0}


def on_grid(lr: np.ndarray, spacing: float) -> np.ndarray:
    """``lr`` rounded to the nearest point of the grid 2^(spacing·k) (unchanged at 0)."""
    if spacing == 0:
        return lr
    return 2.0 ** (spacing * np.round(np.log2(lr) / spacing))


def design_table(reps: int, sigma: float = 0.1, b_star: float = 64.0, *,
                 designs=None, grids=None, families=None) -> pd.DataFrame:
    """Share of ``family="auto"`` fits right / wrong / undecided per batch-size design,
    learning-rate grid and generating family (module doc); ``designs``, ``grids`` and
    ``families`` restrict the table to those names (default all)."""
    rows = []
    for design, b in BATCH_DESIGNS.items():
        if designs is not None and design not in designs:
            continue
        for grid, spacing in GRIDS.items():
            if grids is not None and grid not in grids:
                continue
            for gen in TRUE:
                if families is not None and gen not in families:
                    continue
                picks = []
                for rep in range(reps):
                    rng = np.random.default_rng(rep)
                    lr = on_grid(law(gen, b, b_star)
                                 * np.exp(sigma * rng.standard_normal(b.size)), spacing)
                    f = fit_lr_scaling(pd.DataFrame({"batch_size": b, "learning_rate": lr}),
                                       family="auto", n_boot=0)
                    picks.append(f.family if f.selection_status == "selected"
                                 else "undecided")
                a = np.array(picks)
                rows.append({"batch sizes": design, "rate grid": grid, "family": gen,
                             "right": np.mean(a == gen),
                             "wrong": np.mean((a != gen) & (a != "undecided")),
                             "undecided": np.mean(a == "undecided")})
    return pd.DataFrame(rows)


def coverage_table(reps: int, n_boot: int) -> pd.DataFrame:
    rows = []
    b_star = DESIGNS["wide"]
    for fam in TRUE:
        eps, alpha = TRUE[fam]
        truth_64 = float(law(fam, np.array([64.0]), b_star)[0])
        hit = {"eps_star": 0, "b_star": 0, "alpha": 0, "lr(B=64)": 0}
        for rep in range(reps):
            rng = np.random.default_rng(10_000 + rep)
            lr = law(fam, B, b_star) * np.exp(0.1 * rng.standard_normal(B.size))
            f = fit_lr_scaling(pd.DataFrame({"batch_size": B, "learning_rate": lr}),
                               family=fam, n_boot=n_boot, seed=rep)
            hit["eps_star"] += eps in f.eps_star_interval
            hit["b_star"] += b_star in f.b_star_interval
            hit["alpha"] += alpha in f.alpha_interval
            lo, hi = f.recommend(64.0).learning_rate_interval
            hit["lr(B=64)"] += lo <= truth_64 <= hi
        row: dict = {"family": fam}
        for k, v in hit.items():
            row[k] = v / reps if (k != "alpha" or fam == "power") else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--coverage-reps", type=int, default=400)
    p.add_argument("--n-boot", type=int, default=400)
    p.add_argument("--designs", action="store_true",
                   help="only the table of batch-size designs and rate grids")
    args = p.parse_args()
    t0 = time.perf_counter()
    if args.designs:
        warnings.simplefilter("ignore", FitWarning)  # bounds on B* are expected here
        print(f"family='auto' by design (B* = 64, sigma = 0.1, {args.reps} repetitions each): "
              "share right / wrong / undecided")
        print(design_table(args.reps).to_string(index=False,
                                                float_format=lambda v: f"{v:.2f}"))
        print(f"\n{time.perf_counter() - t0:.0f} s")
        return
    sel = selection_table(args.reps)
    wide = sel.pivot_table(index=["design", "sigma", "family"], columns="rule",
                           values=["right", "undecided"], sort=False)
    print(f"selection on 12 batch sizes ({args.reps} repetitions each): share right / "
          "undecided")
    print(wide.to_string(float_format=lambda v: f"{v:.2f}"))
    print()
    n = args.coverage_reps
    print(f"coverage of nominal 95 % intervals (wide design, sigma = 0.1, {n} "
          f"repetitions, {args.n_boot} bootstrap draws; 2 SE = "
          f"{2 * math.sqrt(0.95 * 0.05 / n):.3f})")
    print(coverage_table(n, args.n_boot).to_string(
        index=False, float_format=lambda v: f"{v:.3f}", na_rep="-"))
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
