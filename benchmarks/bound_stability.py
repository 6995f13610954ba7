"""Lower bounds on B_crit when steps still halve at the largest batch size.

Run: ``python benchmarks/bound_stability.py [--reps 100]``. Truth: S_min = 100,
B_crit = 20 000 (40 times the largest batch size); batch sizes 1 … 512 (10 powers of
two), one seed each, multiplicative log-normal noise σ. Each data set is fitted with
``fit_tradeoff`` (profile interval, level 0.95) under 5 bootstrap seeds. Prints per σ:
how often the fit is a ``"lower_bound"``, how much the reported bound moves with the
bootstrap seed (largest max/min - 1 over the data sets), and how often the bound lies
below the true B_crit (a valid 95 % bound does so at least 95 % of the time).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from empirical_batch.fit import FitWarning, fit_tradeoff
from empirical_batch.tradeoff import Tradeoff


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--n-boot", type=int, default=400)
    args = p.parse_args()
    truth = Tradeoff.from_b_crit(20_000.0, s_min=100.0)
    b = 2.0 ** np.arange(10)
    rows = []
    for sigma in (0.02, 0.05, 0.10):
        rng = np.random.default_rng(0)
        n_low = moved = below = flipped = 0
        for _ in range(args.reps):
            steps = truth.steps(b) * np.exp(sigma * rng.standard_normal(b.size))
            frame = pd.DataFrame({"batch_size": b, "steps": steps})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FitWarning)
                fits = [fit_tradeoff(frame, n_boot=args.n_boot, seed=s) for s in range(5)]
            flipped += len({f.status for f in fits}) > 1
            if fits[0].status != "lower_bound":
                continue
            n_low += 1
            bounds = np.array([f.b_crit_bound for f in fits if f.status == "lower_bound"])
            moved = max(moved, float(bounds.max() / bounds.min() - 1))
            below += bool(fits[0].b_crit_bound <= truth.b_crit)
        rows.append({"sigma": sigma, "lower_bound": f"{n_low}/{args.reps}",
                     "bound moves with seed (max)": f"{moved:.1%}",
                     "bound <= true B_crit": f"{below / max(n_low, 1):.3f}",
                     "status differs across seeds": f"{flipped}/{args.reps}"})
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
