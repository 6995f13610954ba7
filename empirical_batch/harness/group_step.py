"""One training step of a group of runs as a single vmapped program, and the loop that drives it.

A group is a set of runs (sweep members, or branches from checkpoints) that share an
optimizer and a batch size. Their parameters are stacked with
`torch.func.stack_module_state`; one step of all of them is one `torch.func.vmap`-ed
forward pass, one backward pass and a foreach update (`GroupStep`). On CUDA `run_group`
captures that step once in a CUDA graph and replays it, so its hundreds of small kernels
cost one launch. The runs are independent: a run that diverges does not touch the others.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap

from ..errors import InputError
from .tasks.base import Task

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8

#: the environment variable that turns the CUDA-graph capture of `run_group` off
#: ("0") or on ("1", the default); ``empirical-batch harness --no-cuda-graphs`` sets it
#: to "0", so that worker processes started by the command inherit it
CUDA_GRAPHS_ENV = "EMPIRICAL_BATCH_CUDA_GRAPHS"
#: eager steps on a side stream before a group's step is captured (PyTorch's CUDA-graph
#: notes: warm-up runs let lazy initialisation happen outside the capture)
GRAPH_WARMUP = 3


class Run(Protocol):
    """What a group needs of a run (`empirical_batch.harness.trainer.Member` has it)."""

    @property
    def optimizer(self) -> str: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def learning_rate(self) -> float: ...
    @property
    def seed(self) -> int: ...


#: a run's starting point: the model's state dict and the optimizer's (``{}``: fresh)
State = tuple[dict[str, torch.Tensor], dict[str, Any]]


def cuda_graphs_enabled() -> bool:
    """Whether `run_group` captures its step in a CUDA graph on CUDA (`CUDA_GRAPHS_ENV`)."""
    value = os.environ.get(CUDA_GRAPHS_ENV, "1")
    if value not in ("0", "1"):
        raise InputError(f"{CUDA_GRAPHS_ENV} must be 0 or 1, got {value!r}")
    return value == "1"


@contextlib.contextmanager
def cuda_graphs_setting(enabled: bool) -> Iterator[None]:
    """Within the block, `run_group` captures CUDA graphs (``True``) or not (``False``)."""
    old = os.environ.get(CUDA_GRAPHS_ENV)
    os.environ[CUDA_GRAPHS_ENV] = "1" if enabled else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[CUDA_GRAPHS_ENV]
        else:
            os.environ[CUDA_GRAPHS_ENV] = old


def use_graphs(task: Task, cuda_graphs: bool | None) -> bool:
    """Whether a group on ``task``'s device is captured: ``cuda_graphs`` (None:
    `cuda_graphs_enabled`) on CUDA, never elsewhere (``True`` off CUDA is an error)."""
    if cuda_graphs and task.device.type != "cuda":
        raise InputError(f"cuda_graphs=True needs a CUDA device; the task is on {task.device}")
    return task.device.type == "cuda" and (
        cuda_graphs_enabled() if cuda_graphs is None else bool(cuda_graphs))


def torch_optimizer(optimizer: str, params, lr: float) -> torch.optim.Optimizer:
    """The ``torch.optim`` optimizer of the plain loops, whose arithmetic `GroupStep`
    reproduces: SGD, or Adam with `ADAM_BETAS`, `ADAM_EPS` on its single-tensor path."""
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr)
    return torch.optim.Adam(params, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS, foreach=False)


def _adam_start(opt_state: dict, n_params: int) -> tuple[int, list | None]:
    """(steps taken, [(exp_avg, exp_avg_sq)] per parameter or None when fresh) of a
    ``torch.optim.Adam`` state dict (``{}`` or a state without entries: fresh)."""
    state = opt_state.get("state", {}) if opt_state else {}
    if not state:
        return 0, None
    if sorted(state) != list(range(n_params)):
        raise InputError(f"the Adam state has entries for parameters {sorted(state)}; the "
                         f"model has {n_params} parameters")
    steps = {int(float(s["step"])) for s in state.values()}
    if len(steps) != 1:
        raise InputError(f"the Adam state's parameters are at different steps: {sorted(steps)}")
    return steps.pop(), [(state[i]["exp_avg"], state[i]["exp_avg_sq"]) for i in range(n_params)]


class GroupStep:
    """One training step of a group on static tensors.

    The step is split in two: `load` (outside any graph) draws the step's batches with
    the runs' ``torch.Generator``\\ s (``task.generator(run.seed, batch_size)``), copies
    them into the static input buffers and writes Adam's bias corrections of each run's
    step ``t`` into static tensors; `update` (the part a CUDA graph captures) is the
    vmapped forward pass, the loss, the backward pass and the foreach optimizer update,
    reading only static tensors and updating the stacked parameters and optimizer state
    in place. Per run, with learning rate η, gradient g and step t = 1, 2, ...:

    - SGD: θ ← θ − η g;
    - Adam (β₁, β₂, ε = `ADAM_BETAS`, `ADAM_EPS`; Kingma & Ba 2015, in the arithmetic
      of ``torch.optim.Adam``'s single-tensor path): m ← β₁ m + (1 − β₁) g,
      v ← β₂ v + (1 − β₂) g², θ ← θ − (η / (1 − β₁ᵗ)) m / (√v / √(1 − β₂ᵗ) + ε).

    A group may hold SGD and Adam runs together (they share the batches of a seed): the
    forward and backward passes are one program for all of them, each update applies to
    its block of the stacked parameters. Internally the SGD runs come first: the
    attribute ``members`` lists the runs in that order, and ``order[j]`` is the index in
    the ``members`` argument of run ``j``; `evaluate`, `loss`, `member_model` and
    `member_state` use the internal order.

    Each run starts from the task's initialisation of its seed, or from ``start[i]`` (a
    model state dict and a ``torch.optim`` state dict: Adam continues its moments and
    step count, `member_state` writes the same format). With ``record_loss`` every
    `update` also keeps each run's training loss of the step in `loss`.
    """

    def __init__(self, task: Task, members: Sequence[Run], *,
                 start: Sequence[State] | None = None, record_loss: bool = False) -> None:
        self.task = task
        self.n = len(members)
        if start is not None and len(start) != self.n:
            raise InputError(f"start has {len(start)} states for {self.n} runs")
        self.order = sorted(range(self.n), key=lambda i: members[i].optimizer != "sgd")
        members = [members[i] for i in self.order]
        start = None if start is None else [start[i] for i in self.order]
        self.members = members
        self.n_sgd = sum(m.optimizer == "sgd" for m in members)
        self.batch_size = members[0].batch_size
        self.record_loss = record_loss
        seeds = sorted({m.seed for m in members})
        if start is None:
            by_seed = {s: task.init_model(s) for s in seeds}
            models = [by_seed[m.seed] for m in members]
        else:
            models = []
            for weights, _ in start:
                model = task.init_model(0)
                model.load_state_dict(weights)
                models.append(model)
        params, self.buffers = stack_module_state(models)
        self.params = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        self.names = list(self.params)
        self.plist = [self.params[k] for k in self.names]
        self.base = copy.deepcopy(models[0]).to("meta")

        def loss_one(p, b, x, y):
            return task.loss_fn(functional_call(self.base, (p, b), (x,)), y)

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
        ns = self.n_sgd
        # the SGD block (runs [:ns]) and the Adam block ([ns:]): views of the stacked
        # parameters (updated in place) and of the rates; the whole tensors for one block
        self.sgd_params = self._block(self.plist, 0, ns)
        self.adam_params = self._block(self.plist, ns, self.n)
        self.sgd_lrs = [self._per_run(lr[:ns], p) for p in self.plist]
        self.adam_lrs = [self._per_run(lr[ns:], p) for p in self.plist]
        self.loss = torch.zeros(self.n, device=task.device, dtype=task.dtype)
        self.t0 = np.zeros(self.n, dtype=np.int64)  # optimizer steps taken before this group
        self.x: torch.Tensor | None = None  # the static input buffers, made by the first load
        self.y: torch.Tensor | None = None
        if ns < self.n:
            self._init_adam(start)

    def _block(self, tensors: list[torch.Tensor], lo: int, hi: int) -> list[torch.Tensor]:
        """Runs ``lo:hi`` of each stacked tensor (the tensors themselves for all runs)."""
        if lo == 0 and hi == self.n:
            return tensors
        return [t[lo:hi] for t in tensors]

    @staticmethod
    def _per_run(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """A view of per-run ``values`` that broadcasts against a stacked parameter."""
        return values.reshape(-1, *([1] * (like.dim() - 1)))

    def _init_adam(self, start: Sequence[State] | None) -> None:
        """Moments, start steps and bias-correction tensors of the Adam block."""
        ns = self.n_sgd
        self.exp_avg = [torch.zeros_like(p) for p in self.adam_params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.adam_params]
        for i, (_, opt_state) in enumerate(start or ()):
            if i < ns:
                continue
            self.t0[i], moments = _adam_start(opt_state, len(self.plist))
            for k, (m1, m2) in enumerate(moments or ()):
                self.exp_avg[k][i - ns].copy_(m1)
                self.exp_avg_sq[k][i - ns].copy_(m2)
        dev, dtype = self.task.device, self.task.dtype
        self.bc1 = torch.ones(self.n - ns, device=dev, dtype=dtype)
        self.bc2_sqrt = torch.ones(self.n - ns, device=dev, dtype=dtype)
        self.bc1_views = [self._per_run(self.bc1, p) for p in self.plist]
        self.bc2_views = [self._per_run(self.bc2_sqrt, p) for p in self.plist]

    def _draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        batches = [self.task.sample(g, self.batch_size) for g in self.gens]
        if self.one_seed:
            return batches[0]
        return (torch.stack([b[0] for b in batches])[self.where],
                torch.stack([b[1] for b in batches])[self.where])

    def load(self, step: int) -> None:
        """The batches and bias corrections of this group's update ``step + 1`` into the
        static tensors."""
        x, y = self._draw()
        if self.x is None or self.y is None:
            self.x, self.y = x.clone(), y.clone()
        else:
            self.x.copy_(x)
            self.y.copy_(y)
        if self.n_sgd < self.n:
            t = self.t0[self.n_sgd:] + step + 1
            b1, b2 = ADAM_BETAS
            if np.all(t == t[0]):
                self.bc1.fill_(1 - b1 ** int(t[0]))
                self.bc2_sqrt.fill_(math.sqrt(1 - b2 ** int(t[0])))
            else:
                self.bc1.copy_(torch.tensor([1 - b1 ** int(s) for s in t]))
                self.bc2_sqrt.copy_(torch.tensor([math.sqrt(1 - b2 ** int(s)) for s in t]))

    def update(self) -> None:
        """Forward, loss, backward and the optimizer update, on the static tensors only."""
        losses = self.loss_all(self.params, self.buffers, self.x, self.y)
        if self.record_loss:
            self.loss.copy_(losses.detach())
        grads = list(torch.autograd.grad(losses.sum(), self.plist))
        ns = self.n_sgd
        with torch.no_grad():
            if ns:
                g = self._block(grads, 0, ns)
                torch._foreach_sub_(self.sgd_params, torch._foreach_mul(g, self.sgd_lrs))
            if ns == self.n:
                return
            grads = self._block(grads, ns, self.n)
            b1, b2 = ADAM_BETAS
            m1, m2 = self.exp_avg, self.exp_avg_sq
            torch._foreach_lerp_(m1, grads, 1 - b1)
            torch._foreach_mul_(m2, b2)
            torch._foreach_addcmul_(m2, grads, grads, value=1 - b2)
            denom = torch._foreach_sqrt(m2)
            torch._foreach_div_(denom, self.bc2_views)
            torch._foreach_add_(denom, ADAM_EPS)
            update = torch._foreach_mul(torch._foreach_div(self.adam_lrs, self.bc1_views), m1)
            torch._foreach_div_(update, denom)
            torch._foreach_sub_(self.adam_params, update)

    def evaluate(self, loop: bool) -> torch.Tensor:
        """Every run's evaluation loss (on the device), vmapped or run by run."""
        x_ev, y_ev = self.task.eval_data()
        with torch.no_grad():
            if not loop:
                return self.eval_all(self.params, self.buffers, x_ev, y_ev).detach()
            return torch.stack([
                self.loss_one({k: v[i] for k, v in self.params.items()},
                              {k: v[i] for k, v in self.buffers.items()}, x_ev, y_ev)
                for i in range(self.n)])

    def member_model(self, i: int) -> torch.nn.Module:
        """A fresh model holding run ``i``'s current weights (on the task's device)."""
        model = self.task.init_model(0)
        with torch.no_grad():
            model.load_state_dict({**{k: v[i] for k, v in self.params.items()},
                                   **{k: v[i] for k, v in self.buffers.items()}})
        return model

    def member_state(self, i: int, steps_done: int) -> State:
        """Run ``i``'s weights (on the CPU) and its ``torch.optim`` state dict after
        ``steps_done`` updates of this group: the format ``start`` takes, and what
        ``torch.optim.SGD``/``Adam`` over the model's parameters would hold."""
        model = self.member_model(i)
        weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        opt = torch_optimizer(self.members[i].optimizer, model.parameters(),
                              float(self.members[i].learning_rate))
        if i >= self.n_sgd:
            t = int(self.t0[i]) + steps_done
            if t > 0:
                for k, p in enumerate(model.parameters()):
                    opt.state[p] = {"step": torch.tensor(float(t)),
                                    "exp_avg": self.exp_avg[k][i - self.n_sgd].detach().clone(),
                                    "exp_avg_sq":
                                        self.exp_avg_sq[k][i - self.n_sgd].detach().clone()}
        return weights, copy.deepcopy(opt.state_dict())


