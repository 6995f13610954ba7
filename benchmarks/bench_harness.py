"""Where the harness's sweep time goes: batched program vs plain loop, against the matmul roofline.

Trains every run of a configuration's sweep (all batch sizes × learning rates × seeds,
SGD and Adam) with step budgets × ``--scale`` in each mode of ``--modes``:

- ``auto``: what the harness does (`train_grid`'s default: each vmap group batched or
  looped by `empirical_batch.harness.trainer.prefer_batched`);
- ``batched``: every group as one vmapped program, run eagerly (no CUDA graph);
- ``graphed`` (CUDA only): every group as one vmapped program whose step is captured in a
  CUDA graph and replayed (`empirical_batch.harness.trainer.GroupStep`; what ``auto``
  does on CUDA unless ``EMPIRICAL_BATCH_CUDA_GRAPHS=0``);
- ``plain``: one run at a time with ``torch.optim``.

Per task it prints the wall time of each mode, run-steps per second, the speedup over
the plain loop, and the share of the device's matmul roofline that the auto mode
reaches: the sweep's matmul FLOPs (forward and backward of every training step and the
logged evaluations, counted once per batch size with ``torch.utils.flop_counter``)
divided by the wall time and by the device's measured dense matmul rate (float32,
best of several square products, printed in the header). The first group of each mode
is preceded by a short untimed warm-up.

    python benchmarks/bench_harness.py --config tiny --scale 0.05          # seconds
    python benchmarks/bench_harness.py --config cpu --scale 0.05           # CPU table
    python benchmarks/bench_harness.py --config full --scale 0.05 --device cuda --modes auto batched
    python benchmarks/bench_harness.py --config full --scale 0.05 --device cuda \
        --modes graphed batched            # CUDA graphs against eager steps
    python benchmarks/bench_harness.py --config full --estimate-only --op-us 24 \
        --peak-tflops 50                   # a device's time from op counts (no training)
    python benchmarks/bench_harness.py --config full --estimate-only --op-us 24 \
        --peak-tflops 50 --graph-op-us 2   # ... with each group's update graph-replayed

``--estimate`` prints, per task, the preset's sweep and analysis time at scale 1 from
counts, not training: aten operations per vmapped step and per plain-loop step (counted
with a dispatch mode), the steps each takes, and matmul FLOPs, at a time per operation
and a matmul rate (measured on this device, or given). With ``--graph-op-us`` the
sweep's steps are priced as CUDA-graph replays: the operations of `GroupStep.update`
(captured) at that time each, those of `GroupStep.load` (the batches drawn and copied
outside the graph) still at the time per operation.
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
from empirical_batch.harness.device import resolve_device, sync_device
from empirical_batch.harness.trainer import (
    GroupStep,
    Member,
    StepBudget,
    group_members,
    log_steps,
    train_batched,
    train_grid,
    train_plain,
)

MODES = ("auto", "graphed", "batched", "plain")
#: train_grid's keywords per mode
MODE_KW: dict[str, dict] = {"auto": {}, "graphed": {"batched": True, "cuda_graphs": True},
                            "batched": {"batched": True, "cuda_graphs": False},
                            "plain": {"batched": False}}


def matmul_rate(dev: torch.device, dtype=torch.float32) -> tuple[float, int]:
    """The device's dense matmul rate (FLOP/s, best over sizes and repeats) and its size."""
    best, best_n = 0.0, 0
    sizes = (256, 512, 1024) if dev.type == "cpu" else (2048, 4096, 8192)
    for n in sizes:
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        a @ b
        sync_device(dev)
        reps = 3 if dev.type == "cpu" else 20
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(reps):
                a @ b
            sync_device(dev)
            rate = 2 * n**3 * reps / (time.perf_counter() - t0)
            if rate > best:
                best, best_n = rate, n
    return best, best_n


