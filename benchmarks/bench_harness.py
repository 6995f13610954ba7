"""Where the harness's sweep time goes: batched program vs plain loop, against the matmul roofline.

Trains every run of a configuration's sweep (all batch sizes × learning rates × seeds,
SGD and Adam) with step budgets × ``--scale`` in each mode of ``--modes``:

- ``auto``: what the harness does (`train_grid`'s default: each vmap group batched or
  looped by `empirical_batch.harness.trainer.prefer_batched`);
- ``batched``: every group as one vmapped program, run eagerly (no CUDA graph);
- ``graphed`` (CUDA only): every group as one vmapped program whose step is captured in a
  CUDA graph and replayed (`empirical_batch.harness.group_step.GroupStep`; what ``auto``
  does on CUDA unless ``EMPIRICAL_BATCH_CUDA_GRAPHS=0``);
- ``plain``: one run at a time with ``torch.optim``.

Per task it prints the wall time of each mode, run-steps per second, the speedup over
the plain loop, and the share of the device's matmul roofline that the auto mode
reaches: the sweep's matmul FLOPs (forward and backward of every training step and the
logged evaluations, counted once per batch size with ``torch.utils.flop_counter``)
divided by the wall time and by the device's measured dense matmul rate (float32,
best of several square products, printed in the header). The first group of each mode
is preceded by a short untimed warm-up. A ``control`` column times the first mode a
second time in each round (``--no-control`` leaves it out): its difference from that
mode's column is the machine's noise, against which the modes' differences are read.

    python benchmarks/bench_harness.py --config tiny --scale 0.05          # seconds
    python benchmarks/bench_harness.py --config cpu --scale 0.05           # CPU table
    python benchmarks/bench_harness.py --config full --scale 0.05 --device cuda --modes auto batched
    python benchmarks/bench_harness.py --config full --scale 0.05 --device cuda \
        --modes graphed batched            # CUDA graphs against eager steps
    python benchmarks/bench_harness.py --config full --scale 0.05 --device cuda \
        --modes graphed --estimate         # ... and the preset at scale 1 from counts

``--estimate`` (or ``--estimate-only``, no timed training) prints the preset's time at
scale 1 from operation counts and FLOPs, sweeps and analysis, with
``benchmarks/estimate_harness.py`` at the rates measured here (or given with
``--op-us``, ``--graph-op-us``, ``--peak-tflops``).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from empirical_batch.harness.config import get_config, scale_budget
from empirical_batch.harness.device import resolve_device, sync_device
from empirical_batch.harness.trainer import (
    StepBudget,
    group_members,
    log_steps,
    train_grid,
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


#: non-view aten ops that launch no kernel and move no data (allocations, aliases that
#: their schemas do not mark as views)
NO_KERNEL = frozenset({"aten::empty", "aten::empty_strided", "aten::empty_like",
                       "aten::new_empty", "aten::new_empty_strided", "aten::_unsafe_view",
                       "aten::lift_fresh"})


def touched_bytes(t: torch.Tensor) -> int:
    """Bytes of the elements of ``t`` that a kernel reads or writes: its element size
    times the product of its sizes over the dimensions of non-zero stride (an expanded
    dimension, stride 0, is one element in memory); 0 for an empty tensor."""
    if t.numel() == 0:
        return 0
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= size
    return n * t.element_size()


@dataclass(frozen=True)
class Traffic:
    """What a piece of code dispatches: ``ops`` non-view aten operations (each a kernel
    launch on CUDA), ``views`` view operations (schema returns an alias of an input,
    ``Tensor(a)``; no kernel, no data moved) and ``bytes``, the sum over the non-view
    operations of `touched_bytes` of every tensor argument and every output (an
    in-place operation's ``self`` counted once read and once written). Floats so that
    counts can be interpolated."""

    ops: float = 0
    views: float = 0
    bytes: float = 0
    #: of ``bytes``, those of attention-score tensors (`is_scores`), which a fused
    #: attention kernel keeps out of memory
    scores: float = 0

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(self.ops + other.ops, self.views + other.views,
                       self.bytes + other.bytes, self.scores + other.scores)

    def __sub__(self, other: Traffic) -> Traffic:
        return self + other * -1

    def __mul__(self, k: float) -> Traffic:
        return Traffic(self.ops * k, self.views * k, self.bytes * k, self.scores * k)

    __rmul__ = __mul__


def is_scores(t: torch.Tensor, context: int) -> bool:
    """Whether ``t`` has the shape of attention scores or weights over ``context``
    positions, (..., T, T) with T = ``context``: at least 3 dimensions (a batched matmul
    flattens batch and heads into one). A T × T weight matrix stacked over vmapped runs
    has that shape too (``text_lm``'s 64 × 64 output projection) and is counted with
    them."""
    return t.dim() >= 3 and t.shape[-1] == t.shape[-2] == context


def _tensors(tree) -> list:
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def count_traffic(fn, context: int | None = None) -> Traffic:
    """The `Traffic` of ``fn()``, counted with a dispatch mode (below autograd and vmap:
    the operations and tensors the device runs); ``scores`` counts the tensors
    `is_scores` over ``context`` positions (none without it)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    acc = {"ops": 0, "views": 0, "bytes": 0, "scores": 0}

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.is_view:
                acc["views"] += 1
            elif func.name() not in NO_KERNEL:
                tensors = _tensors((args, kwargs or {})) + _tensors(out)
                acc["ops"] += 1
                acc["bytes"] += sum(touched_bytes(t) for t in tensors)
                if context is not None:
                    acc["scores"] += sum(touched_bytes(t) for t in tensors
                                         if is_scores(t, context))
            return out

    with Count():
        fn()
    return Traffic(**acc)


def count_ops(fn) -> int:
    """Non-view aten operations ``fn()`` dispatches (each a kernel launch on CUDA)."""
    return int(count_traffic(fn).ops)


def copy_bandwidth(dev: torch.device, mib: int = 1024) -> float:
    """The device's memory bandwidth (bytes/s): a copy of ``mib`` MiB between two
    buffers moves 2 × ``mib`` MiB (read and write); best of several."""
    n = mib * 2**20 // 4
    src = torch.ones(n, device=dev)
    dst = torch.empty_like(src)
    dst.copy_(src)
    sync_device(dev)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        dst.copy_(src)
        sync_device(dev)
        best = min(best, time.perf_counter() - t0)
    return 2 * n * 4 / best


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


def estimate(args, peak: float, t_op: float, t_graph: float | None) -> int:
    """The preset at scale 1 priced by `estimate_harness` at the given rates, or at the
    ones measured here (`matmul_rate`, `op_seconds`, `graph_op_seconds`)."""
    import estimate_harness

    print()
    dev = resolve_device(args.device)
    memory = (torch.cuda.get_device_properties(dev).total_memory / 2**30
              if dev.type == "cuda" else 0)
    argv = ["--config", args.config, "--device", args.device,
            "--device-memory-gib", str(memory),
            "--op-us", str(args.op_us or t_op * 1e6),
            "--peak-tflops", str(args.peak_tflops or peak / 1e12)]
    graph_us = args.graph_op_us or (None if t_graph is None else t_graph * 1e6)
    argv += ["--no-graphs"] if graph_us is None else ["--graph-op-us", str(graph_us)]
    return estimate_harness.main(argv + (["--tasks", *args.tasks] if args.tasks else []))


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
    p.add_argument("--no-control", action="store_true",
                   help="leave out the control (the first mode timed a second time)")
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
        return estimate(args, peak, t_op, t_graph)
    modes = [m for m in MODES if m in args.modes]
    control = [] if args.no_control else ["control"]  # modes[0], timed again
    head = f"{'task':16s} {'runs':>5s} {'run-steps':>10s} {'vm-steps':>9s} " + " ".join(
        f"{m + ' s':>10s}" for m in modes + control)
    head += f" {'run-steps/s':>12s} {'vs plain':>8s} {'GFLOP':>8s} {'roofline':>9s}"
    print(head)
    print("-" * len(head))
    totals = dict.fromkeys(modes + control, 0.0)
    tot_flops = 0.0
    for plan in cfg.plans:
        task = plan.make_task().to(dev)
        budget = scale_budget(plan.sweep.budget, args.scale)
        members = replace(plan.sweep, budget=budget).members()
        run_steps = sum(budget.steps(m.batch_size) for m in members)
        vm_steps = sum(budget.steps(g[0].batch_size) for g in group_members(members))
        flops = sweep_flops(task, members, budget)
        warm = members[:2]
        seconds = dict.fromkeys(modes + control, float("inf"))
        timed = modes + control
        for rep in range(args.repeat):  # modes interleaved, order rotated, best of all
            for mode in timed[rep % len(timed):] + timed[:rep % len(timed)]:
                kw = MODE_KW[modes[0] if mode == "control" else mode]
                train_grid(task, warm, StepBudget(4, 2, 2, 2), **kw)
                sync_device(dev)
                t0 = time.perf_counter()
                train_grid(task, members, budget, **kw)
                sync_device(dev)
                seconds[mode] = min(seconds[mode], time.perf_counter() - t0)
        for mode in modes + control:
            totals[mode] += seconds[mode]
        tot_flops += flops
        first = modes[0]
        rel = f"{seconds['plain'] / seconds[first]:8.2f}" if "plain" in seconds else f"{'':8s}"
        print(f"{plan.task:16s} {len(members):5d} {run_steps:10d} {vm_steps:9d} "
              + " ".join(f"{seconds[m]:10.2f}" for m in modes + control)
              + f" {run_steps / seconds[first]:12.0f} {rel} {flops / 1e9:8.2f} "
              f"{100 * flops / seconds[first] / peak:8.2f}%")
    first = modes[0]
    rel = f"{totals['plain'] / totals[first]:8.2f}" if "plain" in totals else f"{'':8s}"
    print(f"{'all':16s} {'':5s} {'':10s} {'':9s} "
          + " ".join(f"{totals[m]:10.2f}" for m in modes + control)
          + f" {'':12s} {rel} {tot_flops / 1e9:8.2f} "
          f"{100 * tot_flops / totals[first] / peak:8.2f}%")
    if "graphed" in totals and "batched" in totals:
        print(f"CUDA graphs: batched s / graphed s = {totals['batched'] / totals['graphed']:.2f} "
              "(all tasks)")
    print(f"run-steps/s, vs plain (plain s / {first} s) and roofline (matmul FLOP/s as a share "
          f"of the rate above) are for the {first} mode"
          + ("" if args.no_control else f"; control = the {first} mode timed again"))
    if args.estimate:
        return estimate(args, peak, t_op, t_graph)
    return 0


if __name__ == "__main__":
    sys.exit(main())
