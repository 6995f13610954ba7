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
  ``n s1 + 3 n k s1`` (n per-example gradients, k HVPs of the mean loss over n examples,
  k = ``hvp_probes`` or n, an HVP taken as at most 3 steps) and, for the one-step
  experiment, ``Σ_B n_b B s1``
  batch gradients plus ``n_b n_eps n s1 / 3`` forward passes per batch size;
- **captures**: each group runs `GRAPH_WARMUP` eager steps and one capture (priced as
  two eager steps) before it replays;
- **CPU**: the fits, tables and figures, from the analysis and report stages' recorded
  wall times of committed results (``wall_s`` of ``--manifest``), per task.

**Memory traffic.** The dispatch mode (`bench_harness.count_traffic`) also sums, per
non-view operation, the bytes of every tensor it reads and writes (numel × element
size, an expanded dimension once); views (schemas returning an alias ``Tensor(a)``:
view, expand, permute, transpose, slice, select, as_strided, t, unsqueeze, detach, ...)
and allocations launch no kernel and are counted neither as operations nor as bytes.
A group's step bytes are counted at batch sizes 4 and 8 with the group's own members
and extrapolated linearly in the batch size; the measurements' at 16, 32 and 64
examples, and at 64 with 16 probes, extrapolated by the form through them (k HVPs of
a mean over n examples: ``a + c n + e k + d n k``, k = n without probes); the
one-step experiment's per
batch at 32 and 64 examples, its float64 HVPs at 8 / (the task's element size) times
those bytes. Each group's run (each measurement) is priced

    t = max(ops × t_op (eager and graph-replayed), bytes / bandwidth, FLOPs / peak)

and the parts' times are the sums of these. The max is taken per group run, not per
operation: the launches are issued by the CPU while the device runs the kernels
queued before them, so a step takes at least the longest of the three, and the
counts hold FLOPs per step, not per operation (a per-operation max, which would
charge each kernel its own bound, is higher: this price is a lower bound in that
respect, an upper one in that load and update do not overlap). The columns sweep,
train, measure and total keep the price without traffic (launches + FLOPs / peak);
``w/ traffic s`` is the price above. The bandwidth is ``--bandwidth-tbs`` (default
3.35 TB/s, an H100 SXM's HBM3, assumed), measured by a copy on the device with
``--device cuda`` (`bench_harness.copy_bandwidth`).

    python benchmarks/estimate_harness.py --op-us 24 --graph-op-us 3 --peak-tflops 50
    python benchmarks/estimate_harness.py --device cuda          # this device's own rates

The rates default to those measured on ``--device`` (`bench_harness.op_seconds`,
`graph_op_seconds`, `matmul_rate`, and on CUDA `copy_bandwidth`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from bench_harness import (
    Traffic,
    copy_bandwidth,
    count_traffic,
    graph_op_seconds,
    matmul_rate,
    op_seconds,
    step_flops,
)

from empirical_batch.harness.config import get_config
from empirical_batch.harness.device import resolve_device
from empirical_batch.harness.group_step import GRAPH_WARMUP, GroupStep
from empirical_batch.harness.trainer import Member, group_members, log_steps
from empirical_batch.validation.experiments import scales
from empirical_batch.validation.experiments.branched import BRANCH_GROUP_EXAMPLES, BRANCH_SEED
from empirical_batch.validation.experiments.noise import measure_scales
from empirical_batch.validation.experiments.one_step import one_step_at

ROOT = Path(__file__).resolve().parents[1]
#: an H100 SXM's HBM3 bandwidth (bytes/s), the default where none is measured
H100_BANDWIDTH = 3.35e12


def group_step_ops(task, members) -> tuple[int, int, int]:
    """aten ops (non-view) of one step of a group outside the graph (`GroupStep.load`),
    inside it (`GroupStep.update`) and of one evaluation of every member."""
    load, update, ev = group_step_traffic(task, members)
    return int(load.ops), int(update.ops), int(ev.ops)


def group_step_traffic(task, members) -> tuple[Traffic, Traffic, Traffic]:
    """`Traffic` of one step of a group outside the graph, inside it, and of one
    evaluation of every member."""
    step = GroupStep(task, members)
    step.load(0)
    step.update()  # one-time work not counted
    context = getattr(task.options, "context", None) if task.language_model else None
    return (count_traffic(lambda: step.load(1), context), count_traffic(step.update, context),
            count_traffic(lambda: step.evaluate(False), context))


def step_bytes(task, members, batch_size: int, cache: dict) -> tuple[Traffic, Traffic]:
    """`Traffic` of one step (load and update) of a group of ``members`` (their optimizers
    and seeds) at ``batch_size``, and of one evaluation of the group: counted at batch
    sizes 4 and 8 and extrapolated linearly, ``b(B) = b(4) + (B - 4)(b(8) - b(4))/4``
    (parameters and optimizer states are moved once a step; activations once per
    example). ``cache`` holds the counts per optimizer list."""
    key = tuple(m.optimizer for m in members)
    if key not in cache:
        at = [group_step_traffic(task, [Member(m.optimizer, b, m.learning_rate, m.seed)
                                        for m in members]) for b in (4, 8)]
        cache[key] = (at[0][0] + at[0][1], at[1][0] + at[1][1], at[0][2])
    b4, b8, ev = cache[key]
    return b4 + (b8 - b4) * ((batch_size - 4) / 4), ev


@dataclass
class Cost:
    """A part's price: ``launch`` seconds (eager and graph-replayed operations), matmul
    ``flops``, ``bytes`` moved, ``summed`` (launch + FLOPs / peak, the price without
    traffic), ``bound`` (Σ over its groups of max(launch, bytes / bandwidth,
    FLOPs / peak)), ``scores`` (the bytes of attention scores that a fused attention
    kernel keeps out of memory) and ``fused`` (``bound`` without those bytes)."""

    launch: float = 0.0
    flops: float = 0.0
    bytes: float = 0.0
    summed: float = 0.0
    bound: float = 0.0
    scores: float = 0.0
    fused: float = 0.0

    def add(self, price: Pricing, launch: float, flops: float, nbytes: float,
            scores: float = 0.0) -> None:
        """One group's (or one measurement's) operations, FLOPs, bytes and, of those,
        the attention scores' that a fused kernel keeps out of memory."""
        self.launch += launch
        self.flops += flops
        self.bytes += nbytes
        self.scores += scores
        self.summed += launch + flops / price.peak
        self.bound += price.bound(launch, nbytes, flops)
        self.fused += price.bound(launch, nbytes - scores, flops)


class Pricing:
    """Seconds of eager operations, graph-replayed operations, matmul FLOPs and bytes."""

    def __init__(self, t_op: float, t_graph: float | None, peak: float,
                 bandwidth: float = 3.35e12):
        if not (t_op > 0 and peak > 0 and bandwidth > 0 and (t_graph is None or t_graph > 0)):
            raise ValueError(f"rates must be > 0, got t_op={t_op}, t_graph={t_graph}, "
                             f"peak={peak}, bandwidth={bandwidth}")
        self.t_op, self.t_graph, self.peak, self.bandwidth = t_op, t_graph, peak, bandwidth

    def group(self, ops: tuple[int, int, int], steps: int, evals: int, groups: int) -> float:
        """Launch seconds of ``steps`` steps and ``evals`` evaluations of groups with
        these op counts, and ``groups`` captures (none without graphs)."""
        out, inside, ev = ops
        if self.t_graph is None:
            return steps * (out + inside) * self.t_op + evals * ev * self.t_op
        capture = groups * (GRAPH_WARMUP + 2) * inside * self.t_op
        return (steps * (out * self.t_op + inside * self.t_graph) + evals * ev * self.t_op
                + capture)

    def bound(self, launch: float, nbytes: float, flops: float) -> float:
        """max(launch seconds, bytes / bandwidth, FLOPs / peak)."""
        return max(launch, nbytes / self.bandwidth, flops / self.peak)


def sweep_part(plan, task, price: Pricing) -> Cost:
    """The task's sweep, per vmap group."""
    budget = plan.sweep.budget
    groups = group_members(plan.sweep.members())
    cost, cache = Cost(), {}
    ops = group_step_ops(task, [Member(m.optimizer, 4, m.learning_rate, m.seed)
                                for m in groups[len(groups) // 2]])
    for g in groups:
        steps = budget.steps(g[0].batch_size)
        evals = len(log_steps(steps, budget.n_log))
        train, ev = step_flops(task, g[0].batch_size)
        b_step, b_ev = step_bytes(task, g, g[0].batch_size, cache)
        moved = b_step * steps + b_ev * evals
        cost.add(price, price.group(ops, steps, evals, 1),
                 len(g) * (steps * train + evals * ev), moved.bytes, moved.scores)
    return cost


def training_part(plan, task, price: Pricing) -> Cost:
    """The reference runs (groups of one) and the branches (per factor, in groups)."""
    cost, cache = Cost(), {}
    s1, ev = step_flops(task, 1)
    b = plan.noise.batch_size
    steps = plan.sweep.budget.steps(b)
    evals = len(log_steps(steps, plan.sweep.budget.n_log))
    for opt in plan.sweep.optimizers:
        one = [Member(opt, 4, 1e-3, 0)]
        b_step, b_ev = step_bytes(task, one, b, cache)
        moved = b_step * steps + b_ev * evals
        cost.add(price, price.group(group_step_ops(task, one), steps, evals, 1),
                 steps * b * s1 + evals * ev, moved.bytes, moved.scores)
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
            b_step, _ = step_bytes(task, members, k * b, cache)
            cost.add(price, price.group(group_step_ops(task, members), chunks * n_steps, 0,
                                        chunks),
                     runs * n_steps * k * b * s1, chunks * n_steps * b_step.bytes,
                     chunks * n_steps * b_step.scores)
    return cost


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


def bilinear_through(points: dict[tuple[int, int], float]):
    """The ``a + c n + e k + d n k`` through four points ``{(n, k): value}``: a
    measurement on n examples with k probes takes k Hessian-vector products of a mean
    over n examples (``d n k``; ``e k`` their parameter-sized vectors), per-example
    gradients ``c n``. Called as ``f(n)`` (every example a probe) or ``f(n, k)``."""
    import numpy as np

    keys = list(points)
    coef = np.linalg.solve([[1.0, n, k, n * k] for n, k in keys], [points[p] for p in keys])

    def at(n: float, k: float | None = None) -> float:
        k = n if k is None else min(k, n)
        return float(coef @ [1.0, n, k, n * k])

    return at


def measurement_part(plan, task, price: Pricing, budget: int) -> Cost:
    """The noise-scale measurements and the one-step experiment with the chunks of a
    device whose `saved_bytes_budget` is ``budget`` (see the module notes for the
    extrapolation)."""
    model = task.init_model(0)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    s1, _ = step_flops(task, 1)
    x, y = task.objective_data()

    def hvp_chunks(n: int, dtype, probes: int | None) -> int:
        k = n if probes is None else min(probes, n)  # the products taken
        m = model.to(dtype)
        xs = x[:n].to(dtype) if x.is_floating_point() else x[:n]
        ys = y[:n].to(dtype) if y.is_floating_point() else y[:n]
        out = math.ceil(k / scales.hvp_chunk(m, task.loss_fn, xs, ys, budget, cap=k))
        model.to(task.dtype)
        return out

    one = plan.one_step

    def one_step(nb: int, ne: int) -> Traffic:
        spec = replace(one, n_batches=nb, n_examples=ne, n_boot=2)
        return count_traffic(lambda: one_step_at(task, state, spec, learning_rate=1e-2))

    with _as_on(budget, 16):
        m = {n: count_traffic(lambda n=n: measure_scales(task, model, n)) for n in (16, 32, 64)}
        probed = count_traffic(lambda: measure_scales(task, model, 64, hvp_probes=16))
        per_chunk = (m[64].ops - m[32].ops) / 2  # 2 more chunks of 16
        hess = bilinear_through({**{(n, n): t.bytes for n, t in m.items()},
                                 (64, 16): probed.bytes})

        def measure_ops(n: int, dtype, probes: int | None) -> float:
            return m[32].ops + (hvp_chunks(n, dtype, probes) - 2) * per_chunk

        if one is not None:
            o4, o8, o4_64 = one_step(4, 32), one_step(8, 32), one_step(4, 64)
    cost = Cost()
    n, probes = plan.noise.n_examples, plan.noise.hvp_probes
    k = n if probes is None else min(probes, n)
    checkpoints = plan.noise.n_checkpoints * len(plan.sweep.optimizers)
    cost.add(price, checkpoints * measure_ops(n, task.dtype, probes) * price.t_op,
             checkpoints * (n * s1 + 3 * n * k * s1), checkpoints * hess(n, k))
    if one is not None:
        ne = one.n_examples
        ke = ne if one.hvp_probes is None else min(one.hvp_probes, ne)
        ops = (o8.ops + (one.n_batches - 8) * (o8.ops - o4.ops) / 4
               + measure_ops(ne, torch.float64, one.hvp_probes) - m[32].ops)
        # float64 HVPs: the float parts' bytes times 8 / the task's element size
        wide = 8 / torch.empty((), dtype=task.dtype).element_size()
        per_batch = (o8.bytes - o4.bytes) / 4  # at 32 examples
        per_example = (o4_64.bytes - o4.bytes - wide * (hess(64) - hess(32))) / (4 * 32)
        fixed = o4.bytes - 4 * per_batch - wide * hess(32)
        nbytes = (fixed + wide * hess(ne, ke)
                  + one.n_batches * (per_batch + (ne - 32) * per_example))
        flops = (ne * s1 + 3 * ne * ke * s1
                 + sum(one.n_batches * bb * s1 + one.n_batches * one.n_eps * ne * s1 / 3
                       for bb in one.batch_sizes))
        cost.add(price, one.n_checkpoints * ops * price.t_op, one.n_checkpoints * flops,
                 one.n_checkpoints * nbytes)
    return cost


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


def _positive(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def print_table(cfg, dev, price: Pricing, budget: int, cpu_per_task: float) -> None:
    """One row per task: the parts priced as launches + FLOPs (the columns without
    traffic), the TFLOP, the TB moved, their seconds at the bandwidth, the total with
    traffic (Σ over groups of the max, see the module notes), the TB of attention
    scores in the training steps and the total with traffic when a fused attention
    kernel keeps those out of memory."""
    head = (f"{'task':16s} {'sweep s':>8s} {'train s':>8s} {'measure s':>9s} {'CPU s':>6s} "
            f"{'total s':>8s} {'TFLOP':>8s} {'TB':>7s} {'traffic s':>9s} "
            f"{'w/ traffic s':>12s} {'scores TB':>9s} {'fused s':>8s}")
    print(head)
    print("-" * len(head))
    tot = [0.0] * 10
    for plan in cfg.plans:
        task = plan.make_task().to(dev)
        parts = (sweep_part(plan, task, price), training_part(plan, task, price),
                 measurement_part(plan, task, price, budget))
        nbytes = sum(c.bytes for c in parts)
        row = [*(c.summed for c in parts), cpu_per_task, sum(c.flops for c in parts) / 1e12,
               nbytes / 1e12, nbytes / price.bandwidth,
               sum(c.bound for c in parts) + cpu_per_task,
               sum(c.scores for c in parts) / 1e12, sum(c.fused for c in parts) + cpu_per_task]
        tot = [a + b for a, b in zip(tot, row, strict=True)]
        print(_row(plan.task, row))
        print(f"{'':16s} w/ traffic: sweep {parts[0].bound:.1f} s, train {parts[1].bound:.1f} s, "
              f"measure {parts[2].bound:.1f} s")
    print(_row("all", tot))
    print("sweep: the sweeps' group steps; train: reference runs and branches (group steps); "
          "measure: noise scales along the reference runs and the one-step experiment; "
          "CPU: fits, tables and figures; these and total s: launches + FLOPs / peak. "
          "TB: bytes moved by non-view ops; traffic s: TB / bandwidth; w/ traffic s: "
          "per group max(launches, bytes / bandwidth, FLOPs / peak), summed, + CPU; "
          "scores TB: attention scores (..., T, T) moved by the training steps; fused s: "
          "w/ traffic s without them (a fused attention kernel; HVPs and float64 not fused)")


def _row(name: str, row: list[float]) -> str:
    return (f"{name:16s} {row[0]:8.1f} {row[1]:8.1f} {row[2]:9.1f} {row[3]:6.1f} "
            f"{sum(row[:4]):8.1f} {row[4]:8.2f} {row[5]:7.1f} {row[6]:9.1f} {row[7]:12.1f} "
            f"{row[8]:9.1f} {row[9]:8.1f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="full", choices=("tiny", "cpu", "full"))
    p.add_argument("--tasks", nargs="+", default=None)
    p.add_argument("--device", default="cpu", help="where ops are counted and rates measured")
    p.add_argument("--op-us", type=_positive, default=None, help="microseconds per eager op")
    p.add_argument("--graph-op-us", type=_positive, default=None,
                   help="microseconds per graph-replayed op (default: measured on CUDA; "
                        "elsewhere no graphs)")
    p.add_argument("--no-graphs", action="store_true", help="price every step eagerly")
    p.add_argument("--peak-tflops", type=_positive, default=None, help="matmul TFLOP/s")
    p.add_argument("--bandwidth-tbs", type=_positive, default=None,
                   help="memory bandwidth, TB/s (default: measured by a copy on CUDA, "
                        f"else {H100_BANDWIDTH / 1e12:g}: an H100 SXM's HBM3, assumed)")
    p.add_argument("--device-memory-gib", type=float, default=80.0,
                   help="the CUDA device's memory, which sets the measurements' chunks "
                        "(default 80: an H100; 0: the CPU's bound)")
    p.add_argument("--manifest", type=Path, nargs="+",
                   default=[ROOT / "data/harness-full/manifest.report.json"],
                   help="manifests whose wall_s give the CPU seconds per task")
    args = p.parse_args(argv)
    if not (args.device_memory_gib >= 0 and math.isfinite(args.device_memory_gib)):
        p.error(f"--device-memory-gib must be >= 0, got {args.device_memory_gib}")
    dev = resolve_device(args.device)
    torch.set_num_threads(1)
    t_op = 1e-6 * args.op_us if args.op_us else op_seconds(dev)
    t_graph = (None if args.no_graphs else 1e-6 * args.graph_op_us if args.graph_op_us
               else graph_op_seconds(dev) if dev.type == "cuda" else None)
    peak = 1e12 * args.peak_tflops if args.peak_tflops else matmul_rate(dev)[0]
    bandwidth = (1e12 * args.bandwidth_tbs if args.bandwidth_tbs
                 else copy_bandwidth(dev) if dev.type == "cuda" else H100_BANDWIDTH)
    price = Pricing(t_op, t_graph, peak, bandwidth)
    budget = (max(scales.SAVED_BYTES, int(args.device_memory_gib * 2**30
                                          * scales.CUDA_MEMORY_FRACTION))
              if args.device_memory_gib > 0 else scales.SAVED_BYTES)
    cpu_per_task, n_fitted = cpu_seconds(args.manifest)
    cfg = get_config(args.config, args.tasks)
    graphs = "no graphs" if t_graph is None else f"{t_graph * 1e6:.1f} us per graph-replayed op"
    print(f"config {cfg.name} at scale 1: {t_op * 1e6:.1f} us per eager op, {graphs}, "
          f"{peak / 1e12:.2f} TFLOP/s matmul, {bandwidth / 1e12:.2f} TB/s memory, "
          f"chunks for {budget / 1e9:.2f} GB; CPU {cpu_per_task:.1f} s per task "
          f"(fits, tables, figures: {n_fitted} tasks of "
          f"{', '.join(_shown(m) for m in args.manifest)})")
    print_table(cfg, dev, price, budget, cpu_per_task)
    return 0


if __name__ == "__main__":
    sys.exit(main())
