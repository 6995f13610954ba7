r"""$B_{simple}$ inside a Ray Train ``TorchTrainer`` worker (needs ``ray[train]``).

Usage, inside the training function (two added lines: the collector, and
`RayTrainNoiseScale.report` in place of ``ray.train.report``)::

    def train_func(config):
        model = ray.train.torch.prepare_model(model)          # DDP
        gns = RayTrainNoiseScale(model, local_batch_size=32)
        for step in range(steps):
            loss = loss_fn(model(x), y)
            loss.backward()
            gns.step(loss=loss)
            optimizer.step()
            optimizer.zero_grad()
            gns.report({"loss": loss.item()})                  # ray.train.report

The model ``prepare_model`` returned picks the collector: ``DistributedDataParallel``
(``parallel_strategy="ddp"``, the default) gets a communication hook
(`empirical_batch.measure.DDPNoiseScaleHook`); FSDP1's ``FullyShardedDataParallel``
(``parallel_strategy="fsdp"``) gets an FSDP communication hook
(`empirical_batch.measure.fsdp1.FSDP1NoiseScale`). Either way $b_{small}$ is one
worker's batch and $b_{big}$ that of the whole data-parallel group (the model's process
group). The worker's rows of the noise-log schema are in `RayTrainNoiseScale.log`;
`RayTrainNoiseScale.report` adds the values to the metrics of ``ray.train.report``
(every worker reports; Ray keeps rank 0's).

**Elastic resizes.** With ``ScalingConfig(num_workers=(min, max))`` a restart may bring
another number of workers $W'$, and with it another global batch. `ElasticBatch` says
what to do at every (re)start, from ``ray.train.get_context().get_world_size()``:

- ``policy="accumulate"`` keeps the global batch $B$: $k' = B/(W' b)$ accumulation
  micro-batches of $b$ per worker (refused when $W' b$ does not divide $B$);
- ``policy="transfer"`` keeps $k$ and lets the batch become $B' = W' k b$, moving the
  optimizer's hyperparameters from the reference batch with the rule registry
  (`empirical_batch.transfer.transfer`: ``lr_rule="linear"`` for SGD, ``"sqrt"`` for
  Adam, ...).

Pitfalls: on CPU workers Ray's ``prepare_model(parallel_strategy="fsdp")`` refuses to
wrap (it requires GPUs); wrap with ``FullyShardedDataParallel(model,
device_id=torch.device("cpu"))`` there, the same class. FSDP accepts a communication
hook only before the first forward pass. Save ``gns.state_dict()`` in the Ray checkpoint
and load it after a restart, so that the log's counters continue.
"""

from __future__ import annotations

from .._optional import optional_import

with optional_import("torch", "ray", by="empirical_batch.integrations.ray_train",
                     extra="ray-train"):
    import ray.train
    import torch  # noqa: F401
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.nn.parallel import DistributedDataParallel

from ..errors import InputError
from ..measure import DDPNoiseScaleHook
from ..measure._common import check_batch_size
from ..measure.fsdp1 import FSDP1NoiseScale
from ..transfer import Optimizer, TransferResult, transfer
from .engine import EngineNoiseScale
from .loggers import PREFIX

__all__ = ["ElasticBatch", "RayTrainNoiseScale"]

_POLICIES = ("accumulate", "transfer")


class RayTrainNoiseScale(EngineNoiseScale):
    r"""Measure $B_{simple}$ in one Ray Train worker (every worker creates one).

    Parameters
    ----------
    model : torch.nn.Module
        What ``ray.train.torch.prepare_model`` returned: ``DistributedDataParallel`` or
        FSDP1's ``FullyShardedDataParallel`` (before its first forward pass).
    local_batch_size : int
        Examples per worker per optimizer step (``k b`` with accumulation, the loss
        averaged over all of them).
    beta, max_history, level, prefix
        As for the other collectors.
    """

    def __init__(self, model, local_batch_size: int, *, beta: float = 0.99,
                 max_history: int | None = None, level: float = 0.95, prefix: str = PREFIX):
        self.local_batch_size = check_batch_size(local_batch_size, "local_batch_size")
        if isinstance(model, DistributedDataParallel):
            self.strategy = "ddp"
            self.collector = DDPNoiseScaleHook(model, self.local_batch_size, beta=beta,
                                               max_history=max_history)
        elif isinstance(model, FullyShardedDataParallel):
            self.strategy = "fsdp"
            self.collector = FSDP1NoiseScale(model, self.local_batch_size, beta=beta,
                                             max_history=max_history)
        else:
            raise InputError("model must be what ray.train.torch.prepare_model returned "
                             "with 2 or more workers (DistributedDataParallel or "
                             f"FullyShardedDataParallel), got {type(model).__name__}")
        self.world_size = self.collector.world_size
        self._init_log(unit="examples", level=level, prefix=prefix)

    def __repr__(self) -> str:
        return (f"RayTrainNoiseScale({self.strategy} over {self.world_size} workers, local "
                f"batch {self.local_batch_size}, steps={self.estimator.steps})")

    def step(self, local_batch_size: int | None = None, *, loss=None):
        """Feed this optimizer step (after its last backward pass) and append a row to
        `log`; returns ``(g2, trace_sigma)`` or ``None`` for a skipped step."""
        b = self.local_batch_size if local_batch_size is None else \
            check_batch_size(local_batch_size, "local_batch_size")
        out = self.collector.step(b)
        self._measured(b * self.world_size, None, loss=loss)
        return out

    def report(self, metrics: dict | None = None, checkpoint=None) -> dict:
        """``ray.train.report`` of ``metrics`` with the noise-scale values added; returns
        what was reported."""
        merged = {**(metrics or {}), **self.values()}
        ray.train.report(merged, checkpoint=checkpoint)
        return merged


