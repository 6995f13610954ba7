r"""Gradient noise scale from data-parallel replicas (a DDP communication hook).

Each of the ``W`` replicas computes the mean gradient $g_r$ of its local
batch of ``b`` examples; DDP averages them into the global gradient $\bar g$
of ``W b`` examples. The hook takes each bucket's squared norm before and after
the all-reduce, so $\frac1W\sum_r|g_r|^2$ (``b_small = b``) and
$|\bar g|^2$ (``b_big = W b``) cost two norms per bucket and one extra
two-number all-reduce per step (McCandlish et al. 2018, App. A.1; the approach of
k-diffusion's ``gns.py``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..errors import InputError, UsageError
from ..estimators import GNSEstimator
from ._common import (
    EstimatorMixin,
    acc_dtype,
    check_batch_size,
    norm,
    resolve_scale,
    stack_scalars,
)

__all__ = ["DDPNoiseScaleHook"]


class DDPNoiseScaleHook(EstimatorMixin):
    r"""Register on a ``DistributedDataParallel`` model; call `step` per step.

    Parameters
    ----------
    ddp_model : torch.nn.parallel.DistributedDataParallel
        The wrapped model; this replaces its communication hook (the all-reduce
        average is done here, as DDP's default hook does).
    local_batch_size : int
        Examples per replica per optimizer step (with ``no_sync`` accumulation of
        ``k`` micro-batches of ``b``, this is ``k b``; the loss must then be the
        mean over all ``k b``, e.g. micro-batch mean / ``k``).
    beta : float
        EMA decay of the estimator (identical on all ranks).
    scaler : torch.amp.GradScaler, optional
        Squared norms are divided by ``scale²``; non-finite steps are skipped.
    max_history : int, optional
        Keep the per-step rows of the last ``max_history`` steps only (a ring buffer;
        default: all). The averages use every step either way.

    Examples
    --------
    ``hook = DDPNoiseScaleHook(ddp_model, local_batch_size=32)``; in the loop,
    ``loss.backward(); hook.step(); optimizer.step(); optimizer.zero_grad()``.
    ``hook.b_simple`` is the same on every rank.
    """

    def __init__(self, ddp_model, local_batch_size: int, *, beta: float = 0.99,
                 scaler=None, max_history: int | None = None, sync_every: int = 1):
        if not hasattr(ddp_model, "register_comm_hook"):
            raise InputError("ddp_model must be a torch.nn.parallel.DistributedDataParallel "
                            f"model, got {type(ddp_model).__name__}")
        if not any(p.requires_grad for p in ddp_model.parameters()):
            raise InputError("model has no trainable parameters: there is no gradient to "
                             "measure")
        self.process_group = getattr(ddp_model, "process_group", None)
        self.world_size = dist.get_world_size(self.process_group)
        if self.world_size < 2:
            raise InputError(
                "DDPNoiseScaleHook needs >= 2 replicas (local and global batch must "
                f"differ), the process group has {self.world_size}"
            )
        self.local_batch_size = check_batch_size(local_batch_size, "local_batch_size")
        self.scaler = scaler
        self._estimator = GNSEstimator(beta, max_history=max_history)
        self._init_sync(sync_every)
        self.skipped = {"non_finite": 0}
        self._small: list[torch.Tensor] = []
        self._big: list[torch.Tensor] = []
        ddp_model.register_comm_hook(self, DDPNoiseScaleHook._hook)

    def __repr__(self) -> str:
        return (f"DDPNoiseScaleHook(replica estimator over {self.world_size} ranks, local "
                f"batch {self.local_batch_size}, {self._state_text()})")

    @staticmethod
    def _hook(self, bucket):
        buf = bucket.buffer()
        self._small.append(norm(buf))
        buf.div_(self.world_size)
        fut = dist.all_reduce(buf, group=self.process_group, async_op=True).get_future()

        def done(fut):
            out = fut.value()[0]
            self._big.append(norm(out))
            return out

        return fut.then(done)

    def step(self, local_batch_size: int | None = None, *, loss_scale=None):
        """All-reduce this step's two norms and feed the estimator (on every rank).

        Returns ``(g2, trace_sigma)`` of this step, or ``None`` if it was skipped.
        """
        if not self._small:
            raise UsageError("step() called before any backward pass synchronised "
                               "gradients (call it after loss.backward())")
        b = self.local_batch_size if local_batch_size is None else \
            check_batch_size(local_batch_size, "local_batch_size")
        small, big = self._small, self._big
        self._small, self._big = [], []
        dev = small[0].device
        acc = acc_dtype(dev)
        # Σ over buckets in float64 (float32 on MPS)
        stats = torch.stack([stack_scalars(small, dev).to(acc).square().sum(),
                             stack_scalars(big, dev).to(acc).square().sum()])
        dist.all_reduce(stats, group=self.process_group)
        scale = resolve_scale(loss_scale, self.scaler)
        w = self.world_size

        def finish(values):
            return self._feed(values[0] / w, b, values[1] / w, b * w, scale)

        return self._defer(stats, finish)