def op_seconds(dev: torch.device, n: int = 3000) -> float:
    """Seconds per small operation (a 64-element add): dispatch and, on CUDA, launch."""
    x = torch.zeros(64, device=dev)
    for _ in range(100):
        x.add_(1.0)
    sync_device(dev)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            x.add_(1.0)
        sync_device(dev)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def graph_op_seconds(dev: torch.device, n: int = 3000) -> float:
    """Seconds per small operation (a 64-element add) replayed in a CUDA graph of ``n``."""
    x = torch.zeros(64, device=dev)
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        for _ in range(3):
            x.add_(1.0)
    torch.cuda.current_stream(dev).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        for _ in range(n):
            x.add_(1.0)
    graph.replay()
    sync_device(dev)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        graph.replay()
        sync_device(dev)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def count_ops(fn) -> int:
    """aten operations ``fn()`` dispatches (each a kernel launch on CUDA)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


def ops_per_step(task, group) -> tuple[int, int]:
    """aten ops of one step of ``group`` as one vmapped program, and of one run's step
    in the plain loop: the ops of 3 steps minus those of 2 (the same evaluations)."""
    def batched(s):
        return count_ops(lambda: train_batched(task, group, s, log_steps(s, 2)))

    def plain(s):
        return count_ops(lambda: train_plain(task, group[0], s, log_steps(s, 2)))

    batched(1)  # one-time work (the FLOP counts of the batched/loop rule) not counted
    return batched(3) - batched(2), plain(3) - plain(2)


def graph_ops(task, group) -> tuple[int, int]:
    """aten ops of one step of ``group`` outside a CUDA graph (`GroupStep.load`: draw
    the batches, copy them into the static buffers) and inside it (`GroupStep.update`)."""
    step = GroupStep(task, group)
    step.load(0)
    step.update()  # one-time work not counted
    return count_ops(lambda: step.load(1)), count_ops(step.update)


def analysis_plain_steps(plan) -> int:
    """Training steps the analysis takes in the plain loop for one task: the reference
    runs (one per optimizer) and branched training (at each checkpoint the k = 1
    reference branch and every factor × seed branch)."""
    opts = plan.sweep.optimizers
    steps = len(opts) * plan.sweep.budget.steps(plan.noise.batch_size)
    b = plan.branched
    if b is not None:
        per_checkpoint = b.steps_at_base + len(b.seeds) * sum(
            -(-b.steps_at_base // k) for k in b.factors)
        steps += len(opts) * b.n_checkpoints * per_checkpoint
    return steps


def estimate(cfg, dev, peak: float, t_op: float, t_graph: float | None = None) -> None:
    """The preset's time at scale 1 on this device, from op counts and FLOPs (no training);
    with ``t_graph`` (seconds per operation replayed in a CUDA graph) the sweep's updates
    are priced as graph replays."""
    print()
    graphs = "" if t_graph is None else f", {t_graph * 1e6:.1f} us per graph-replayed op"
    print(f"estimate at scale 1, {t_op * 1e6:.1f} us per op{graphs}, "
          f"{peak / 1e12:.2f} TFLOP/s matmul:")
    head = (f"{'task':16s} {'vm-steps':>9s} {'ops/vm-step':>11s} {'plain steps':>11s} "
            f"{'ops/step':>9s} {'TFLOP':>8s} {'sweep s':>8s} {'analysis s':>10s}")
    if t_graph is not None:
        head = head.replace("ops/vm-step", "ops out+in")
    print(head)
    print("-" * len(head))
    tot = [0.0, 0.0]
    for plan in cfg.plans:
        task = plan.make_task().to(dev)
        members = plan.sweep.members()
        groups = group_members(members)
        mid = groups[len(groups) // 2]
        small = [Member(m.optimizer, 4, m.learning_rate, m.seed) for m in mid]
        ops_b, ops_p = ops_per_step(task, small)
        vm = sum(plan.sweep.budget.steps(g[0].batch_size) for g in groups)
        plain = analysis_plain_steps(plan)
        flops = sweep_flops(task, members, plan.sweep.budget)
        sweep_s = vm * ops_b * t_op + flops / peak
        ops_col = f"{ops_b:11d}"
        if t_graph is not None:
            ops_out, ops_in = graph_ops(task, small)
            sweep_s = vm * (ops_out * t_op + ops_in * t_graph) + flops / peak
            ops_col = f"{f'{ops_out}+{ops_in}':>11s}"
        analysis_s = plain * ops_p * t_op
        tot[0] += sweep_s
        tot[1] += analysis_s
        print(f"{plan.task:16s} {vm:9d} {ops_col} {plain:11d} {ops_p:9d} {flops / 1e12:8.3f} "
              f"{sweep_s:8.1f} {analysis_s:10.1f}")
    print(f"{'all':16s} {'':9s} {'':11s} {'':11s} {'':9s} {'':8s} {tot[0]:8.1f} {tot[1]:10.1f}")
    print("sweep s = vm-steps × ops/vm-step × s/op + matmul FLOPs / rate; analysis s = plain "
          "steps (reference runs, branched training) × ops/step × s/op; one-step experiment, "
          "Hessian products and fits not included")
    if t_graph is not None:
        print("with graphs: sweep s = vm-steps × (ops outside the graph × s/op + ops in the "
              "graph × s/graph-op) + matmul FLOPs / rate; the analysis's plain loops are not "
              "captured")


def step_flops(task, batch_size: int) -> tuple[float, float]:
    """Matmul FLOPs of one training step (forward + backward) at ``batch_size`` and of
    one evaluation of the evaluation set, for one run."""
    from torch.utils.flop_counter import FlopCounterMode

    model = task.init_model(0)
    x, y = task.sample(task.generator(0, batch_size), batch_size)
    with FlopCounterMode(display=False) as train:
        task.loss_fn(model(x), y).backward()
    x_ev, y_ev = task.eval_data()
    with FlopCounterMode(display=False) as ev, torch.no_grad():
        task.loss_fn(model(x_ev), y_ev)
    return float(train.get_total_flops()), float(ev.get_total_flops())


def sweep_flops(task, members, budget: StepBudget) -> float:
    per_b = {b: step_flops(task, b) for b in sorted({m.batch_size for m in members})}
    total = 0.0
    for m in members:
        steps = budget.steps(m.batch_size)
        train, ev = per_b[m.batch_size]
        total += steps * train + len(log_steps(steps, budget.n_log)) * ev
    return total


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="cpu", choices=("tiny", "cpu", "full"))
    p.add_argument("--tasks", nargs="+", default=None)
    p.add_argument("--scale", type=float, default=0.05,
                   help="step budgets × this (the rates are per step)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--modes", nargs="+", default=None, choices=MODES,
                   help="default: auto, batched and plain, and graphed on CUDA")
    p.add_argument("--repeat", type=int, default=1,
                   help="time each mode this many times (interleaved) and keep the best")
    p.add_argument("--estimate", action="store_true",
                   help="also estimate the preset at scale 1 from op counts and FLOPs")
    p.add_argument("--estimate-only", action="store_true",
                   help="only the estimate (no timed training)")
    p.add_argument("--op-us", type=float, default=None,
                   help="microseconds per op for --estimate (default: measured here)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="matmul TFLOP/s for --estimate (default: measured here)")
    p.add_argument("--graph-op-us", type=float, default=None,
                   help="microseconds per operation replayed in a CUDA graph: --estimate "
                        "prices the sweep's captured updates at this (default: measured "
                        "on CUDA; elsewhere none, no graphs)")
    args = p.parse_args(argv)
    dev = resolve_device(args.device)
    if args.modes is None:
        args.modes = [m for m in MODES if m != "graphed" or dev.type == "cuda"]
    if "graphed" in args.modes and dev.type != "cuda" and not args.estimate_only:
        p.error(f"--modes graphed needs a CUDA device, got {dev}")
    torch.set_num_threads(args.threads)
    cfg = get_config(args.config, args.tasks)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    peak, n_peak = matmul_rate(dev)
    t_op = op_seconds(dev)
    t_graph = graph_op_seconds(dev) if dev.type == "cuda" else None
    print(f"device: {name}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"config {cfg.name}, step scale {args.scale}, best of {args.repeat}")
    print(f"matmul roofline: {peak / 1e9:.1f} GFLOP/s (float32, {n_peak}x{n_peak} products); "
          f"{t_op * 1e6:.2f} us per small op"
          + ("" if t_graph is None else f", {t_graph * 1e6:.2f} us replayed in a CUDA graph"))
    if args.estimate_only:
        estimate(cfg, dev, 1e12 * args.peak_tflops if args.peak_tflops else peak,
                 1e-6 * args.op_us if args.op_us else t_op,
                 t_graph if args.graph_op_us is None else 1e-6 * args.graph_op_us)
        return 0
    modes = [m for m in MODES if m in args.modes]
    head = f"{'task':16s} {'runs':>5s} {'run-steps':>10s} {'vm-steps':>9s} " + " ".join(
        f"{m + ' s':>10s}" for m in modes)
    head += f" {'run-steps/s':>12s} {'vs plain':>8s} {'GFLOP':>8s} {'roofline':>9s}"
    print(head)
    print("-" * len(head))
    totals = dict.fromkeys(modes, 0.0)
    tot_flops = 0.0
    for plan in cfg.plans:
        task = plan.make_task().to(dev)
        budget = scale_budget(plan.sweep.budget, args.scale)
        members = replace(plan.sweep, budget=budget).members()
        run_steps = sum(budget.steps(m.batch_size) for m in members)
        vm_steps = sum(budget.steps(g[0].batch_size) for g in group_members(members))
        flops = sweep_flops(task, members, budget)
        warm = members[:2]
        seconds = dict.fromkeys(modes, float("inf"))
        for rep in range(args.repeat):  # modes interleaved, order rotated, best of all
            for mode in modes[rep % len(modes):] + modes[:rep % len(modes)]:
                kw = MODE_KW[mode]
                train_grid(task, warm, StepBudget(4, 2, 2, 2), **kw)
                sync_device(dev)
                t0 = time.perf_counter()
                train_grid(task, members, budget, **kw)
                sync_device(dev)
                seconds[mode] = min(seconds[mode], time.perf_counter() - t0)
        for mode in modes:
            totals[mode] += seconds[mode]
        tot_flops += flops
        first = modes[0]
        rel = f"{seconds['plain'] / seconds[first]:8.2f}" if "plain" in seconds else f"{'':8s}"
        print(f"{plan.task:16s} {len(members):5d} {run_steps:10d} {vm_steps:9d} "
              + " ".join(f"{seconds[m]:10.2f}" for m in modes)
              + f" {run_steps / seconds[first]:12.0f} {rel} {flops / 1e9:8.2f} "
              f"{100 * flops / seconds[first] / peak:8.2f}%")
    first = modes[0]
    rel = f"{totals['plain'] / totals[first]:8.2f}" if "plain" in totals else f"{'':8s}"
    print(f"{'all':16s} {'':5s} {'':10s} {'':9s} " + " ".join(f"{totals[m]:10.2f}" for m in modes)
          + f" {'':12s} {rel} {tot_flops / 1e9:8.2f} "
          f"{100 * tot_flops / totals[first] / peak:8.2f}%")
    if "graphed" in totals and "batched" in totals:
        print(f"CUDA graphs: batched s / graphed s = {totals['batched'] / totals['graphed']:.2f} "
              "(all tasks)")
    print(f"run-steps/s, vs plain (plain s / {first} s) and roofline (matmul FLOP/s as a share "
          f"of the rate above) are for the {first} mode")
    if args.estimate:
        estimate(cfg, dev, 1e12 * args.peak_tflops if args.peak_tflops else peak,
                 1e-6 * args.op_us if args.op_us else t_op,
                 t_graph if args.graph_op_us is None else 1e-6 * args.graph_op_us)
    return 0


if __name__ == "__main__":
    sys.exit(main())
