"""Benchmark: B_crit curve for 20 targets with 1,000 bootstrap draws on a 10^6-row sweep.

Run: ``python benchmarks/bench_fit.py [--rows 1000000] [--targets 20] [--n-boot 1000]
[--rounds 3]``. Prints one table: time to build, load/validate, and fit the curve
(target: < 5 s for the curve on a 2-core CPU), each stage the median of ``--rounds``
rounds, and beside it a control: the same stage timed a second time in each round, so
that the difference between the two columns shows the machine's noise.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
import pandas as pd

from empirical_batch.fit import FitWarning, critical_batch_curve
from empirical_batch.sweeps import load_sweep
from empirical_batch.tradeoff import Tradeoff


def make_sweep(n_rows: int, seed: int = 0) -> pd.DataFrame:
    """16 batch sizes × 5 learning rates × 5 seeds = 400 runs of n_rows/400 points;
    metric = 1 − log(step/S_run), S_run = S(B)·lr-penalty·lognormal noise."""
    rng = np.random.default_rng(seed)
    t = Tradeoff(1000.0, 256_000.0)
    bs = 2.0 ** np.arange(2, 18)
    lr_f = np.array([0.25, 0.5, 1.0, 2.0, 4.0])
    n_seed = 5
    b, f, _ = (a.ravel() for a in np.meshgrid(bs, lr_f, np.arange(n_seed), indexing="ij"))
    n_runs = b.size
    pts = n_rows // n_runs
    s_run = t.steps(b) * (1 + 0.3 * np.log(f) ** 2) * np.exp(0.1 * rng.standard_normal(n_runs))
    frac = np.geomspace(0.05, 20, pts)
    step = np.round(s_run[:, None] * frac[None, :])
    k = np.arange(pts)[None, :]
    step = np.maximum.accumulate(np.maximum(step, 1) - k, axis=1) + k  # strictly increasing
    metric = 1.0 - np.log(step / s_run[:, None])
    return pd.DataFrame({
        "run": np.repeat(np.arange(n_runs), pts).astype(str),
        "batch_size": np.repeat(b, pts),
        "learning_rate": np.repeat(0.01 * f * np.sqrt(b), pts),
        "step": step.ravel(),
        "loss": metric.ravel(),
    })


def _cpu_name() -> str:
    """The processor's model name (platform.processor() is empty on most Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--targets", type=int, default=20)
    p.add_argument("--n-boot", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds; each times every stage twice (the second is the control)")
    args = p.parse_args()
    warnings.filterwarnings("once", category=FitWarning)  # the same warning every round
    targets = np.linspace(2.0, -1.0, args.targets)
    curve_stage = f"critical_batch_curve ({args.targets} targets × {args.n_boot} draws)"
    stages = {
        "build synthetic sweep": lambda: make_sweep(args.rows),
        "load_sweep (validate)": lambda: load_sweep(df),
        curve_stage: lambda: critical_batch_curve(sweep, targets, n_boot=args.n_boot, seed=0),
    }
    df = make_sweep(args.rows)
    sweep = load_sweep(df)
    times: dict[str, list[list[float]]] = {name: [[], []] for name in stages}
    last: dict[str, object] = {}
    for _ in range(args.rounds):
        for name, fn in stages.items():
            for k in range(2):  # the stage, then its control
                t0 = time.perf_counter()
                last[name] = fn()
                times[name][k].append(time.perf_counter() - t0)
    curve = last[curve_stage]  # the same fit in every round (seed 0)
    rows = [(name, float(np.median(a)), float(np.median(b))) for name, (a, b) in times.items()]
    t_curve = rows[-1][1]
    print(f"sweep: {len(df):,} rows, {df['run'].nunique()} runs, "
          f"{df['batch_size'].nunique()} batch sizes; CPU: {_cpu_name()}, "
          f"{os.cpu_count()} cores visible")
    width = max(len(r[0]) for r in rows)
    print(f"median of {args.rounds} rounds; control = the same stage timed again in each round")
    print(f"{'stage':<{width}}  seconds  control  ctrl/first")
    for name, sec, ctrl in rows:
        print(f"{name:<{width}}  {sec:7.2f}  {ctrl:7.2f}  {ctrl / sec:10.2f}")
    print(f"B_crit (true 256; one noisy sweep): {curve['b_crit'].iloc[0]:.1f} "
          f"[{curve['b_crit_low'].iloc[0]:.1f}, {curve['b_crit_high'].iloc[0]:.1f}] at the first "
          f"target; range over targets {curve['b_crit'].min():.1f}–{curve['b_crit'].max():.1f}")
    print(f"curve under 5 s: {'yes' if t_curve < 5 else 'NO'}")


if __name__ == "__main__":
    main()
