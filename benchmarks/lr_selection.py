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
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from empirical_batch.fit import fit_lr_scaling

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
    args = p.parse_args()
    t0 = time.perf_counter()
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
