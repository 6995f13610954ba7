"""Pieces shared by the torch collectors: parameter selection, loss scale, estimator."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import torch
from torch import nn

from .._validate import as_scalar
from ..errors import InputError, NotFoundError
from ..estimators import GNSEstimate, GNSEstimator


def select_params(model: nn.Module, params) -> list[tuple[str, nn.Parameter]]:
    """Trainable ``(name, parameter)`` pairs of ``model``, optionally a subset.

    ``params`` is ``None`` (all parameters with ``requires_grad``), or an iterable of
    parameters of ``model`` and/or their names (``model.named_parameters()`` keys).
    """
    if not isinstance(model, nn.Module):
        raise InputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if params is None:
        chosen = named
    else:
        if isinstance(params, str | torch.Tensor) or not isinstance(params, Iterable):
            raise InputError("params must be an iterable of parameters or parameter names")
        by_name = dict(named)
        by_id = {id(p): n for n, p in named}
        chosen, seen = [], set()
        for item in params:
            if isinstance(item, str):
                if item not in by_name:
                    raise InputError(f"params: {item!r} is not a trainable parameter of model")
                name = item
            elif isinstance(item, torch.Tensor):
                if id(item) not in by_id:
                    raise InputError("params: a tensor that is not a trainable parameter of "
                                     "model was given")
                name = by_id[id(item)]
            else:
                raise InputError(f"params entries must be parameters or names, got "
                                f"{type(item).__name__}")
            if name not in seen:
                seen.add(name)
                chosen.append((name, by_name[name]))
    if not chosen:
        raise InputError("model has no trainable parameters (none with requires_grad=True) "
                         "in the selection: there is no gradient to measure")
    return chosen


def fixed_state(model: nn.Module, varied) -> dict[str, torch.Tensor]:
    """Detached parameters and buffers of ``model`` whose names are not in ``varied``:
    the part of its state held fixed in a ``torch.func.functional_call``."""
    return {n: t.detach() for n, t in [*model.named_parameters(), *model.named_buffers()]
            if n not in varied}


def check_batch_size(value, name: str) -> int:
    value = as_scalar(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise InputError(f"{name} must be >= 1, got {value!r}")
    return int(value)


def check_batch(inputs, targets) -> int:
    """The batch size of ``inputs`` (a tensor, examples along dim 0); ``targets``, when a
    tensor, must hold as many examples."""
    if not isinstance(inputs, torch.Tensor):
        raise InputError(f"inputs must be a tensor, got {type(inputs).__name__}")
    if inputs.ndim == 0 or inputs.shape[0] < 1:
        raise InputError(f"inputs must have a non-empty batch dimension, got shape "
                         f"{tuple(inputs.shape)}")
    if isinstance(targets, torch.Tensor) and targets.shape[:1] != inputs.shape[:1]:
        raise InputError(f"targets must have the batch size of inputs ({inputs.shape[0]}), "
                         f"got shape {tuple(targets.shape)}")
    return inputs.shape[0]


def resolve_scale(loss_scale, scaler) -> float:
    """The factor the loss was multiplied by (GradScaler's current scale, or 1)."""
    if loss_scale is not None:
        if isinstance(loss_scale, torch.Tensor):
            loss_scale = float(loss_scale.detach().cpu())
        s = float(loss_scale)
        if not math.isfinite(s) or s <= 0:
            raise InputError(f"loss_scale must be finite and > 0, got {loss_scale!r}")
        return s
    if scaler is not None and getattr(scaler, "is_enabled", lambda: True)():
        return float(scaler.get_scale())
    return 1.0


def acc_dtype(device) -> torch.dtype:
    """The dtype in which squared norms are summed across parameters and layers.

    float64, except on Apple MPS, which has no float64: float32 there.
    """
    return torch.float32 if torch.device(device).type == "mps" else torch.float64


# Per-tensor norms and products are computed in the tensor's own dtype if it is one of
# these, else (fp16/bf16, whose squares overflow or lose digits) in float32.
FULL_DTYPES = (torch.float32, torch.float64)
vector_norm = torch.linalg.vector_norm  # bound once: the hooks call it per parameter


def norm(t: torch.Tensor) -> torch.Tensor:
    """Euclidean norm of one tensor, 0-d, in its own dtype (float32 for fp16/bf16).

    One fused read, no copy of ``t``. The collectors square these norms only after
    stacking them, in float64: one op per step instead of one per tensor.
    """
    return vector_norm(t) if t.dtype in FULL_DTYPES else vector_norm(t, dtype=torch.float32)


def total_sq_norm(tensors) -> torch.Tensor:
    r"""$\sum_i |t_i|^2$ over a list of tensors, a 0-d tensor in float64.

    Each $|t_i|$ comes from one ``torch._foreach_norm`` call per (device, dtype)
    group (a single fused kernel on CUDA instead of one per tensor), in the tensor's
    dtype (float32 for fp16/bf16); the squares are summed in float64 (float32 on MPS)
    on the device of the first tensor.
    """
    tensors = list(tensors)
    if not tensors:
        raise InputError("no tensors to take the norm of")
    dev = tensors[0].device
    groups: dict[tuple, list[torch.Tensor]] = {}
    for t in tensors:
        groups.setdefault((t.device, t.dtype), []).append(t)
    acc = acc_dtype(dev)
    parts = []
    for (_, dtype), ts in groups.items():
        kw = {} if dtype in FULL_DTYPES else {"dtype": torch.float32}
        norms = torch._foreach_norm(ts, 2, **kw)
        parts.append(torch.stack(norms).to(device=dev, dtype=acc))
    return (parts[0] if len(parts) == 1 else torch.cat(parts)).square().sum()


def sq_norm_vector(tensors: list[torch.Tensor], keys: list, *,
                   uniform: bool = False) -> tuple[list, torch.Tensor]:
    r"""$|t_i|^2$ of each tensor as one float64 vector (float32 on MPS), with the
    ``keys`` in the vector's order.

    One ``torch._foreach_norm`` per (device, dtype) group (in the tensor's dtype,
    float32 for fp16/bf16), then one stack, cast and square: a fixed number of kernels
    however many tensors. With several groups the vector lists them group by group.
    ``uniform=True``: the caller knows that all tensors share one device and dtype (no
    per-tensor grouping; the same vector).
    """
    if not tensors:
        raise InputError("no tensors to take the norm of")
    dev = tensors[0].device
    if uniform:
        dtype = tensors[0].dtype
        kw = {} if dtype in FULL_DTYPES else {"dtype": torch.float32}
        norms = torch._foreach_norm(tensors, 2, **kw)
        return keys, torch.stack(norms).to(device=dev, dtype=acc_dtype(dev)).square()
    groups: dict[tuple, list[int]] = {}
    for k, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(k)
    acc = acc_dtype(dev)
    parts, order = [], []
    for (_, dtype), ks in groups.items():
        kw = {} if dtype in FULL_DTYPES else {"dtype": torch.float32}
        norms = torch._foreach_norm([tensors[k] for k in ks], 2, **kw)
        parts.append(torch.stack(norms).to(device=dev, dtype=acc))
        order += [keys[k] for k in ks]
    return order, (parts[0] if len(parts) == 1 else torch.cat(parts)).square()


def graph_task_id() -> int:
    """Id of the backward pass (autograd graph task) running now: the collectors queue
    one end-of-pass callback per task, so a pass that failed half-way does not stop
    the next one from being measured."""
    get = getattr(torch._C, "_current_graph_task_id", None)
    return get() if get is not None else 0


def stack_scalars(xs: list[torch.Tensor], device) -> torch.Tensor:
    """``torch.stack`` of same-shape tensors (0-d norms, ``(B,)`` per-layer terms), moved
    to ``device`` when they are spread over several (model parallelism); ``stack``
    promotes mixed dtypes."""
    try:
        return torch.stack(xs)
    except RuntimeError:  # tensors on different devices
        return torch.stack([x.to(device) for x in xs])


class EstimatorMixin:
    """Forwarding of the smoothed estimates to ``self.estimator``, and the deferred
    device-to-host transfer of each step's squared norms (``sync_every``)."""

    _estimator: GNSEstimator
    skipped: dict[str, int]
    sync_every: int = 1
    _pending: list

    def _init_sync(self, sync_every) -> None:
        self.sync_every = check_batch_size(sync_every, "sync_every")
        self._pending = []

    def _defer(self, stats: torch.Tensor, finish):
        """Hand this step's device tensor of sums to ``finish(list of floats)``: now
        (``sync_every=1``, returning its result), or at the next read of an estimate /
        every ``sync_every`` steps, in one transfer for all pending steps (``None``)."""
        if self.sync_every == 1:
            return finish(stats.tolist())
        self._pending.append((stats, finish))
        if len(self._pending) >= self.sync_every:
            self.flush()
        return None

    def flush(self) -> None:
        """Fold the steps still on the device into the estimator (one transfer). Reading
        any estimate does this first."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        flat = torch.cat([s.reshape(-1).to(pending[0][0].device) for s, _ in pending])
        values = flat.tolist()
        i = 0
        for s, finish in pending:
            finish(values[i:i + s.numel()])
            i += s.numel()

    def _state_text(self) -> str:
        """``steps=…, b_simple=…, skipped=…`` for the reprs."""
        est = self.estimator
        text = f"steps={est.steps}"
        if est.steps:
            text += f", b_simple={est.b_simple:.4g}"
        skipped = {k: v for k, v in self.skipped.items() if v}
        return text + (f", skipped={skipped}" if skipped else "")

    @property
    def estimator(self) -> GNSEstimator:
        """The `GNSEstimator` (every pending step folded in first)."""
        self.flush()
        return self._estimator

    @property
    def b_simple(self) -> float:
        return self.estimator.b_simple

    @property
    def g2(self) -> float:
        return self.estimator.g2

    @property
    def trace_sigma(self) -> float:
        return self.estimator.trace_sigma

    @property
    def b_simple_se(self) -> float:
        return self.estimator.b_simple_se

    @property
    def skipped_steps(self) -> int:
        """Steps skipped (non-finite norms, or no optimizer state yet)."""
        return sum(self.skipped.values())

    def _feed(self, sq_small: float, b_small, sq_big: float, b_big, scale: float):
        """Divide this step's squared norms by the loss scale squared and update the
        estimator; a step with a non-finite norm is counted and skipped (``None``)."""
        sq_small, sq_big = sq_small / scale**2, sq_big / scale**2
        if not (math.isfinite(sq_small) and math.isfinite(sq_big)):
            self.skipped["non_finite"] += 1
            return None
        return self._estimator.update(sq_small, b_small, sq_big, b_big)

    def estimate(self, level: float = 0.95) -> GNSEstimate:
        return self.estimator.estimate(level)

    def to_frame(self):
        """Raw per-step components (see `GNSEstimator.to_frame`)."""
        return self.estimator.to_frame()

    def state_dict(self) -> dict:
        return {"estimator": self.estimator.state_dict(), "skipped": dict(self.skipped)}

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict`; everything is checked first, so on an error nothing
        changes."""
        skipped = checked_skipped(state)
        self._estimator.load_state_dict(state["estimator"])  # checks before it changes
        self._pending = []
        self.skipped = {**dict.fromkeys(self.skipped, 0), **skipped}


def checked_skipped(state) -> dict[str, int]:
    """``state["skipped"]`` of a collector's `state_dict`: counts (integers >= 0) by
    reason; `InputError`/`NotFoundError` otherwise."""
    if not isinstance(state, dict):
        raise InputError(f"state must be a dict (from state_dict()), got {type(state).__name__}")
    for key in ("estimator", "skipped"):
        if key not in state:
            raise NotFoundError(f"state is missing the entry {key!r}")
    skipped = state["skipped"]
    if not isinstance(skipped, dict) or not all(
            isinstance(k, str) and isinstance(v, int | np.integer) and not isinstance(v, bool)
            and v >= 0 for k, v in skipped.items()):
        raise InputError(f"state['skipped'] must map reasons to counts >= 0, got {skipped!r}")
    return {k: int(v) for k, v in skipped.items()}
