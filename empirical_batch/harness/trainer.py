"""Training a grid of runs (batch sizes × learning rates × seeds) as one batched program.

Each run (a `Member`) is plain SGD or Adam on a task's model from the
initialisation of its seed, on the data stream of ``(seed, batch_size)`` (so runs
that differ only in learning rate or optimizer see the same batches: common random
numbers). Runs that share a batch size and an optimizer are trained together: their
parameters are stacked with `torch.func.stack_module_state` and one step of all
of them is a single `torch.func.vmap`-ed forward pass, one backward pass and a
batched update, so a GPU sees one large program instead of many tiny ones; on CUDA
that step (`GroupStep`) is captured once in a CUDA graph and replayed, so its hundreds
of small kernels cost one launch.
`train_plain` is the reference: one ``nn.Module`` and ``torch.optim`` optimizer
per run, step by step; the tests hold the batched program to it.

The evaluation loss is recorded after ``k`` updates for every ``k`` in the run's
log-spaced logging steps (`log_steps`), in the sweep schema (docs/design.md).
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap

from .._numeric import log_steps
from ..errors import InputError
from .tasks.base import Task

OPTIMIZERS = ("sgd", "adam")
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


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
    opt: torch.optim.Optimizer
    if member.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=member.learning_rate)
    else:
        opt = torch.optim.Adam(
            model.parameters(), lr=member.learning_rate, betas=ADAM_BETAS, eps=ADAM_EPS,
            foreach=False,
        )
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


# ----------------------------------------------------------------------------- batched
#: the environment variable that turns the CUDA-graph capture of `train_batched` off
#: ("0") or on ("1", the default); ``empirical-batch harness --no-cuda-graphs`` sets it
#: to "0", so that worker processes started by the command inherit it
CUDA_GRAPHS_ENV = "EMPIRICAL_BATCH_CUDA_GRAPHS"
#: eager steps on a side stream before a group's step is captured (PyTorch's CUDA-graph
#: notes: warm-up runs let lazy initialisation happen outside the capture)
GRAPH_WARMUP = 3


def cuda_graphs_enabled() -> bool:
    """Whether `train_batched` captures its step in a CUDA graph on CUDA (`CUDA_GRAPHS_ENV`)."""
    value = os.environ.get(CUDA_GRAPHS_ENV, "1")
    if value not in ("0", "1"):
        raise InputError(f"{CUDA_GRAPHS_ENV} must be 0 or 1, got {value!r}")
    return value == "1"


@contextlib.contextmanager
def cuda_graphs_setting(enabled: bool) -> Iterator[None]:
    """Within the block, `train_batched` captures CUDA graphs (``True``) or not (``False``)."""
    old = os.environ.get(CUDA_GRAPHS_ENV)
    os.environ[CUDA_GRAPHS_ENV] = "1" if enabled else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[CUDA_GRAPHS_ENV]
        else:
            os.environ[CUDA_GRAPHS_ENV] = old


class GroupStep:
    """One training step of a vmap group on static tensors.

    The step is split in two: `load` (outside any graph) draws the step's batches with
    the runs' ``torch.Generator``\\ s, copies them into the static input buffers and
    writes Adam's bias corrections for step ``t`` into static scalars; `update` (the
    part a CUDA graph captures) is the vmapped forward pass, the loss, the backward
    pass and the foreach optimizer update, reading only static tensors and updating the
    stacked parameters and optimizer state in place. Per member, with learning rate η,
    gradient g and step t = 1, 2, ...:

    - SGD: θ ← θ − η g;
    - Adam (β₁, β₂, ε = `ADAM_BETAS`, `ADAM_EPS`; Kingma & Ba 2015, in the arithmetic
      of ``torch.optim.Adam``'s single-tensor path): m ← β₁ m + (1 − β₁) g,
      v ← β₂ v + (1 − β₂) g², θ ← θ − (η / (1 − β₁ᵗ)) m / (√v / √(1 − β₂ᵗ) + ε).

    On the CPU ``load(t); update()`` is run as it is; on CUDA `train_batched` runs it
    eagerly for `GRAPH_WARMUP` steps on a side stream, captures ``update`` once with
    ``torch.cuda.graph`` and replays it for every later step.
    """

    def __init__(self, task: Task, members: Sequence[Member]) -> None:
        self.task = task
        self.n = len(members)
        self.optimizer = members[0].optimizer
        self.batch_size = members[0].batch_size
        seeds = sorted({m.seed for m in members})
        models = {s: task.init_model(s) for s in seeds}
        params, self.buffers = stack_module_state([models[m.seed] for m in members])
        self.params = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        self.names = list(self.params)
        self.plist = [self.params[k] for k in self.names]
        base = copy.deepcopy(models[seeds[0]]).to("meta")

        def loss_one(p, b, x, y):
            return task.loss_fn(functional_call(base, (p, b), (x,)), y)

        self.loss_one = loss_one
        self.one_seed = len(seeds) == 1
        # Members are independent, so the gradient of the *sum* of their losses with
        # respect to the stacked parameters is each member's own gradient, exactly: one
        # vmapped forward and one ordinary backward replace a vmap of torch.func.grad.
        self.loss_all = vmap(loss_one, in_dims=(0, 0, None, None) if self.one_seed
                             else (0, 0, 0, 0))
        self.eval_all = vmap(loss_one, in_dims=(0, 0, None, None))
        self.where = torch.tensor([seeds.index(m.seed) for m in members], device=task.device)
        self.gens = [task.generator(s, self.batch_size) for s in seeds]
        lr = torch.tensor([m.learning_rate for m in members], device=task.device,
                          dtype=task.dtype)
        self.lrs = [lr.reshape(-1, *([1] * (p.dim() - 1))) for p in self.plist]
        if self.optimizer == "adam":
            self.exp_avg = [torch.zeros_like(p) for p in self.plist]
            self.exp_avg_sq = [torch.zeros_like(p) for p in self.plist]
            self.bc1 = torch.ones((), device=task.device, dtype=task.dtype)
            self.bc2_sqrt = torch.ones((), device=task.device, dtype=task.dtype)
        self.x: torch.Tensor | None = None  # the static input buffers, made by the first load
        self.y: torch.Tensor | None = None

    def _draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        batches = [self.task.sample(g, self.batch_size) for g in self.gens]
        if self.one_seed:
            return batches[0]
        return (torch.stack([b[0] for b in batches])[self.where],
                torch.stack([b[1] for b in batches])[self.where])

    def load(self, step: int) -> None:
        """The batches and bias corrections of update ``step + 1`` into the static tensors."""
        x, y = self._draw()
        if self.x is None or self.y is None:
            self.x, self.y = x.clone(), y.clone()
        else:
            self.x.copy_(x)
            self.y.copy_(y)
        if self.optimizer == "adam":
            t = step + 1
            self.bc1.fill_(1 - ADAM_BETAS[0] ** t)
            self.bc2_sqrt.fill_(math.sqrt(1 - ADAM_BETAS[1] ** t))

    def update(self) -> None:
        """Forward, loss, backward and the optimizer update, on the static tensors only."""
        total = self.loss_all(self.params, self.buffers, self.x, self.y).sum()
        grads = list(torch.autograd.grad(total, self.plist))
        with torch.no_grad():
            if self.optimizer == "sgd":
                torch._foreach_sub_(self.plist, torch._foreach_mul(grads, self.lrs))
                return
            b1, b2 = ADAM_BETAS
            m1, m2 = self.exp_avg, self.exp_avg_sq
            torch._foreach_lerp_(m1, grads, 1 - b1)
            torch._foreach_mul_(m2, b2)
            torch._foreach_addcmul_(m2, grads, grads, value=1 - b2)
            denom = torch._foreach_sqrt(m2)
            torch._foreach_div_(denom, self.bc2_sqrt)
            torch._foreach_add_(denom, ADAM_EPS)
            update = torch._foreach_mul(torch._foreach_div(self.lrs, self.bc1), m1)
            torch._foreach_div_(update, denom)
            torch._foreach_sub_(self.plist, update)

    def evaluate(self, loop: bool) -> torch.Tensor:
        """Every member's evaluation loss (on the device), vmapped or member by member."""
        x_ev, y_ev = self.task.eval_data()
        with torch.no_grad():
            if not loop:
                return self.eval_all(self.params, self.buffers, x_ev, y_ev).detach()
            return torch.stack([
                self.loss_one({k: v[i] for k, v in self.params.items()},
                              {k: v[i] for k, v in self.buffers.items()}, x_ev, y_ev)
                for i in range(self.n)])


def train_batched(
    task: Task, members: Sequence[Member], steps: int, logged: Iterable[int], *, progress=None,
    cuda_graphs: bool | None = None,
) -> list[dict]:
    """Train ``members`` (one optimizer, one batch size) together as one vmapped program.

    Numerically the same computation as `train_plain` for each member (same
    initialisation, same batches, same update formulas), up to floating-point
    summation order. Each step is `GroupStep`'s; on CUDA, with ``cuda_graphs`` (None:
    `cuda_graphs_enabled`, on unless turned off), its update is captured in a CUDA graph
    after `GRAPH_WARMUP` eager steps and replayed (the same kernels on the same
    buffers, without the per-operation launch cost). ``cuda_graphs=True`` off CUDA is
    an `InputError`.
    """
    if not members:
        return []
    opts = {m.optimizer for m in members}
    sizes = {m.batch_size for m in members}
    if len(opts) != 1 or len(sizes) != 1:
        raise InputError(
            f"train_batched needs one optimizer and one batch size, got {sorted(opts)} and "
            f"{sorted(sizes)}; use train_grid to group a mixed grid"
        )
    if cuda_graphs and task.device.type != "cuda":
        raise InputError(f"cuda_graphs=True needs a CUDA device; the task is on {task.device}")
    graphed = task.device.type == "cuda" and (
        cuda_graphs_enabled() if cuda_graphs is None else cuda_graphs)
    logged = set(int(s) for s in logged)
    group = GroupStep(task, members)
    # on the CPU a large evaluation runs member by member (the vmapped forward of the
    # transformer tasks costs about twice the loop there); elsewhere in one program
    eval_loop = (task.device.type == "cpu"
                 and len(members) * eval_matmul_flops(task) > CPU_BATCH_FLOPS)
    graph = None
    # warm-up and capture on one side stream (PyTorch's CUDA-graph notes: lazily created
    # per-stream state, such as cuBLAS workspaces, must exist before the capture)
    side = torch.cuda.Stream(task.device) if graphed else None
    logs: list[tuple[int, torch.Tensor]] = []  # kept on the device, copied once at the end
    for step in range(steps + 1):
        if step in logged:
            logs.append((step, group.evaluate(eval_loop)))
        if step == steps:
            break
        group.load(step)  # outside any graph: the generators draw eagerly
        if graph is not None:
            graph.replay()
        elif side is not None and step >= GRAPH_WARMUP:
            graph = torch.cuda.CUDAGraph()
            torch.cuda.synchronize(task.device)
            with torch.cuda.graph(graph, stream=side):
                group.update()  # recorded, not run
            graph.replay()
        elif side is not None:  # an eager warm-up step on the capture's stream
            side.wait_stream(torch.cuda.current_stream(task.device))
            with torch.cuda.stream(side):
                group.update()
            torch.cuda.current_stream(task.device).wait_stream(side)
        else:
            group.update()
        if progress is not None:
            progress.update(len(members))
    if not logs:
        return []
    table = torch.stack([v for _, v in logs]).cpu().tolist()  # one copy per group
    return [_row(task, m, step, loss)
            for (step, _), losses in zip(logs, table, strict=True)
            for m, loss in zip(members, losses, strict=True)]


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


def group_members(members: Iterable[Member], max_group: int | None = None) -> list[list[Member]]:
    """Members grouped by (optimizer, batch size), each group cut to at most ``max_group``."""
    groups: dict[tuple[str, int], list[Member]] = {}
    for m in members:
        groups.setdefault((m.optimizer, m.batch_size), []).append(m)
    out = []
    for key in sorted(groups):
        g = groups[key]
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
