"""The one-step experiment's loss evaluations in float32 against float64; prints a table.

The one-step experiment (`empirical_batch.validation.experiments.one_step`) measures
ΔL(ε) = L(θ) − L(θ − ε G_est) for batch gradients G_est over a grid of step sizes, in
float64, and fits ΔL(ε) = a ε − ½ b ε² (eq. 2.5) per batch size. Its loss evaluations
move most of the experiment's memory traffic (docs/benchmarks.md), and float32 would
halve it. This script measures what float32 would change: per task, at a checkpoint of
a short SGD run (``--steps`` steps at the reference batch size and the sweep's middle
rate), the same batches and step sizes are evaluated with the float64 model and with
its float32 copy (the batch gradients in float64 for both), and the fitted ε_opt = a/b
and ΔL_opt = a²/2b per batch size are compared: the largest relative difference over
batch sizes, against the spread of the float64 values over resampled batches (the
experiment's own bootstrap). Reduced sizes (``--examples``, ``--batches``), CPU.

Run: python benchmarks/one_step_dtype.py [--config cpu] [--tasks sequence,text_lm]
     [--examples 128] [--batches 16] [--steps 64]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install


def fitted(eps, dl, rng, n_boot: int = 50):
    """(ε_opt, ΔL_opt) of the mean curve, and their bootstrap standard deviations."""
    from empirical_batch.validation.experiments.one_step import (
        fit_step_quadratic,
        step_optimum,
    )

    point = step_optimum(*fit_step_quadratic(eps, dl.mean(0)))
    draws = np.array([step_optimum(*fit_step_quadratic(eps, dl[rng.integers(0, len(dl),
                                                                          len(dl))].mean(0)))
                      for _ in range(n_boot)])
    return np.array(point), np.nanstd(draws, axis=0)


def measure(plan, args):
    import torch
    from torch.func import functional_call, grad, vmap

    from empirical_batch.harness.trainer import Member, train_plain
    from empirical_batch.validation.experiments.noise import objective_sample
    from empirical_batch.validation.experiments.one_step import EPS_SPAN
    from empirical_batch.validation.experiments.scales import hessian_scales

    task = plan.make_task().to("cpu")
    rates = plan.sweep.learning_rates["sgd"]
    member = Member("sgd", plan.noise.batch_size, float(rates[len(rates) // 2]), 0)
    kept = {}
    train_plain(task, member, args.steps, [args.steps],
                callback=lambda step, model, loss: kept.update(
                    state={k: v.detach().clone() for k, v in model.state_dict().items()}))
    model = task.init_model(0)
    model.load_state_dict(kept["state"])
    m64 = model.double()
    x, y = objective_sample(task, args.examples)
    x64 = x.double() if x.is_floating_point() else x
    y64 = y.double() if y.is_floating_point() else y
    hs = hessian_scales(m64, task.loss_fn, x64, y64)
    eps = (hs["g2"] / hs["ghg"] if hs["ghg"] > 0 else member.learning_rate) * np.geomspace(
        *EPS_SPAN, args.eps)
    params = {k: v.detach() for k, v in m64.named_parameters()}
    buffers = {k: v.detach() for k, v in m64.named_buffers()}

    def loss_p(p, xs, ys, bufs):
        return task.loss_fn(functional_call(m64, (p, bufs), (xs,)), ys)

    rng = np.random.default_rng(0)
    out = []
    for b in plan.one_step.batch_sizes:
        idx = torch.as_tensor(rng.integers(0, x.shape[0], (args.batches, b)))
        g = vmap(grad(loss_p), in_dims=(None, 0, 0, None))(params, x64[idx], y64[idx], buffers)
        dls = {}
        for name, dt in (("float64", torch.float64), ("float32", torch.float32)):
            p = {k: v.to(dt) for k, v in params.items()}
            bufs = {k: v.to(dt) for k, v in buffers.items()}
            xs = x64.to(dt) if x64.is_floating_point() else x64
            ys = y64.to(dt) if y64.is_floating_point() else y64
            with torch.no_grad():
                l0 = loss_p(p, xs, ys, bufs)
                moved = {k: (p[k] - torch.as_tensor(eps, dtype=dt).reshape(1, -1, *[1] * p[k].dim())
                             * g[k].to(dt).unsqueeze(1)).reshape(-1, *p[k].shape) for k in p}
                losses = vmap(loss_p, in_dims=(0, None, None, None), chunk_size=64)(
                    moved, xs, ys, bufs)
            dls[name] = (l0 - losses).reshape(args.batches, args.eps).double().numpy()
        (p64, sd64), (p32, _) = (fitted(eps, dls[n], np.random.default_rng(1))
                                 for n in ("float64", "float32"))
        out.append((b, p64, p32, sd64))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="cpu")
    p.add_argument("--tasks", default="sequence,text_lm")
    p.add_argument("--examples", type=int, default=128)
    p.add_argument("--batches", type=int, default=16)
    p.add_argument("--eps", type=int, default=16)
    p.add_argument("--steps", type=int, default=64)
    args = p.parse_args(argv)

    import torch

    from empirical_batch.harness.config import get_config

    torch.set_num_threads(1)
    cfg = get_config(args.config, args.tasks.split(","))
    print(f"config {args.config}: {args.steps} SGD steps, {args.examples} examples, "
          f"{args.batches} batches x {args.eps} step sizes per batch size, torch "
          f"{torch.__version__}")
    head = (f"{'task':10s} {'B':>5s} {'eps_opt f64':>12s} {'f32/f64-1':>10s} {'boot sd':>8s} "
            f"{'dL_opt f64':>11s} {'f32/f64-1':>10s} {'boot sd':>8s}")
    print(head)
    print("-" * len(head))
    for plan in cfg.plans:
        for b, p64, p32, sd in measure(plan, args):
            rel = p32 / p64 - 1
            print(f"{plan.task:10s} {b:5d} {p64[0]:12.4g} {rel[0]:10.2e} {sd[0] / p64[0]:8.2e} "
                  f"{p64[1]:11.4g} {rel[1]:10.2e} {sd[1] / p64[1]:8.2e}")
    print("f32/f64-1: the float32 evaluations' fitted value over the float64 one, minus 1; "
          "boot sd: the float64 value's bootstrap standard deviation over resampled batches, "
          "relative")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
