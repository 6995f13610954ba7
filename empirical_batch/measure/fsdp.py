r"""Gradient noise scale under FSDP2 (``torch.distributed.fsdp.fully_shard``).

With sharded data parallelism no rank ever holds the whole averaged gradient, and the
local gradients exist only for the moment FSDP reduce-scatters them. This collector
installs itself as FSDP's reduce-scatter (``FSDPModule.set_custom_reduce_scatter``,
a public API) and, around the real collective, takes two squared norms per parameter
group and call:

* the **input**: this rank's local, unsharded gradient of its ``b`` examples
  ($|g_r|^2$ summed over groups);
* the **output**: this rank's shard of the averaged gradient, accumulated over the
  calls of one step; the shards' squared norms summed over ranks give
  $|\bar g|^2$ of all $W b$ examples.

One two-number all-reduce per step then gives the replica (two-batch) estimator of
McCandlish et al. (2018, App. A.1) with ``b_small = b`` and ``b_big = W b``, exactly
as `DDPNoiseScaleHook` does for DDP. When FSDP
reduce-scatters after each of ``k`` accumulation micro-batches (its default), each
call's input is one micro-batch's gradient: then ``b_small = b/k`` and the estimator
uses all $W k$ micro-batches. With ``set_requires_gradient_sync(False)`` on the
first ``k - 1`` micro-batches there is one call per step and ``b_small = b``.

Both norms are taken when the gradient is reduced, so clipping, unscaling or zeroing
``.grad`` before `FSDPNoiseScale.step` does not change the result.

Limitations: only reduce-scatters that average (``ReduceOp.AVG``, FSDP's choice on
CPU/gloo and on CUDA/NCCL unless a custom divide factor or sum reduction is set) are
supported; a pre-divided sum is refused at `step`. HSDP (an
extra all-reduce across replica groups) is not handled. Keeping the averaged shard
for the step costs one extra shard-sized buffer per parameter group (float32 for
fp16/bf16 reductions); its norms are one fused ``torch._foreach_norm`` at `FSDPNoiseScale.step`.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..errors import InputError, UsageError
from ..estimators import GNSEstimator
from ._common import (
    FULL_DTYPES,
    EstimatorMixin,
    acc_dtype,
    check_batch_size,
    norm,
    resolve_scale,
    sq_norm_vector,
)

__all__ = ["FSDPNoiseScale"]


def _fsdp_module():
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError as err:  # pragma: no cover - torch < 2.6
        raise ImportError("FSDPNoiseScale needs torch >= 2.6 (FSDP2, fully_shard)") from err
    return FSDPModule


# torch >= 2.10 names it reduce_scatter_single (reduce_scatter_tensor is deprecated)
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


class _PlainReduceScatter:
    """FSDP's default behaviour, for `FSDPNoiseScale.remove`."""

    def allocate(self, size, *, dtype, device):
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        return _reduce_scatter(output_tensor, input_tensor, op=op, group=group,
                               async_op=async_op)


class _Recorder(_PlainReduceScatter):
    """One parameter group's reduce-scatter: the real collective plus two norms."""

    def __init__(self):
        self._reset()

    def _reset(self) -> None:
        self.calls = 0
        self.ops: set[str] = set()
        self.local: list[torch.Tensor] = []
        self.shard: torch.Tensor | None = None

    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        self.local.append(norm(input_tensor))
        work = super().__call__(output_tensor, input_tensor, group, op, async_op)
        if async_op and work is not None:
            work.wait()
        out = output_tensor.detach()
        if self.shard is None:  # a copy in float32 (fp16/bf16 reductions upcast)
            self.shard = out.to(out.dtype if out.dtype in FULL_DTYPES else torch.float32,
                                copy=True)
        else:
            self.shard.add_(out)
        self.calls += 1
        self.ops.add(str(op).rsplit(".", 1)[-1])
        return work

    def take(self):
        local, shard, calls, ops = self.local, self.shard, self.calls, self.ops
        self._reset()
        return local, shard, calls, ops


