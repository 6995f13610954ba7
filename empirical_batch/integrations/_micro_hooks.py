"""The micro-batch gradient hooks that the DeepSpeed and OLMo-core collectors share.

A hook on every measured parameter takes the squared norm of each micro-batch's local
gradient as autograd hands it over (grouped by backward pass), before it is accumulated
or all-reduced; at the optimizer step the collector reads the reduced gradient and
`MicroBatchNorms.sums` forms the statistics the weighted estimator needs (module notes
of `empirical_batch.integrations.deepspeed` and `empirical_batch.integrations.olmo_core`).
"""

from __future__ import annotations

from .._optional import optional_import

with optional_import("torch", by="empirical_batch.integrations' engine collectors"):
    import torch

from ..errors import UsageError
from ..estimators import GNSEstimator
from ..measure._common import EstimatorMixin, acc_dtype, graph_task_id, norm, total_sq_norm


class MicroBatchNorms(EstimatorMixin):
    """Squared norms of the micro-batch gradients (hooks, per backward pass) and of the
    step's reduced gradient, fed to the weighted estimator."""

    def __init__(self, params, group, world: int, beta: float, max_history):
        self.params = params
        self.group = group
        self.world = world
        self._estimator = GNSEstimator(beta, max_history=max_history)
        self._init_sync(1)
        self.skipped = {"non_finite": 0, "single_backward": 0}
        self._passes: dict[int, list[torch.Tensor]] = {}
        self._order: list[int] = []
        self._handles = [p.register_hook(self._hook) for _, p in params]

    def _hook(self, grad):
        task = graph_task_id()
        mine = self._passes.get(task)
        if mine is None:
            mine = self._passes[task] = []
            self._order.append(task)
        mine.append(norm(grad))
        return None

    def clear(self) -> None:
        """Forget the backward passes seen so far (a dry run, a skipped step)."""
        self._passes, self._order = {}, []

    def take_passes(self, expected: int, what: str) -> list[list[torch.Tensor]]:
        """The backward passes seen since the last step (then forgotten); there must be
        ``expected`` of them (``what`` says where that number comes from)."""
        passes = [self._passes[t] for t in self._order]
        self.clear()
        if len(passes) != expected:
            raise UsageError(f"{len(passes)} backward passes reached the parameters but "
                             f"{what}")
        return passes

    def sums(self, passes, grads, sizes, weights, *extra: float) -> torch.Tensor:
        r"""This rank's ``[Σ|c_j g_j|², |ḡ|²/W, Σc², Σc²/n, Σc, *extra]``, to be summed
        over the ranks: the hooks saw $c_j g_j$, so $E\sum|c g|^2 = A|G|^2 + S\,
        \operatorname{tr}\Sigma$ over all ranks' micro-batches, and the reduced gradient is
        $\sum c g / W$: $E|W\bar g|^2 = (\sum c)^2|G|^2 + S\,\operatorname{tr}\Sigma$."""
        if not grads or not passes:
            raise UsageError("no gradient reached the parameters this step")
        dev = grads[0].device
        acc = acc_dtype(dev)
        micro = torch.stack([torch.stack(p).to(device=dev, dtype=acc).square().sum()
                             for p in passes]).sum()
        big = total_sq_norm(grads).to(acc)
        design = torch.tensor([sum(c * c for c in weights),
                               sum(c * c / n for c, n in zip(weights, sizes, strict=True)),
                               sum(weights), *extra], dtype=acc, device=dev)
        return torch.cat([torch.stack([micro, big / self.world]), design])

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
