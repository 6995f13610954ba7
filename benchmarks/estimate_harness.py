"""The harness preset's wall time on a device, estimated from counts (no training at scale 1).

Every part of ``empirical-batch harness --config full`` is priced from the aten
operations it dispatches (each a kernel launch on CUDA) and its matmul FLOPs:

- **sweep**: each vmap group's step is `GroupStep.load` (drawn outside any graph, at the
  time per operation) and `GroupStep.update` (captured: at the time per graph-replayed
  operation; without graphs at the time per operation), counted with a dispatch mode on
  a group of the task, times the group steps of the preset;
- **reference runs and branches**: the same group step (a group of one for each
  reference run; per factor, all checkpoints and seeds of the branches in groups of at
  most `BRANCH_GROUP_EXAMPLES` examples), counted the same way;
- **measurements**: the noise scales at each checkpoint of each reference run
  (`measure_scales`: per-example gradients and Hessian-vector products in chunks) and
  the one-step experiment: operations counted at reduced sizes (the objective sample
  at 32 and 64 examples with HVP chunks of 16; 4 and 8 batches per batch size) and
  extrapolated linearly in the number of chunks and batches to the preset's sizes, with
  the chunks of a device of ``--device-memory-gib`` (`saved_bytes_budget`: a sixteenth
  of it on CUDA);
  FLOPs from one example's training step ``s1`` (counted): per checkpoint
  ``n s1 + 3 n^2 s1`` (n per-example gradients, n HVPs of the mean loss over n examples,
  an HVP taken as at most 3 steps) and, for the one-step experiment, ``Σ_B n_b B s1``
  batch gradients plus ``n_b n_eps n s1 / 3`` forward passes per batch size;
- **captures**: each group runs `GRAPH_WARMUP` eager steps and one capture (priced as
  two eager steps) before it replays;
- **CPU**: the fits, tables and figures, from the analysis and report stages' recorded
  wall times of committed results (``wall_s`` of ``--manifest``), per task.

    python benchmarks/estimate_harness.py --op-us 24 --graph-op-us 3 --peak-tflops 50
    python benchmarks/estimate_harness.py --device cuda          # this device's own rates

The rates default to those measured on ``--device`` (`bench_harness.op_seconds`,
`graph_op_seconds`, `matmul_rate`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from bench_harness import count_ops, graph_op_seconds, matmul_rate, op_seconds, step_flops

from empirical_batch.harness import scales
from empirical_batch.harness.branched import BRANCH_GROUP_EXAMPLES, BRANCH_SEED
from empirical_batch.harness.config import get_config
from empirical_batch.harness.device import resolve_device
from empirical_batch.harness.group_step import GRAPH_WARMUP, GroupStep
from empirical_batch.harness.noise import measure_scales
from empirical_batch.harness.one_step import one_step_at
from empirical_batch.harness.trainer import Member, group_members, log_steps

ROOT = Path(__file__).resolve().parents[1]


def group_step_ops(task, members) -> tuple[int, int, int]:
    """aten ops of one step of a group outside the graph (`GroupStep.load`), inside it
    (`GroupStep.update`) and of one evaluation of every member."""
    step = GroupStep(task, members)
    step.load(0)
    step.update()  # one-time work not counted
    return (count_ops(lambda: step.load(1)), count_ops(step.update),
            count_ops(lambda: step.evaluate(False)))


class Pricing:
    """Seconds of eager operations, graph-replayed operations and matmul FLOPs."""

    def __init__(self, t_op: float, t_graph: float | None, peak: float):
        self.t_op, self.t_graph, self.peak = t_op, t_graph, peak

    def group(self, ops: tuple[int, int, int], steps: int, evals: int, groups: int) -> float:
        """``steps`` steps and ``evals`` evaluations of groups with these op counts, and
        ``groups`` captures (none without graphs)."""
        out, inside, ev = ops
        if self.t_graph is None:
            return steps * (out + inside) * self.t_op + evals * ev * self.t_op
        capture = groups * (GRAPH_WARMUP + 2) * inside * self.t_op
        return (steps * (out * self.t_op + inside * self.t_graph) + evals * ev * self.t_op
                + capture)


def sweep_part(plan, task, price: Pricing) -> tuple[float, float]:
    """(seconds, matmul FLOPs) of the task's sweep."""
    budget = plan.sweep.budget
    groups = group_members(plan.sweep.members())
    secs = flops = 0.0
    ops = group_step_ops(task, [Member(m.optimizer, 4, m.learning_rate, m.seed)
                                for m in groups[len(groups) // 2]])
    for g in groups:
        steps = budget.steps(g[0].batch_size)
        secs += price.group(ops, steps, len(log_steps(steps, budget.n_log)), 1)
        train, ev = step_flops(task, g[0].batch_size)
        flops += len(g) * (steps * train + len(log_steps(steps, budget.n_log)) * ev)
    return secs, flops


def training_part(plan, task, price: Pricing) -> tuple[float, float]:
    """(seconds, matmul FLOPs) of the reference runs and the branches."""
    secs = flops = 0.0
    s1, ev = step_flops(task, 1)
    b = plan.noise.batch_size
    steps = plan.sweep.budget.steps(b)
    evals = len(log_steps(steps, plan.sweep.budget.n_log))
    for opt in plan.sweep.optimizers:
        one = [Member(opt, 4, 1e-3, 0)]
        secs += price.group(group_step_ops(task, one), steps, evals, 1)
        flops += steps * b * s1 + evals * ev
        spec = plan.branched
        if spec is None:
            continue
        seeds = len(set(spec.seeds) | {0})  # seed 0 of k = 1 sets the tolerance
        for k in spec.factors:
            runs = spec.n_checkpoints * (seeds if k == 1 else len(spec.seeds))
            size = max(1, BRANCH_GROUP_EXAMPLES // (k * b))
            chunks = math.ceil(runs / size)
            members = [Member(opt, 4, 1e-3, BRANCH_SEED + spec.seeds[i % len(spec.seeds)])
                       for i in range(min(runs, size))]
            n_steps = spec.steps_at_base // k
            secs += price.group(group_step_ops(task, members), chunks * n_steps, 0, chunks)
            flops += runs * n_steps * k * b * s1
    return secs, flops


@contextlib.contextmanager
def _as_on(budget: int, n_hvp: int):
    """Within the block the harness chunks as on a device whose `saved_bytes_budget` is
    ``budget``, with at most ``n_hvp`` HVPs per chunk."""
    old = scales.HVP_CHUNK, scales.saved_bytes_budget
    scales.HVP_CHUNK, scales.saved_bytes_budget = n_hvp, lambda device: budget
    try:
        yield
    finally:
        scales.HVP_CHUNK, scales.saved_bytes_budget = old


def measurement_part(plan, task, price: Pricing, budget: int) -> tuple[float, float]:
    """(seconds, matmul FLOPs) of the noise-scale measurements and the one-step experiment
    with the chunks of a device whose `saved_bytes_budget` is ``budget`` (see the module
    notes for the extrapolation)."""
    model = task.init_model(0)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    s1, _ = step_flops(task, 1)
    x, y = task.objective_data()

    def hvp_chunks(n: int, dtype) -> int:
        m = model.to(dtype)
        xs = x[:n].to(dtype) if x.is_floating_point() else x[:n]
        ys = y[:n].to(dtype) if y.is_floating_point() else y[:n]
        out = math.ceil(n / scales.hvp_chunk(m, task.loss_fn, xs, ys, budget, cap=n))
        model.to(task.dtype)
        return out

    with _as_on(budget, 16):
        m32 = count_ops(lambda: measure_scales(task, model, 32))
        m64 = count_ops(lambda: measure_scales(task, model, 64))
        per_chunk = (m64 - m32) / 2  # 2 more chunks of 16

        def measure_ops(n: int, dtype) -> float:
            return m32 + (hvp_chunks(n, dtype) - 2) * per_chunk

        one = plan.one_step
        small = [replace(one, n_batches=nb, n_examples=32, n_boot=2) for nb in (4, 8)]
        o4, o8 = (count_ops(lambda s=s: one_step_at(task, state, s, learning_rate=1e-2))
                  for s in small)
    n = plan.noise.n_examples
    checkpoints = plan.noise.n_checkpoints * len(plan.sweep.optimizers)
    ops = checkpoints * measure_ops(n, task.dtype)
    flops = checkpoints * (n * s1 + 3 * n * n * s1)
    if one is not None:
        per_checkpoint = (o8 + (one.n_batches - 8) * (o8 - o4) / 4
                          + measure_ops(one.n_examples, torch.float64) - m32)
        ops += one.n_checkpoints * per_checkpoint
        ne = one.n_examples
        flops += one.n_checkpoints * (
            ne * s1 + 3 * ne * ne * s1
            + sum(one.n_batches * bb * s1 + one.n_batches * one.n_eps * ne * s1 / 3
                  for bb in one.batch_sizes))
    return ops * price.t_op + flops / price.peak, flops


def cpu_seconds(manifests: list[Path]) -> tuple[float, int]:
    """Seconds of fits, tables and figures per task: the ``fits/*`` and ``report`` wall
    times of the manifests, over the tasks they fitted."""
    total, tasks = 0.0, set()
    for path in manifests:
        wall = json.loads(path.read_text())["wall_s"]
        fits = {k: v for k, v in wall.items() if k.startswith("fits/")}
        tasks |= {k.split("/", 1)[1] for k in fits}
        total += wall.get("report", sum(fits.values()))
    return total / max(1, len(tasks)), len(tasks)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="full", choices=("tiny", "cpu", "full"))
    p.add_argument("--tasks", nargs="+", default=None)
    p.add_argument("--device", default="cpu", help="where ops are counted and rates measured")
    p.add_argument("--op-us", type=float, default=None, help="microseconds per eager op")
    p.add_argument("--graph-op-us", type=float, default=None,
                   help="microseconds per graph-replayed op (default: measured on CUDA; "
                        "elsewhere no graphs)")
    p.add_argument("--no-graphs", action="store_true", help="price every step eagerly")
    p.add_argument("--peak-tflops", type=float, default=None, help="matmul TFLOP/s")
    p.add_argument("--device-memory-gib", type=float, default=80.0,
                   help="the CUDA device's memory, which sets the measurements' chunks "
                        "(default 80: an H100; 0: the CPU's bound)")
    p.add_argument("--manifest", type=Path, nargs="+",
                   default=[ROOT / "data/harness-full/manifest.report.json"],
                   help="manifests whose wall_s give the CPU seconds per task")
    args = p.parse_args(argv)
    dev = resolve_device(args.device)
    torch.set_num_threads(1)
    t_op = 1e-6 * args.op_us if args.op_us else op_seconds(dev)
    t_graph = (None if args.no_graphs else 1e-6 * args.graph_op_us if args.graph_op_us
               else graph_op_seconds(dev) if dev.type == "cuda" else None)
    peak = 1e12 * args.peak_tflops if args.peak_tflops else matmul_rate(dev)[0]
    price = Pricing(t_op, t_graph, peak)
    budget = (max(scales.SAVED_BYTES, int(args.device_memory_gib * 2**30
                                          * scales.CUDA_MEMORY_FRACTION))
              if args.device_memory_gib > 0 else scales.SAVED_BYTES)
    cpu_per_task, n_fitted = cpu_seconds(args.manifest)
    cfg = get_config(args.config, args.tasks)
    graphs = "no graphs" if t_graph is None else f"{t_graph * 1e6:.1f} us per graph-replayed op"
    print(f"config {cfg.name} at scale 1: {t_op * 1e6:.1f} us per eager op, {graphs}, "
          f"{peak / 1e12:.2f} TFLOP/s matmul, chunks for {budget / 1e9:.2f} GB; "
          f"CPU {cpu_per_task:.1f} s per task "
          f"(fits, tables, figures: {n_fitted} tasks of "
          f"{', '.join(_shown(m) for m in args.manifest)})")
    head = (f"{'task':16s} {'sweep s':>8s} {'train s':>8s} {'measure s':>9s} {'CPU s':>6s} "
            f"{'total s':>8s} {'TFLOP':>8s}")
    print(head)
    print("-" * len(head))
    tot = [0.0] * 5
    for plan in cfg.plans:
        task = plan.make_task().to(dev)
        sw, f1 = sweep_part(plan, task, price)
        tr, f2 = training_part(plan, task, price)
        me, f3 = measurement_part(plan, task, price, budget)
        row = [sw + f1 / peak, tr + f2 / peak, me, cpu_per_task, (f1 + f2 + f3) / 1e12]
        tot = [a + b for a, b in zip(tot, row, strict=True)]
        print(f"{plan.task:16s} {row[0]:8.1f} {row[1]:8.1f} {row[2]:9.1f} {row[3]:6.1f} "
              f"{sum(row[:4]):8.1f} {row[4]:8.2f}")
    print(f"{'all':16s} {tot[0]:8.1f} {tot[1]:8.1f} {tot[2]:9.1f} {tot[3]:6.1f} "
          f"{sum(tot[:4]):8.1f} {tot[4]:8.2f}")
    print("sweep: the sweeps' group steps; train: reference runs and branches (group steps); "
          "measure: noise scales along the reference runs and the one-step experiment; "
          "CPU: fits, tables and figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
