r"""Gradient noise scale from the micro-batches of gradient accumulation.

With gradient accumulation each optimizer step already sees ``k`` micro-batch
gradients $g_1..g_k$ of ``b`` examples and their accumulated mean
$\bar g$ (a batch of ``k b``). A tensor hook on every parameter receives each
backward pass's gradient *before* it is added to ``.grad``, i.e. exactly that
micro-batch's contribution; the hooks only keep a reference to it (no kernel), and
at the end of the backward pass (a callback queued on autograd's execution engine)
one ``torch._foreach_norm`` over all of them gives $|g_j|^2$: a fixed number of
kernels per micro-batch, however many parameter tensors the model has, each gradient
read once. (On the first pass of a step, when ``.grad`` is ``None``, autograd moves the
incoming gradient into ``.grad`` without copying it, so that is where it is read, so
the reference does not force a copy.) At the end of the ``k``-th pass the same callback
takes the norm of ``.grad``, so $|\bar g|^2$ is the value after the last backward
pass. Nothing is read from ``.grad`` at `step`: clipping, ``GradScaler.unscale_`` or
zeroing the gradients before it does not change the result. The sums stay on the
device until the estimate is read (``sync_every``), so a step issues no host sync.
The pair

$$
|G_{small}|^2 = \frac1k\sum_{j=1}^k |g_j|^2\ (b_{small} = b),\qquad
|G_{big}|^2 = |\bar g|^2\ (b_{big} = k b)
$$

feeds the two-batch estimator (McCandlish et al. 2018, App. A.1).

**Unequal micro-batches.** In general micro-batch $j$ holds $n_j$ examples (or
tokens) with mean gradient $g_j$, $E|g_j|^2 = |G|^2 + \operatorname{tr}\Sigma/n_j$,
and enters ``.grad`` with a known weight $c_j$: $1/k$ for the usual accumulation,
$n_j/N$ when each micro-batch loss is a sum over its tokens divided by the $N$ tokens
of the whole accumulated batch (Hugging Face ``transformers`` >= 4.46 with
``num_items_in_batch``; with padding the $n_j$ differ). The hooks see $c_j g_j$, so
with $a = \sum_j c_j^2$, $s = \sum_j c_j^2/n_j$ and $C = (\sum_j c_j)^2$ (independent
micro-batches)

$$
E\sum_j |c_j g_j|^2 = a|G|^2 + s\operatorname{tr}\Sigma,\qquad
E\Big|\sum_j c_j g_j\Big|^2 = C|G|^2 + s\operatorname{tr}\Sigma,
$$

i.e. the pair $|G_{small}|^2 = \sum_j|c_j g_j|^2/a$ at $b_{small} = a/s$ and
$|G_{big}|^2 = |\sum_j c_j g_j|^2/C$ at $b_{big} = C/s$ satisfies
$E|G_b|^2 = |G|^2 + \operatorname{tr}\Sigma/b$, and the two-batch estimates stay
unbiased ($a < C$ whenever $k \ge 2$). Equal weights give the harmonic mean
$b_{small} = k/\sum_j n_j^{-1}$ and $b_{big} = k\,b_{small}$; the token weights
$c_j = n_j/N$ give $b_{small} = \sum_j n_j^2/N$ and $b_{big} = N$. The sizes are
in the unit the $n_j$ count (tokens for a token-normalised loss).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .._validate import as_scalar
from ..errors import EmpiricalBatchWarning, InputError, UsageError, warn
from ..estimators import GNSEstimator
from ._common import (
    FULL_DTYPES,
    EstimatorMixin,
    acc_dtype,
    check_batch_size,
    graph_task_id,
    resolve_scale,
    select_params,
    total_sq_norm,
)

__all__ = ["GradientNoiseScale"]

_task_id = getattr(torch._C, "_current_graph_task_id", None) or graph_task_id
_queue_callback = torch.autograd.Variable._execution_engine.queue_callback

_CONVENTIONS = ("mean/k", "mean")


class GradientNoiseScale(EstimatorMixin):
    r"""Track $B_{simple}$ in a training loop with gradient accumulation.

    Parameters
    ----------
    model : nn.Module
        The model being trained (hooks are placed on its parameters).
    micro_batch_size : int
        Examples per micro-batch ``b`` (per backward pass).
    accumulation_steps : int
        Backward passes per optimizer step ``k >= 2`` (with ``k = 1`` there is only
        one batch size: use `PerExampleNoiseScale`
        or `DDPNoiseScaleHook` instead).
    beta : float
        EMA decay of `GNSEstimator`.
    params : iterable of parameters or names, optional
        Measure the gradient of these parameters only (default: all trainable).
    loss_convention : {"mean/k", "mean"}
        How each micro-batch loss is formed. ``"mean/k"`` (default, the usual
        accumulation): the mean over the micro-batch divided by ``k``, so ``.grad``
        ends as the mean gradient over ``k b`` examples. ``"mean"``: the plain
        micro-batch mean (``.grad`` is the sum of the ``k`` micro-batch means).
        The squared norms are rescaled accordingly.
    scaler : torch.amp.GradScaler, optional
        Mixed precision: the squared norms are divided by ``scale²``. Call
        `step` *before* ``scaler.unscale_``/``scaler.step`` (``.grad`` still
        scaled). Steps with inf/NaN norms are skipped and counted.
    optimizer : torch.optim.Optimizer, optional
        Needed for ``preconditioned=True``.
    preconditioned : bool
        Measure the noise scale of the Adam-preconditioned gradient
        $g/(\sqrt{\hat v}+\epsilon)$, with $\hat v$ the bias-corrected
        second moment in ``optimizer``'s state *before* this step's update. Steps
        before the optimizer has any state are skipped (counted as
        ``skipped["no_optimizer_state"]``).
    max_history : int, optional
        Keep the per-step rows of the last ``max_history`` steps only (a ring buffer;
        default: all). The averages use every step either way.

    Notes
    -----
    Call `step` once per optimizer step, after the ``k`` backward passes (where
    exactly does not matter: before or after clipping, unscaling or zeroing). A step
    with a single backward pass (the remainder at an epoch's end) or with a number of
    backward passes other than ``accumulation_steps`` is skipped and counted in
    ``skipped`` (a mismatch also warns once: the ``"mean/k"`` scaling would be wrong).
    Examples must be drawn independently (the estimator's assumption); the
    micro-batches of one step may share nothing but the parameters. A ragged step
    passes ``step(micro_batch_size=...)``: one size for all its micro-batches, or one
    per backward pass, and, when its micro-batches enter ``.grad`` with unequal
    factors (a loss normalised by the tokens of the whole accumulated batch),
    ``weights=`` (see the module notes for the unbiased estimator this feeds).

    Every backward pass (or ``torch.autograd.grad`` call) that reaches the tracked
    parameters between two `step` calls counts as a micro-batch: run other
    gradient computations (penalties, probes) on other parameters, under
    `remove`, or before the first micro-batch's hooks matter.

    Single process only: under DDP the hooks see local gradients while ``.grad``
    holds the all-reduced one; use `DDPNoiseScaleHook`.
    Cost: one extra read of each micro-batch gradient and of ``.grad`` after the
    ``k``-th pass, as one ``torch._foreach_norm`` per backward pass and gradient dtype
    (in the gradient's dtype, float32 for fp16/bf16) plus a few scalar kernels: the
    number of kernels does not grow with the number of parameter tensors. The squares
    are summed over parameters and micro-batches in float64, on the device; with
    ``sync_every > 1`` a step issues no host sync (a ``GradScaler``'s scale is read on
    the host, though). Holding each micro-batch gradient until the end of its backward
    pass keeps it alive that long (at most one gradient's size). A short ragged step
    (fewer passes than ``accumulation_steps``) reads ``.grad`` at `step`. See
    ``benchmarks/bench_measure.py``.

    Examples
    --------
    >>> import torch
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> model = torch.nn.Linear(3, 1)
    >>> gns = GradientNoiseScale(model, micro_batch_size=4, accumulation_steps=2, beta=0.9)
    >>> for _ in range(5):
    ...     for _ in range(2):
    ...         x, y = torch.randn(4, 3), torch.randn(4, 1)
    ...         (torch.nn.functional.mse_loss(model(x), y) / 2).backward()
    ...     _ = gns.step()
    ...     model.zero_grad()
    >>> gns.estimator.steps
    5
    """

    def __init__(
        self,
        model: nn.Module,
        micro_batch_size: int,
        accumulation_steps: int,
        *,
        beta: float = 0.99,
        params=None,
        loss_convention: str = "mean/k",
        scaler=None,
        optimizer: torch.optim.Optimizer | None = None,
        preconditioned: bool = False,
        max_history: int | None = None,
        sync_every: int = 1,
    ):
        self.micro_batch_size = check_batch_size(micro_batch_size, "micro_batch_size")
        k = check_batch_size(accumulation_steps, "accumulation_steps")
        if k < 2:
            raise InputError(
                "accumulation_steps must be >= 2: with one backward pass per step there "
                "is only one batch size; use PerExampleNoiseScale or DDPNoiseScaleHook"
            )
        self.accumulation_steps = k
        if loss_convention not in _CONVENTIONS:
            raise InputError(f"loss_convention must be one of {_CONVENTIONS}, got "
                             f"{loss_convention!r}")
        self.loss_convention = loss_convention
        self.params = select_params(model, params)
        self.scaler = scaler
        self.preconditioned = bool(preconditioned)
        if self.preconditioned:
            if optimizer is None or not isinstance(optimizer, torch.optim.Optimizer):
                raise InputError("preconditioned=True needs optimizer= (an Adam-like "
                                "torch.optim.Optimizer with exp_avg_sq state)")
            self._groups = {id(p): g for g in optimizer.param_groups for p in g["params"]}
            missing = [n for n, p in self.params if id(p) not in self._groups]
            if missing:
                raise InputError(f"parameters not in the optimizer: {missing[:3]}")
        self.optimizer = optimizer
        self._estimator = GNSEstimator(beta, max_history=max_history)
        self._init_sync(sync_every)
        self.skipped = {"non_finite": 0, "no_optimizer_state": 0, "single_backward": 0,
                        "accumulation_mismatch": 0}
        self._micro: list[torch.Tensor] = []  # Σ_p |g_{j,p}|² of pass j (0-d, device)
        # built once: the tracked parameters, and whether they share one device and dtype
        # (then the norms need no grouping, the usual case)
        self._plist = [p for _, p in self.params]
        self._uniform = len({(p.device, p.dtype) for p in self._plist}) == 1
        self._count = [0] * len(self._plist)  # backward passes that reached each parameter
        self._n = 0  # max of _count: the current pass
        # per backward pass (autograd graph task): [(index, grad or None = read .grad)]
        self._pending_grads: dict[int, list[tuple[int, torch.Tensor | None]]] = {}
        self._task = -1  # the task the last hook ran in, and its list
        self._items: list[tuple[int, torch.Tensor | None]] = []
        self._big: torch.Tensor | None = None  # |.grad|² after the k-th (or later) pass
        self._denoms: dict[int, torch.Tensor] = {}  # preconditioner, once per step
        self._not_accumulated = False
        self._no_state = False
        self._warned = False
        self._handles = [p.register_hook(self._make_hook(i, p))
                         for i, p in enumerate(self._plist)]

    def __repr__(self) -> str:
        n = sum(p.numel() for _, p in self.params)
        what = "preconditioned gradient" if self.preconditioned else "gradient"
        return (f"GradientNoiseScale({what} of {len(self.params)} parameter tensors "
                f"({n:,} elements), micro-batches of {self.micro_batch_size} x "
                f"{self.accumulation_steps} per step, {self._state_text()})")

    # ----------------------------------------------------------------- hooks
    def _make_hook(self, i, p):
        count, gid = self._count, _task_id

        def hook(grad):
            # once per parameter per backward: a few bytecodes, no kernel; the norms are
            # taken for all parameters together at the end of the pass
            if gid() != self._task:
                self._enter_task()
            c = count[i] = count[i] + 1
            if c > self._n:
                self._n = c
            # with .grad None, autograd moves `grad` into .grad unless another reference
            # holds it (then it copies): read it from there at the end of the pass
            self._items.append((i, grad if p.grad is not None else None))

        return hook

    def _enter_task(self) -> None:
        """The first hook of a backward pass (autograd graph task), or the return to one
        after a nested pass (reentrant checkpointing): its list of gradients, and one
        end-of-pass callback per pass."""
        task = self._task = _task_id()
        items = self._pending_grads.get(task)
        if items is None:
            items = self._pending_grads[task] = []
            _queue_callback(lambda: self._end_of_pass(task))
        self._items = items

    @torch.no_grad()
    def _end_of_pass(self, task: int) -> None:
        """End of a backward pass: this micro-batch's squared norm in one fused norm
        (and, from the k-th pass on, that of ``.grad``)."""
        items = self._pending_grads.pop(task, [])
        if task == self._task:
            self._task = -1
        if not items:
            return
        plist = self._plist
        if self.preconditioned:
            grads = [(plist[i], plist[i].grad if g is None else g) for i, g in items]
            if any(g is None for _, g in grads):  # torch.autograd.grad: nothing in .grad
                self._not_accumulated = True
                grads = [(p, g) for p, g in grads if g is not None]
            sq = self._sq_norm(grads) if grads else None
        else:
            got = [plist[i].grad if g is None else g for i, g in items]
            gs = [g for g in got if g is not None]  # (`None in got` calls Tensor.__eq__)
            if len(gs) < len(got):  # torch.autograd.grad: nothing reached .grad
                self._not_accumulated = True
            sq = self._total(gs) if gs else None
        if sq is None:
            return
        j = self._n - 1
        if j < len(self._micro):  # reentrant backward (checkpointing): same pass
            self._micro[j] = self._micro[j] + sq
        else:
            while len(self._micro) < j:
                self._micro.append(torch.zeros_like(sq))
            self._micro.append(sq)
        if self._n >= self.accumulation_steps:
            self._big = self._grad_sq_norm()

    def _total(self, gs: list[torch.Tensor]) -> torch.Tensor:
        """Σ |g|² of gradients of the tracked parameters: one ``_foreach_norm``, its
        squares summed in float64 (`total_sq_norm`, without its per-tensor grouping
        when every parameter has one device and dtype)."""
        if not self._uniform:
            return total_sq_norm(gs)
        dtype = gs[0].dtype
        kw = {} if dtype in FULL_DTYPES else {"dtype": torch.float32}
        norms = torch._foreach_norm(gs, 2, **kw)
        return torch.stack(norms).to(acc_dtype(gs[0].device)).square().sum()

    def _sq_norm(self, grads) -> torch.Tensor | None:
        """Σ |g|² over ``(param, grad)`` pairs: one ``_foreach_norm`` per dtype, summed
        in float64 (divided by the Adam denominator first when preconditioned)."""
        if not self.preconditioned:
            return self._total([g for _, g in grads])
        gs = [g.detach() for _, g in grads]
        denoms = []
        for p, _ in grads:
            d = self._denoms.get(id(p))
            if d is None:
                d = self._denominator(p)
                if d is None:
                    self._no_state = True
                    return None
                self._denoms[id(p)] = d
            denoms.append(d)
        return total_sq_norm(list(torch._foreach_div(gs, denoms)))

    def _grad_sq_norm(self) -> torch.Tensor | None:
        """|.grad|² over the tracked parameters (``None`` if none has a gradient)."""
        if self.preconditioned:
            grads = [(p, p.grad) for p in self._plist if p.grad is not None]
            return self._sq_norm(grads) if grads else None
        gs = [g for g in [p.grad for p in self._plist] if g is not None]
        return self._total(gs) if gs else None

    def _denominator(self, p):
        if self.optimizer is None:
            return None
        state = self.optimizer.state.get(p)
        if not state or "exp_avg_sq" not in state:
            return None
        group = self._groups[id(p)]
        beta2 = group["betas"][1]
        t = state["step"]  # a tensor (on the device for capturable/fused Adam): no sync
        t = t.to(acc_dtype(t.device)) if isinstance(t, torch.Tensor) else float(t)
        v = state.get("max_exp_avg_sq", state["exp_avg_sq"]) if group.get("amsgrad") else \
            state["exp_avg_sq"]
        return (v / (1.0 - beta2**t)).sqrt().add_(group["eps"])

    def remove(self) -> None:
        """Remove the gradient hooks and drop the references to the model's parameters
        and the optimizer (the estimates stay readable)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self.params = []
        self._plist = []
        self.optimizer = None
        self._reset_step()

    def _reset_step(self) -> None:
        self._micro, self._big, self._no_state = [], None, False
        self._not_accumulated = False
        self._count[:] = [0] * len(self._count)  # the hooks hold this list
        self._pending_grads.clear()
        self._task, self._items = -1, []
        self._denoms.clear()
        self._n = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

    # ------------------------------------------------------------------ step
    def _sizes(self, micro_batch_size, n: int) -> list[int]:
        """The examples (or tokens) of each of the ``n`` backward passes of this step."""
        if micro_batch_size is None:
            micro_batch_size = self.micro_batch_size
        if isinstance(micro_batch_size, Sequence):
            sizes = [check_batch_size(b, "micro_batch_size") for b in micro_batch_size]
            if len(sizes) != n:
                raise InputError(f"micro_batch_size has {len(sizes)} entries but {n} "
                                 "backward passes were seen this step")
            return sizes
        return [check_batch_size(micro_batch_size, "micro_batch_size")] * n

    def _weights(self, weights, n: int) -> list[float]:
        r"""$c_j$: the factor of micro-batch $j$'s mean gradient in ``.grad``."""
        if weights is None:
            c = 1.0 / self.accumulation_steps if self.loss_convention == "mean/k" else 1.0
            return [c] * n
        if isinstance(weights, np.ndarray | torch.Tensor) and weights.ndim == 1:
            weights = list(weights)
        if isinstance(weights, str) or not isinstance(weights, Sequence):
            raise InputError("weights must be a sequence of one positive number per "
                             f"backward pass, got {type(weights).__name__}")
        if len(weights) != n:
            raise InputError(f"weights has {len(weights)} entries but {n} backward passes "
                             "were seen this step")
        out = []
        for w in weights:
            if isinstance(w, torch.Tensor) and w.ndim == 0 and w.dtype != torch.bool:
                w = float(w)
            w = as_scalar(w)
            if isinstance(w, bool) or not isinstance(w, int | float) or \
                    not math.isfinite(w) or w <= 0:
                raise InputError(f"weights must be finite and > 0, got {w!r}")
            out.append(float(w))
        return out

    @staticmethod
    def _design(sizes: list[int], weights: list[float]) -> tuple[float, float, float]:
        r"""$(a, s, C) = (\sum_j c_j^2,\ \sum_j c_j^2/n_j,\ (\sum_j c_j)^2)$ with the
        weights divided by the first one (the estimate does not depend on a common factor;
        equal weights then give the harmonic-mean sizes exactly)."""
        w = [c / weights[0] for c in weights]
        a = sum(c * c for c in w)
        s = sum(c * c / b for c, b in zip(w, sizes, strict=True))
        return a, s, sum(w) ** 2

    def step(self, micro_batch_size=None, *, weights=None, loss_scale=None,
             skip: str | None = None):
        r"""Feed this optimizer step's squared norms to the estimator.

        Parameters
        ----------
        micro_batch_size : int or sequence of int, optional
            The examples (or tokens, see the class notes) of each backward pass since the
            last call; one number for all of them (default: the constructor's).
        weights : sequence of float, optional
            $c_j$, one per backward pass: the factor with which micro-batch $j$'s *mean*
            gradient entered ``.grad`` (default: $1/k$ for ``loss_convention="mean/k"``,
            1 for ``"mean"``). A loss summed over the tokens of micro-batch $j$ and
            divided by the $N$ tokens of the whole accumulated batch (Hugging Face's
            ``num_items_in_batch``) has $c_j = n_j/N$.
        loss_scale : float, optional
            The factor the losses were multiplied by (default: the scaler's).
        skip : str, optional
            Discard this step's norms and count it under ``skipped[skip]`` (a step
            whose micro-batch sizes are unknown).

        Returns
        -------
        tuple of float or None
            ``(g2, trace_sigma)`` of this step, or ``None`` when it was skipped
            (non-finite norms, no optimizer state in preconditioned mode, ``skip``).
        """
        if not self._n:
            raise UsageError(
                "step() called before any backward pass reached the tracked parameters "
                "(call it after loss.backward() and before optimizer.zero_grad())"
            )
        n = self._n
        micro, no_state, big = self._micro, self._no_state, self._big
        not_accumulated = self._not_accumulated
        self._reset_step()
        if skip is not None:
            if not isinstance(skip, str) or not skip:
                raise InputError(f"skip must be a non-empty reason (a string), got {skip!r}")
            self.skipped[skip] = self.skipped.get(skip, 0) + 1
            return None
        if n == 1:  # the remainder at an epoch's end: one batch size only
            self.skipped["single_backward"] += 1
            return None
        if n != self.accumulation_steps and micro_batch_size is None:
            self.skipped["accumulation_mismatch"] += 1
            if not self._warned:
                self._warned = True
                warn(
                    f"{n} backward passes since the last step(), but accumulation_steps="
                    f"{self.accumulation_steps}: the step is skipped (pass "
                    "micro_batch_size= per backward pass for a ragged step)",
                    EmpiricalBatchWarning)
            return None
        sizes = self._sizes(micro_batch_size, n)
        c = self._weights(weights, n)
        if no_state:
            self.skipped["no_optimizer_state"] += 1
            return None
        if not_accumulated:
            raise UsageError(
                "a backward pass reached the tracked parameters without accumulating into "
                ".grad (torch.autograd.grad?): GradientNoiseScale reads the first "
                "micro-batch's gradient from .grad; use loss.backward()")
        if big is None:  # fewer passes than accumulation_steps (a ragged step)
            big = self._grad_sq_norm()
            self._denoms.clear()
        if big is None or not micro:
            raise UsageError("no gradient was accumulated into the tracked parameters")
        scale = resolve_scale(loss_scale, self.scaler)
        # one device->host transfer for all: |g_j|² per pass and |.grad|² (float64)
        stats = torch.stack([*micro, big.to(micro[0].device)])
        a, s, cc = self._design(sizes, c)
        c0 = c[0] * c[0]  # the common factor taken out of a, s and C

        def finish(values):
            # hooks see c_j g_j, .grad holds Σ c_j g_j; with E|g_j|² = |G|² + trΣ/n_j:
            # E Σ|c_j g_j|² = a |G|² + s trΣ and E|Σ c_j g_j|² = C |G|² + s trΣ
            micro_sum, big = sum(values[:-1]), values[-1]
            return self._feed(micro_sum / (c0 * a), a / s, big / (c0 * cc), cc / s, scale)

        return self._defer(stats, finish)
