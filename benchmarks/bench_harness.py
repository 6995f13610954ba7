"""Batched sweep program vs the plain per-run loop, on the same sweep.

Trains every run of a configuration's sweep (all batch sizes × learning rates × seeds,
SGD and Adam) twice: as the harness does (runs sharing a batch size and optimizer in
one vmapped program, :func:`empirical_batch.harness.trainer.train_grid`) and one run at a
time with ``torch.optim`` (``batched=False``), and prints the wall times and their
ratio. Step budgets are multiplied by ``--scale`` (the ratio is per step; a smaller
scale keeps the plain loop affordable on a CPU). The first group of each mode is
preceded by a short warm-up run that is not timed.

    python benchmarks/bench_harness.py --config cpu --scale 0.05            # CPU
    python benchmarks/bench_harness.py --config full --scale 0.1 --device cuda
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from empirical_batch.harness.config import get_config, scale_budget
from empirical_batch.harness.pipeline import _sync, resolve_device
from empirical_batch.harness.trainer import StepBudget, train_grid


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="cpu", choices=("tiny", "cpu", "full"))
    p.add_argument("--tasks", nargs="+", default=None)
    p.add_argument("--scale", type=float, default=0.05)
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    dev = resolve_device(args.device)
    torch.set_num_threads(args.threads)
    cfg = get_config(args.config, args.tasks)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(f"device: {name}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"config {cfg.name}, step scale {args.scale}")
    header = (f"{'task':16s} {'runs':>5s} {'run-steps':>10s} {'batched s':>10s} {'plain s':>9s} "
              f"{'ratio':>6s} {'batched run-steps/s':>20s}")
    print(header)
    print("-" * len(header))
    tot_b = tot_p = 0.0
    for plan in cfg.plans:
        task = plan.make_task().to(dev)
        budget = scale_budget(plan.sweep.budget, args.scale)
        spec = replace(plan.sweep, budget=budget)
        members = spec.members()
        warm = members[:2]
        train_grid(task, warm, StepBudget(4, 2, 2, 2))
        train_grid(task, warm, StepBudget(4, 2, 2, 2), batched=False)
        run_steps = sum(budget.steps(m.batch_size) for m in members)
        _sync(dev)
        t0 = time.perf_counter()
        train_grid(task, members, budget)
        _sync(dev)
        tb = time.perf_counter() - t0
        t0 = time.perf_counter()
        train_grid(task, members, budget, batched=False)
        _sync(dev)
        tp = time.perf_counter() - t0
        tot_b += tb
        tot_p += tp
        print(f"{plan.task:16s} {len(members):5d} {run_steps:10d} {tb:10.1f} {tp:9.1f} "
              f"{tp / tb:6.2f} {run_steps / tb:20.0f}")
    print(f"{'all':16s} {'':5s} {'':10s} {tot_b:10.1f} {tot_p:9.1f} {tot_p / tot_b:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