def run_group(group: GroupStep, steps: int, *, graphed: bool,
              before_step: Callable[[int], None] | None = None,
              progress=None) -> torch.Tensor | None:
    """Take ``steps`` updates of ``group``; ``before_step(k)`` is called before update
    ``k + 1`` and once more after the last (``k = steps``), outside any graph.

    With ``graphed`` (CUDA) the update runs eagerly for `GRAPH_WARMUP` steps on a side
    stream, is captured once with ``torch.cuda.graph`` and replayed for every later step
    (the same kernels on the same buffers, without the per-operation launch cost).
    Returns the runs' training losses, ``(steps, runs)`` on the device, when the group
    records them (``record_loss``), else None.
    """
    dev = group.task.device
    graph = None
    # warm-up and capture on one side stream (PyTorch's CUDA-graph notes: lazily created
    # per-stream state, such as cuBLAS workspaces, must exist before the capture)
    side = torch.cuda.Stream(dev) if graphed else None
    losses: list[torch.Tensor] = []  # kept on the device, copied once by the caller
    for step in range(steps + 1):
        if before_step is not None:
            before_step(step)
        if step == steps:
            break
        group.load(step)  # outside any graph: the generators draw eagerly
        if graph is not None:
            graph.replay()
        elif side is not None and step >= GRAPH_WARMUP:
            graph = torch.cuda.CUDAGraph()
            torch.cuda.synchronize(dev)
            with torch.cuda.graph(graph, stream=side):
                group.update()  # recorded, not run
            graph.replay()
        elif side is not None:  # an eager warm-up step on the capture's stream
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                group.update()
            torch.cuda.current_stream(dev).wait_stream(side)
        else:
            group.update()
        if group.record_loss:
            losses.append(group.loss.clone())
        if progress is not None:
            progress.update(group.n)
    if not group.record_loss:
        return None
    if not losses:
        return torch.zeros(0, group.n, device=dev, dtype=group.task.dtype)
    return torch.stack(losses)