class FSDPNoiseScale(EstimatorMixin):
    r"""Measure $B_{simple}$ in a model sharded with FSDP2's ``fully_shard``.

    Parameters
    ----------
    model : torch.nn.Module
        The root module after ``fully_shard``; every FSDP module inside it (each
        ``fully_shard`` call) gets the recording reduce-scatter.
    local_batch_size : int
        Examples per rank per optimizer step (``k b`` with ``k`` accumulation
        micro-batches of ``b``; the loss must then be averaged over all of them,
        e.g. micro-batch mean / ``k``).
    beta : float
        EMA decay of the estimator (identical on all ranks).
    scaler : torch.amp.GradScaler, optional
        Squared norms are divided by ``scale²``; non-finite steps are skipped.
    max_history : int, optional
        Keep the per-step rows of the last ``max_history`` steps only (a ring buffer;
        default: all). The averages use every step either way.

    Examples
    --------
    ``gns = FSDPNoiseScale(model, local_batch_size=8)``; in the loop,
    ``loss.backward(); gns.step(); optimizer.step(); optimizer.zero_grad()``.
    ``gns.b_simple`` is the same on every rank.
    """

    def __init__(self, model, local_batch_size: int, *, beta: float = 0.99, scaler=None,
                 max_history: int | None = None, sync_every: int = 1):
        fsdp_module = _fsdp_module()
        if not isinstance(model, fsdp_module):
            raise InputError(
                "model must be the root module after torch.distributed.fsdp.fully_shard, "
                f"got {type(model).__name__}"
            )
        self.world_size = dist.get_world_size()
        if self.world_size < 2:
            raise InputError(
                "FSDPNoiseScale needs >= 2 ranks (local and global batch must differ), "
                f"the default process group has {self.world_size}"
            )
        self.local_batch_size = check_batch_size(local_batch_size, "local_batch_size")
        self.scaler = scaler
        self._estimator = GNSEstimator(beta, max_history=max_history)
        self._init_sync(sync_every)
        self.skipped = {"non_finite": 0}
        self._modules = [m for m in model.modules() if isinstance(m, fsdp_module)]
        self._recorders: list[_Recorder] = []
        for m in self._modules:
            rec = _Recorder()
            try:
                m.set_custom_reduce_scatter(rec)
            except ValueError as err:
                raise InputError(f"FSDPNoiseScale cannot record {type(m).__name__}: {err}") \
                    from err
            self._recorders.append(rec)

    def __repr__(self) -> str:
        return (
            f"FSDPNoiseScale(replica estimator over {self.world_size} ranks, local batch "
            f"{self.local_batch_size}, {len(self._recorders)} FSDP modules, "
            f"{self._state_text()})"
        )

    def step(self, local_batch_size: int | None = None, *, loss_scale=None):
        """All-reduce this step's two norms and feed the estimator (on every rank).

        Call it after the last backward pass of the step (before or after clipping).
        Returns ``(g2, trace_sigma)`` of this step, or ``None`` if it was skipped.
        """
        b = self.local_batch_size if local_batch_size is None else \
            check_batch_size(local_batch_size, "local_batch_size")
        taken = [r.take() for r in self._recorders]
        used = [t for t in taken if t[2] > 0]
        if not used:
            raise UsageError("step() called before any backward pass reduced gradients "
                               "(call it after loss.backward())")
        ops = set().union(*(t[3] for t in used))
        if ops != {"AVG"}:
            raise UsageError(
                f"FSDP reduced gradients with {sorted(ops)}: only an averaging reduce-"
                "scatter (ReduceOp.AVG) is supported (a custom gradient divide factor or "
                "sum reduction pre-divides the local gradients)"
            )
        calls = {t[2] for t in used}
        if len(calls) != 1:
            raise UsageError(f"FSDP modules reduced gradients a different number of times "
                               f"this step ({sorted(calls)}); cannot pair them")
        k = calls.pop()
        if b % k:
            raise InputError(f"local_batch_size={b} is not a multiple of the {k} micro-batches "
                             "whose gradients FSDP reduced this step")
        dev = used[0][1].device
        acc = acc_dtype(dev)
        local = torch.stack([x.to(device=dev, dtype=acc) for t in used for x in t[0]])
        # one fused norm over all the groups' shards
        _, shards = sq_norm_vector([t[1] for t in used], list(range(len(used))))
        stats = torch.stack([local.square().sum(), shards.to(dev).sum()])
        dist.all_reduce(stats)
        scale = resolve_scale(loss_scale, self.scaler)
        w = self.world_size

        def finish(values):
            # each call's input is one micro-batch's gradient divided by k (loss / k)
            return self._feed(values[0] * k / w, b // k, values[1], b * w, scale)

        return self._defer(stats, finish)

    def remove(self) -> None:
        """Give FSDP back its default reduce-scatter and drop the references."""
        for m in self._modules:
            m.set_custom_reduce_scatter(_PlainReduceScatter())
        self._modules, self._recorders = [], []