class ElasticBatch:
    r"""The batch of a Ray Train run after an elastic resize (see the module notes).

    Parameters
    ----------
    global_batch : int
        The reference global batch $B$ (examples per optimizer step).
    micro_batch_size : int
        Examples per worker and backward pass $b$.
    policy : {"accumulate", "transfer"}
        Keep $B$ by accumulation, or keep the accumulation and transfer the
        hyperparameters to the new batch.
    hparams : mapping, optional
        ``policy="transfer"``: the hyperparameters at $B$ (``lr``, ``beta2``, ...).
    optimizer : {"sgd", "adam", "adamw"}
    lr_rule : str
        ``policy="transfer"``: the learning-rate rule of `empirical_batch.transfer`.
    accumulation_steps : int
        ``policy="transfer"``: the fixed $k$.

    Examples
    --------
    >>> plan = ElasticBatch(256, 32, policy="accumulate")
    >>> plan.at(4)["accumulation_steps"], plan.at(8)["accumulation_steps"]
    (2, 1)
    >>> grow = ElasticBatch(256, 32, policy="transfer", hparams={"lr": 0.1},
    ...                     optimizer="sgd", lr_rule="linear", accumulation_steps=2)
    >>> grow.at(8)["global_batch"], round(grow.at(8)["hparams"]["lr"], 6)
    (512, 0.2)
    """

    def __init__(self, global_batch: int, micro_batch_size: int, *,
                 policy: str = "accumulate", hparams=None, optimizer: Optimizer = "sgd",
                 lr_rule: str = "linear", accumulation_steps: int = 1):
        if policy not in _POLICIES:
            raise InputError(f"policy must be one of {_POLICIES}, got {policy!r}")
        self.global_batch = check_batch_size(global_batch, "global_batch")
        self.micro_batch_size = check_batch_size(micro_batch_size, "micro_batch_size")
        self.policy = policy
        self.accumulation_steps = check_batch_size(accumulation_steps, "accumulation_steps")
        if policy == "transfer" and not hparams:
            raise InputError("policy='transfer' needs hparams= (the hyperparameters at "
                             "global_batch)")
        self.hparams = dict(hparams or {})
        self.optimizer = optimizer
        self.lr_rule = lr_rule

    def at(self, world_size: int) -> dict:
        """``{"world_size", "accumulation_steps", "global_batch", "hparams",
        "transfer"}`` for ``world_size`` workers (``transfer`` is the
        `empirical_batch.transfer.TransferResult`, ``None`` when nothing moved)."""
        w = check_batch_size(world_size, "world_size")
        b = self.micro_batch_size
        moved: TransferResult | None = None
        if self.policy == "accumulate":
            if self.global_batch % (w * b):
                raise InputError(
                    f"global batch {self.global_batch} is not a whole number of micro-"
                    f"batches of {b} on {w} workers: choose policy='transfer' or a "
                    "micro_batch_size that divides it")
            k = self.global_batch // (w * b)
            batch, hparams = self.global_batch, dict(self.hparams)
        else:
            k = self.accumulation_steps
            batch = w * k * b
            hparams = dict(self.hparams)
            if batch != self.global_batch:
                moved = transfer(self.hparams, self.global_batch, batch,
                                 optimizer=self.optimizer, rule=self.lr_rule)
                hparams = {**hparams, **moved.new}
        return {"world_size": w, "accumulation_steps": k, "global_batch": batch,
                "hparams": hparams, "transfer": moved}
