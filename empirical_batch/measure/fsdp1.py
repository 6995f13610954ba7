r"""Gradient noise scale under FSDP1 (``torch.distributed.fsdp.FullyShardedDataParallel``,
what Ray Train's ``prepare_model(parallel_strategy="fsdp")`` wraps with).

FSDP1 takes a communication hook on its root instance
(``FullyShardedDataParallel.register_comm_hook``, a public API) and calls it, for every
FSDP unit, with the unit's full flattened *local* gradient and the shard of the reduced
gradient to fill. This collector's hook performs FSDP's own reduction (divide by the
world size, reduce-scatter; an all-reduce for ``NO_SHARD``) and around it takes two
squared norms:

* the **input**: this rank's local gradient of its ``b`` examples (the padding FSDP adds
  is zeros: it does not change the norm);
* the **output**: this rank's shard of the averaged gradient (all of it for
  ``NO_SHARD``), summed over the calls of one step; the shards' squared norms summed
  over ranks give $|\bar g|^2$ of all $W b$ examples.

(``NO_SHARD`` all-reduces ``.grad`` in place, which after the first micro-batch of a
step already holds the average of the earlier ones: the local gradient is what was added
since.)

One two-number all-reduce per step then feeds the replica estimator (``b_small = b``,
``b_big = W b``), exactly as `empirical_batch.measure.FSDPNoiseScale` does for FSDP2.
Under ``model.no_sync()`` for the first ``k - 1`` of ``k`` accumulation micro-batches
there is one call per unit and step (``b_small = b``); without it FSDP reduces after
every micro-batch, each call's input is one micro-batch's gradient and
``b_small = b/k``. The calls of one step are matched to their units by their order
within each backward pass (the same in every pass of one graph); a step whose calls
do not divide into whole passes is refused.

Limitations: hybrid sharding (HSDP) refuses communication hooks; with
``MixedPrecision(reduce_dtype=...)`` the hook receives gradients in that dtype (the
norms are taken in float32 for fp16/bf16); FSDP's pre- and post-divide factors are
replaced by one division by the world size before the collective.
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

__all__ = ["FSDP1NoiseScale"]

# torch >= 2.10 names it reduce_scatter_single (reduce_scatter_tensor is deprecated)
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


class FSDP1NoiseScale(EstimatorMixin):
    r"""Measure $B_{simple}$ in a model wrapped with FSDP1's ``FullyShardedDataParallel``.

    Parameters
    ----------
    model : torch.distributed.fsdp.FullyShardedDataParallel
        The root FSDP instance, before its first forward pass (FSDP accepts a
        communication hook only then, and only once).
    local_batch_size : int
        Examples per rank per optimizer step (``k b`` with ``k`` accumulation
        micro-batches of ``b``; the loss then averaged over all of them).
    beta, scaler, max_history, sync_every
        As for `empirical_batch.measure.FSDPNoiseScale`.

    Examples
    --------
    ``gns = FSDP1NoiseScale(fsdp_model, local_batch_size=8)``; in the loop,
    ``loss.backward(); gns.step(); optimizer.step(); optimizer.zero_grad()``.
    """

    def __init__(self, model, local_batch_size: int, *, beta: float = 0.99, scaler=None,
                 max_history: int | None = None, sync_every: int = 1):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        if not isinstance(model, FSDP):
            raise InputError("model must be the root FullyShardedDataParallel instance, got "
                             f"{type(model).__name__}")
        self.process_group = model.process_group
        self.world_size = dist.get_world_size(self.process_group)
        if self.world_size < 2:
            raise InputError(
                "FSDP1NoiseScale needs >= 2 ranks (local and global batch must differ), "
                f"the process group has {self.world_size}")
        self.local_batch_size = check_batch_size(local_batch_size, "local_batch_size")
        self.scaler = scaler
        self._estimator = GNSEstimator(beta, max_history=max_history)
        self._init_sync(sync_every)
        self.skipped = {"non_finite": 0}
        self.units = sum(1 for m in FSDP.fsdp_modules(model)
                         if getattr(m, "_handle", None) is not None)
        self._local: list[torch.Tensor] = []
        self._shards: list[torch.Tensor | None] = [None] * self.units
        self._calls = 0
        self._sharded = True  # False under NO_SHARD: every rank holds the whole average
        try:
            model.register_comm_hook(self, FSDP1NoiseScale._hook)
        except AssertionError as err:  # FSDP signals misuse with assertions
            raise InputError(f"FSDP1NoiseScale cannot hook this model: {err}") from err

    def __repr__(self) -> str:
        return (f"FSDP1NoiseScale(replica estimator over {self.world_size} ranks, local "
                f"batch {self.local_batch_size}, {self.units} FSDP units, "
                f"{self._state_text()})")

    @staticmethod
    def _hook(self, grad: torch.Tensor, output: torch.Tensor | None = None) -> None:
        unit = self._calls % max(self.units, 1)
        self._calls += 1
        kept = self._shards[unit]
        self._sharded = output is not None
        if output is None:
            # NO_SHARD reduces .grad in place, which still holds the average of the
            # step's earlier micro-batches: this micro-batch's local gradient is the rest
            self._local.append(norm(grad if kept is None else grad - kept))
            grad.div_(self.world_size)
            dist.all_reduce(grad, group=self.process_group)
            self._shards[unit] = grad.detach().to(
                grad.dtype if grad.dtype in FULL_DTYPES else torch.float32, copy=True)
            return
        self._local.append(norm(grad))
        grad.div_(self.world_size)
        _reduce_scatter(output, grad, group=self.process_group)
        if kept is None:
            self._shards[unit] = output.detach().to(
                output.dtype if output.dtype in FULL_DTYPES else torch.float32, copy=True)
        elif kept.shape != output.shape:
            raise UsageError("FSDP reduced its units in a different order in two backward "
                             "passes of one step: the shards cannot be paired")
        else:
            kept.add_(output.detach())

    def step(self, local_batch_size: int | None = None, *, loss_scale=None):
        """All-reduce this step's two norms and feed the estimator (on every rank).

        Returns ``(g2, trace_sigma)`` of this step, or ``None`` if it was skipped.
        """
        b = self.local_batch_size if local_batch_size is None else \
            check_batch_size(local_batch_size, "local_batch_size")
        if not self._calls:
            raise UsageError("step() called before any backward pass reduced gradients "
                             "(call it after loss.backward())")
        calls, local, shards = self._calls, self._local, self._shards
        self._calls, self._local, self._shards = 0, [], [None] * self.units
        if calls % self.units:
            raise UsageError(f"FSDP reduced {calls} unit gradients this step, not a "
                             f"multiple of its {self.units} units")
        k = calls // self.units
        if b % k:
            raise InputError(f"local_batch_size={b} is not a multiple of the {k} "
                             "micro-batches whose gradients FSDP reduced this step")
        kept = [s for s in shards if s is not None]
        dev = kept[0].device
        acc = acc_dtype(dev)
        small = torch.stack([x.to(device=dev, dtype=acc) for x in local]).square().sum()
        _, sq = sq_norm_vector(kept, list(range(len(kept))))
        # NO_SHARD keeps the whole average on every rank: count it once
        big = sq.sum() if self._sharded else sq.sum() / self.world_size
        stats = torch.stack([small, big.to(dev)])
        dist.all_reduce(stats, group=self.process_group)
        scale = resolve_scale(loss_scale, self.scaler)
        w = self.world_size

        def finish(values):
            # each call's input is one micro-batch's gradient divided by k (loss / k)
            return self._feed(values[0] * k / w, b // k, values[1], b * w, scale)

        return self._defer(stats, finish)
