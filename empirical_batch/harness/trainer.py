"""Training a grid of runs (batch sizes × learning rates × seeds) as one batched program.

Each run (a `Member`) is plain SGD or Adam on a task's model from the
initialisation of its seed, on the data stream of ``(seed, batch_size)`` (so runs
that differ only in learning rate or optimizer see the same batches: common random
numbers). Runs that share a batch size (SGD and Adam alike, `group_members`) are
trained together: their parameters are stacked with `torch.func.stack_module_state`
and one step of all of them is a single `torch.func.vmap`-ed forward pass, one backward pass and a
batched update, so a GPU sees one large program instead of many tiny ones; on CUDA
that step (`empirical_batch.harness.group_step.GroupStep`) is captured once in a CUDA
graph and replayed, so its hundreds of small kernels cost one launch.
`train_plain` is the reference: one ``nn.Module`` and ``torch.optim`` optimizer
per run, step by step; the tests hold the batched program to it.

The evaluation loss is recorded after ``k`` updates for every ``k`` in the run's
log-spaced logging steps (`log_steps`), in the sweep schema (docs/design.md).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .._numeric import log_steps
from ..errors import InputError
from .group_step import (
    ADAM_BETAS,
    ADAM_EPS,
    CUDA_GRAPHS_ENV,
    GRAPH_WARMUP,
    GroupStep,
    cuda_graphs_enabled,
    cuda_graphs_setting,
    run_group,
    torch_optimizer,
    use_graphs,
)
from .tasks.base import Task

__all__ = ["ADAM_BETAS", "ADAM_EPS", "CUDA_GRAPHS_ENV", "GRAPH_WARMUP", "OPTIMIZERS",
           "GroupStep", "Member", "StepBudget", "cuda_graphs_enabled", "cuda_graphs_setting",
           "group_members", "log_steps", "prefer_batched", "train_batched", "train_grid",
           "train_group", "train_plain"]

OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class Member:
    """One run of a sweep: optimizer, batch size, (peak = constant) learning rate, seed."""

    optimizer: str
    batch_size: int
    learning_rate: float
    seed: int

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if not isinstance(self.batch_size, int | np.integer) or self.batch_size <= 0:
            raise InputError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise InputError(f"learning_rate must be finite and > 0, got {self.learning_rate!r}")

    @property
    def run(self) -> str:
        return f"{self.optimizer}-b{self.batch_size}-lr{self.learning_rate:.6g}-s{self.seed}"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class StepBudget:
    """Steps per run: ``clip(ceil(examples / B), min_steps, max_steps)``.

    Small batches get more steps (a fixed example budget), large batches at least
    ``min_steps``: the tradeoff S = S_min(1 + B_crit/B), E = E_min(1 + B/B_crit)
    needs examples at small B and steps at large B.
    """

    examples: int
    min_steps: int
    max_steps: int
    n_log: int = 24

    def __post_init__(self) -> None:
        for name in ("examples", "min_steps", "max_steps", "n_log"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise InputError(f"StepBudget.{name} must be a positive integer, got {value!r}")
        if self.min_steps > self.max_steps:
            raise InputError(
                f"StepBudget.min_steps ({self.min_steps}) must be <= max_steps ({self.max_steps})"
            )

    def steps(self, batch_size: int) -> int:
        return int(min(max(math.ceil(self.examples / batch_size), self.min_steps), self.max_steps))


def _row(task: Task, m: Member, step: int, loss: float) -> dict:
    return {
        "run": m.run,
        "batch_size": m.batch_size,
        "learning_rate": m.learning_rate,
        "step": int(step),
        "examples": int(step) * m.batch_size,
        "metric": float(loss),
        "seed": m.seed,
        "optimizer": m.optimizer,
        "task": task.name,
    }


# ----------------------------------------------------------------------------- plain loop
def train_plain(
    task: Task,
    member: Member,
    steps: int,
    logged: Iterable[int],
    *,
    callback: Callable[..., None] | None = None,
    with_optimizer: bool = False,
) -> list[dict]:
    """Train one run with ``torch.optim`` (the reference implementation).

    ``callback(step, model, eval_loss)`` is called at each logged step, and
    ``callback(step, model, eval_loss, optimizer)`` with ``with_optimizer=True`` (both
    are live: copy what you keep).
    """
    logged = set(int(s) for s in logged)
    model = task.init_model(member.seed)
    opt = torch_optimizer(member.optimizer, model.parameters(), member.learning_rate)
    gen = task.generator(member.seed, member.batch_size)
    x_ev, y_ev = task.eval_data()
    rows = []
    for step in range(steps + 1):
        if step in logged:
            with torch.no_grad():
                loss = float(task.loss_fn(model(x_ev), y_ev))
            rows.append(_row(task, member, step, loss))
            if callback is not None:
                if with_optimizer:
                    callback(step, model, loss, opt)
                else:
                    callback(step, model, loss)
        if step == steps:
            break
        x, y = task.sample(gen, member.batch_size)
        opt.zero_grad(set_to_none=True)
        task.loss_fn(model(x), y).backward()
        opt.step()
    return rows


def train_batched(
    task: Task, members: Sequence[Member], steps: int, logged: Iterable[int], *, progress=None,
    cuda_graphs: bool | None = None,
    callback: Callable[[int, GroupStep, torch.Tensor], None] | None = None,
) -> list[dict]:
    """Train ``members`` (one batch size; SGD, Adam or both) together as one vmapped program.

    Numerically the same computation as `train_plain` for each member (same
    initialisation, same batches, same update formulas), up to floating-point
    summation order. Each step is `GroupStep`'s, driven by `run_group`; on CUDA, with
    ``cuda_graphs`` (None: `cuda_graphs_enabled`, on unless turned off), its update is
    captured in a CUDA graph after `GRAPH_WARMUP` eager steps and replayed.
    ``cuda_graphs=True`` off CUDA is an `InputError`. ``callback(step, group,
    eval_losses)`` is called at each logged step (the group is live: copy what you keep;
    its runs are in the group's order, `GroupStep.members`).
    """
    if not members:
        return []
    sizes = {m.batch_size for m in members}
    if len(sizes) != 1:
        raise InputError(
            f"train_batched needs one batch size, got {sorted(sizes)}; use train_grid to "
            "group a mixed grid"
        )
    graphed = use_graphs(task, cuda_graphs)
    logged = set(int(s) for s in logged)
    group = GroupStep(task, members)
    # on the CPU a large evaluation runs member by member (the vmapped forward of the
    # transformer tasks costs about twice the loop there); elsewhere in one program
    eval_loop = (task.device.type == "cpu"
                 and len(members) * eval_matmul_flops(task) > CPU_BATCH_FLOPS)
    logs: list[tuple[int, torch.Tensor]] = []  # kept on the device, copied once at the end

    def log(step: int) -> None:
        if step in logged:
            logs.append((step, group.evaluate(eval_loop)))
            if callback is not None:
                callback(step, group, logs[-1][1])

    run_group(group, steps, graphed=graphed, before_step=log, progress=progress)
    if not logs:
        return []
    table = torch.stack([v for _, v in logs]).cpu().tolist()  # one copy per group
    rows = []
    for (step, _), losses in zip(logs, table, strict=True):
        by_input = dict(zip(group.order, losses, strict=True))  # back to the members' order
        rows += [_row(task, m, step, by_input[i]) for i, m in enumerate(members)]
    return rows


# ------------------------------------------------------------------- batched or plain
#: on the CPU a group is trained as one vmapped program when one run's training step
#: costs at most this many matmul FLOPs (about 1 ms at one core's matmul rate): below
#: it a step is bound by per-operation overhead, which batching shares; above it the
#: batched kernels of the transformer tasks are slower than the loop's
#: (benchmarks/bench_harness.py, docs/benchmarks.md)
CPU_BATCH_FLOPS = 1e8


#: per task (while it lives): matmul FLOPs of one example's step and of one evaluation
_FLOPS: weakref.WeakKeyDictionary[Task, dict[str, float]] = weakref.WeakKeyDictionary()


def _matmul_flops(fn) -> float:
    """FLOPs (2 per multiply-add) of the matrix products ``fn()`` dispatches: ``mm``,
    ``addmm``, ``bmm``, ``baddbmm`` (what ``nn.Linear`` and ``@`` become, forward and
    backward). A small dispatch mode: ``torch.utils.flop_counter`` counts the same
    products but imports the compiler stack, seconds on a small CPU."""
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    where = {aten.mm: (0, 1), aten.addmm: (1, 2), aten.bmm: (0, 1), aten.baddbmm: (1, 2)}

    class Count(TorchDispatchMode):
        flops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            pair = where.get(func.overloadpacket)
            if pair is not None:
                a, b = args[pair[0]].shape, args[pair[1]].shape
                batch = a[0] if len(a) == 3 else 1
                Count.flops += 2 * batch * a[-2] * a[-1] * b[-1]
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return float(Count.flops)


def step_matmul_flops(task: Task, batch_size: int) -> float:
    """Matmul FLOPs of one run's training step (forward and backward) at ``batch_size``:
    those of a batch of one (`_matmul_flops`) × ``batch_size``
    (the harness's models treat the examples of a batch independently)."""
    per_example = _FLOPS.setdefault(task, {})
    if "step" not in per_example:
        model = task.init_model(0)
        x, y = task.sample(task.generator(0, 1), 1)
        per_example["step"] = _matmul_flops(lambda: task.loss_fn(model(x), y).backward())
    return batch_size * per_example["step"]


def eval_matmul_flops(task: Task) -> float:
    """Matmul FLOPs of one evaluation of the task's evaluation set by one run."""
    counted = _FLOPS.setdefault(task, {})
    if "eval" not in counted:
        model = task.init_model(0)
        x, y = task.eval_data()
        with torch.no_grad():
            counted["eval"] = _matmul_flops(lambda: task.loss_fn(model(x), y))
    return counted["eval"]


def prefer_batched(task: Task, group: Sequence[Member]) -> bool:
    """Train ``group`` as one vmapped program (True) or run by run (False)?

    Off the CPU (CUDA): always batched, one program instead of many small ones. On the
    CPU: batched when one run's step costs at most `CPU_BATCH_FLOPS` matmul FLOPs
    (`step_matmul_flops`). A rule of the task's shapes only, never of timings or of the
    group's size, so a sweep's numbers do not depend on the machine's load, and a run
    is trained the same way whichever runs share its group (``--shard i/n``).
    """
    if task.device.type != "cpu":
        return True
    return step_matmul_flops(task, group[0].batch_size) <= CPU_BATCH_FLOPS


#: most examples (runs × batch size) in one vmapped program of a sweep when a batch size's
#: SGD and Adam runs share it; the full preset's largest single-optimizer program is
#: 14 runs × 4,096 windows = 57,344
GROUP_EXAMPLES = 2**16


def group_members(members: Iterable[Member], max_group: int | None = None) -> list[list[Member]]:
    """Members grouped by batch size, each group cut to at most ``max_group``.

    The SGD and the Adam runs of a batch size draw the same batches (a run's data come
    from its seed and batch size), so they form one group, trained as one program, when
    together they hold at most `GROUP_EXAMPLES` examples per step; otherwise each
    optimizer's runs form their own group. Within a group the runs keep their order.
    """
    by_size: dict[int, list[Member]] = {}
    for m in members:
        by_size.setdefault(m.batch_size, []).append(m)
    out = []
    for b in sorted(by_size):
        runs = by_size[b]
        if len(runs) * b <= GROUP_EXAMPLES:
            parts = [runs]
        else:
            parts = [[m for m in runs if m.optimizer == o]
                     for o in sorted({m.optimizer for m in runs})]
        for g in parts:
            size = len(g) if max_group is None else max_group
            out += [g[i : i + size] for i in range(0, len(g), size)]
    return out


def train_group(task: Task, group: Sequence[Member], budget: StepBudget, *,
                batched: bool | None = None, progress=None,
                cuda_graphs: bool | None = None) -> list[dict]:
    """Train one vmap group (one optimizer, one batch size) for its step budget:
    as one vmapped program (``batched=True``; ``cuda_graphs`` as in `train_batched`),
    run by run with ``torch.optim`` (``False``), or as `prefer_batched` decides (None)."""
    if not group:
        return []
    steps = budget.steps(group[0].batch_size)
    logged = log_steps(steps, budget.n_log)
    if batched is None:
        batched = prefer_batched(task, group)
    if batched:
        return train_batched(task, group, steps, logged, progress=progress,
                             cuda_graphs=cuda_graphs)
    rows: list[dict] = []
    for m in group:
        rows += train_plain(task, m, steps, logged)
        if progress is not None:
            progress.update(steps)
    return rows


def train_grid(
    task: Task,
    members: Sequence[Member],
    budget: StepBudget,
    *,
    batched: bool | None = None,
    max_group: int | None = None,
    progress: bool = False,
    cuda_graphs: bool | None = None,
) -> list[dict]:
    """Train every member, group by group (`group_members`, `train_group`): batched,
    one by one with ``batched=False``, or by `prefer_batched` (None, the default);
    ``cuda_graphs`` as in `train_batched`."""
    total = sum(budget.steps(m.batch_size) for m in members)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=f"{task.name}", unit="run-step", leave=False)
    rows: list[dict] = []
    try:
        for group in group_members(members, max_group):
            rows += train_group(task, group, budget, batched=batched, progress=bar,
                                cuda_graphs=cuda_graphs)
    finally:
        if bar is not None:
            bar.close()
    return rows
