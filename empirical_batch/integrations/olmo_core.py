r"""$B_{simple}$ in an OLMo-core ``Trainer`` (needs ``ai2-olmo-core``).

Usage (one added callback; the values are recorded with ``trainer.record_metric`` and
reach every metric logger the trainer has)::

    from empirical_batch.integrations.olmo_core import OLMoCoreNoiseScale

    trainer = trainer_config.build(train_module, data_loader)
    trainer.add_callback("noise_scale", OLMoCoreNoiseScale(log_path="gns.csv"))
    trainer.fit()          # noise_scale/b_simple, .../g2, .../trace_sigma each step

or ``TrainerConfig(callbacks={"noise_scale": OLMoCoreNoiseScale(), ...})``.

**What is measured.** OLMo-core's train modules (``TransformerTrainModule``,
``BasicTrainModule``) split the rank's batch into micro-batches of
``rank_microbatch_size`` tokens and take, for micro-batch $j$ with $n_j$ loss tokens,
the loss summed over its tokens and divided by the tokens $N$ of the rank's whole batch:
micro-batch $j$ enters the rank's gradient with weight $c_j = n_j/N$. A gradient hook on
every trainable parameter takes the squared norm of each micro-batch's local gradient
$c_j g_j$ as autograd hands it over, before it is accumulated or all-reduced; at
``pre_optim_step`` (after the last backward pass, before clipping and the optimizer step)
the parameters' ``.grad`` hold the step's gradient averaged over the $W$ data-parallel
ranks, $\bar g = \frac1W \sum_{r,j} c_{rj} g_{rj}$. With $A = \sum c^2$,
$S = \sum c^2/n$ and $C = \sum c$ over the micro-batches of all ranks,

$$E\Big[\tfrac1A \sum_{r,j} |c_{rj} g_{rj}|^2\Big] = |G|^2 + \frac{\operatorname{tr}\Sigma}
{A/S}, \qquad E\Big[\tfrac{W^2}{C^2} |\bar g|^2\Big] = |G|^2 + \frac{\operatorname{tr}
\Sigma}{C^2/S},$$

that is $|G_{small}|^2$ at $B_{small} = A/S$ tokens and $|G_{big}|^2$ at
$B_{big} = C^2/S$ tokens (the estimator of `empirical_batch.measure.tracker`), from
which App. A.1 of McCandlish et al. (2018) gives the unbiased

$$|G|^2 = \frac{B_{big}|G_{big}|^2 - B_{small}|G_{small}|^2}{B_{big} - B_{small}},
\qquad \operatorname{tr}\Sigma = \frac{|G_{small}|^2 - |G_{big}|^2}{1/B_{small} -
1/B_{big}},$$

and $B_{simple} = \operatorname{tr}\Sigma / |G|^2$ per token. The sizes are counted in
``pre_step`` from the batch the trainer hands over, with OLMo-core's own ``get_labels``
and ``split_batch``; the number of backward passes the hooks saw must equal the number
of micro-batches (a step that differs is an error, not a guess).

**Parallelism.** One process (no data parallelism; $k \ge 2$ micro-batches per step, a
step with one backward pass is skipped and counted), or DDP: OLMo-core's
``dp_config=ddp`` (``replicate``) or a model wrapped in torch's
``DistributedDataParallel``, over the trainer's ``dp_process_group``. Sharded
parameters (FSDP, HSDP: ``DTensor`` parameters) are refused, since the micro-batch
gradients of a sharded parameter are not visible to a parameter hook; so are tensor,
context and expert parallelism, ``TransformerPipelineTrainModule`` and
``OLMoDDPTrainModule``.

**Checkpoints.** The callback's ``state_dict`` (the estimator, the counters and the
noise-log rows) is saved in the trainer state of every checkpoint and checked when
loaded, so a resumed run continues its log.
"""

from __future__ import annotations

from typing import Any

from .._optional import optional_import

with optional_import(
    "torch", "olmo_core", by="empirical_batch.integrations.olmo_core", extra="olmo-core"
):
    import torch
    import torch.distributed as dist
    from olmo_core.data.utils import get_labels, split_batch
    from olmo_core.train.callbacks import Callback
    from olmo_core.train.common import TRAIN_CE_LOSS_METRIC
    from olmo_core.train.train_module import (
        BasicTrainModule,
        OLMoDDPTrainModule,
        TransformerPipelineTrainModule,
    )
    from torch.distributed._composable.replicate import DDP as ReplicateDDP
    from torch.distributed.tensor import DTensor
    from torch.nn.parallel import DistributedDataParallel

from ..errors import InputError, UsageError
from ..measure._common import (
    select_params,
)
from ..measure.log import NoiseScaleLog
from ._micro_hooks import MicroBatchNorms
from .engine import EngineNoiseScale
from .loggers import PREFIX

__all__ = ["OLMoCoreNoiseScale"]


class _MicroNorms(MicroBatchNorms):
    """The micro-batch norms (hooks) and the step's reduced gradient (``.grad`` at
    ``pre_optim_step``)."""

    def take(self, sizes, weights, examples: int):
        """Feed the step; returns ``((g2, trace_sigma) or None, examples, tokens)`` with
        the examples and tokens summed over the data-parallel group."""
        passes = self.take_passes(len(sizes), f"the batch has {len(sizes)} micro-batches")
        grads = [p.grad for _, p in self.params if p.grad is not None]
        stats = self.sums(passes, grads, sizes, weights, float(examples), float(sum(sizes)),
                          float(len(passes)))
        if self.world > 1:
            dist.all_reduce(stats, group=self.group)  # Σ over ranks (big is the same)
        micro_sum, big_sq, a, s, c, n_examples, n_tokens, n_passes = stats.tolist()
        if n_passes < 2:
            self.skipped["single_backward"] += 1
            return None, n_examples, n_tokens
        w = self.world
        out = self._feed(micro_sum / a, a / s, big_sq * w * w / (c * c), c * c / s, 1.0)
        return out, n_examples, n_tokens


class OLMoCoreNoiseScale(EngineNoiseScale, Callback):
    r"""An OLMo-core ``Callback`` measuring $B_{simple}$ per token (module notes).

    Parameters
    ----------
    params : iterable of parameters or names, optional
        Measure these parameters only (default: all trainable).
    log_path : str or path, optional
        Where data-parallel rank 0 writes the noise log (CSV) after training and after
        each checkpoint; ``None``: only in memory (`log`).
    record : bool
        Record the values with ``trainer.record_metric`` every measured step.
    beta, max_history, level, prefix
        As for the other collectors.
    """

    def __init__(
        self,
        *,
        params=None,
        log_path=None,
        record: bool = True,
        beta: float = 0.99,
        max_history: int | None = None,
        level: float = 0.95,
        prefix: str = PREFIX,
    ):
        self._params_arg = params
        self.log_path = log_path
        self.record = bool(record)
        self.beta = beta
        self.max_history = max_history
        self.world_size = 1
        self._sizes: list[int] = []
        self._weights: list[float] = []
        self._examples = 0
        self._init_log(unit="tokens", level=level, prefix=prefix)
        # no parameters until pre_train: the estimator (state_dict, load_state_dict) is
        # usable before, and pre_train carries it over to the collector with hooks
        self.collector = _MicroNorms([], None, 1, beta, max_history)

    def __repr__(self) -> str:
        return (
            f"OLMoCoreNoiseScale({self.world_size} data-parallel ranks, "
            f"steps={self.estimator.steps})"
        )

    # the trainer's hooks -------------------------------------------------------------

    def pre_train(self):
        """Check the train module's parallelism and put the gradient hooks on."""
        if self.collector.params:
            return  # fit() called again: the hooks are in place
        module = self.trainer.train_module
        if isinstance(module, (TransformerPipelineTrainModule, OLMoDDPTrainModule)):
            raise InputError(
                f"{type(module).__name__} is not supported: OLMoCoreNoiseScale "
                "measures TransformerTrainModule or BasicTrainModule on one "
                "process or under DDP (pipeline stages and OLMo-DDP's grouped "
                "reductions split the gradient)"
            )
        model = getattr(module, "model", None)
        if not isinstance(model, torch.nn.Module) or not hasattr(module, "rank_microbatch_size"):
            raise InputError(
                "OLMoCoreNoiseScale needs a train module with one model and a "
                "rank_microbatch_size (TransformerTrainModule, "
                f"BasicTrainModule), got {type(module).__name__}"
            )
        split = [k for k in ("tp", "cp", "ep") if getattr(module, f"{k}_enabled", False)]
        if split:
            raise InputError(
                f"{', '.join(k.upper() for k in split)} parallelism splits the model or the "
                "sequence over ranks: OLMoCoreNoiseScale measures one process or DDP "
                "(dp_config name 'ddp')"
            )
        if any(isinstance(p, DTensor) for p in model.parameters()):
            raise InputError(
                "the model's parameters are sharded (FSDP or HSDP): OLMoCoreNoiseScale "
                "measures one process or DDP (dp_config name 'ddp')"
            )
        group = self.trainer.dp_process_group
        world = dist.get_world_size(group) if dist.is_available() and dist.is_initialized() else 1
        if world > 1 and not isinstance(model, (DistributedDataParallel, ReplicateDDP)):
            raise InputError(
                f"{world} data-parallel ranks but the model's gradients are not "
                "all-reduced by DDP (OLMo-core's dp_config name 'ddp', or torch's "
                f"DistributedDataParallel); got {type(model).__name__}"
            )
        inner = model.module if isinstance(model, DistributedDataParallel) else model
        old = self.collector
        self.world_size = world
        self.collector = _MicroNorms(
            select_params(inner, self._params_arg), group, world, self.beta, self.max_history
        )
        self.collector._estimator = old._estimator
        self.collector.skipped = old.skipped

    def pre_step(self, batch):
        """Count the micro-batches of this rank's batch and their loss tokens."""
        self.collector.clear()  # the dry run's passes, or those of a skipped step
        module: Any = self.trainer.train_module  # checked in pre_train
        ignore = getattr(module, "label_ignore_index", -100)
        labels = batch["labels"] if "labels" in batch else get_labels(batch, ignore)
        seq_len = int(batch["input_ids"].shape[1])
        per_micro = int(module.rank_microbatch_size) // seq_len
        parts = split_batch({"labels": labels, "input_ids": batch["input_ids"]}, per_micro)
        sizes = [int((p["labels"] != ignore).sum()) for p in parts]
        total = sum(sizes)
        mask = batch.get("instance_mask")
        if mask is not None and not isinstance(module, BasicTrainModule):
            # TransformerTrainModule counts masked instances' tokens in the divisor
            total += int((~mask).sum()) * int(labels.shape[1])
        if total <= 0 or any(n <= 0 for n in sizes):
            raise InputError(
                f"micro-batches with {sizes} loss tokens: every micro-batch "
                "needs at least one token that is not ignored"
            )
        self._sizes = sizes
        self._weights = [n / total for n in sizes]
        self._examples = int(batch["input_ids"].shape[0])

    def pre_optim_step(self):
        """Feed the step (its gradients are accumulated and reduced; not yet clipped),
        append a row to `log` and record the values."""
        if not self._sizes:
            raise UsageError(
                "pre_optim_step without pre_step: the callback must be "
                "attached to the trainer that trains"
            )
        sizes, weights = self._sizes, self._weights
        self._sizes, self._weights = [], []
        out, examples, tokens = self.collector.take(sizes, weights, self._examples)
        loss = self.trainer.get_metric(TRAIN_CE_LOSS_METRIC)
        self._measured(examples, tokens, loss=loss)
        if self.record:
            for name, value in self.values().items():
                self.trainer.record_metric(name, value, reduce_type=None)
        return out

    def post_checkpoint_saved(self, path):
        del path
        self._write_log()

    def post_train(self):
        self._write_log()

    def _write_log(self) -> None:
        if self.log_path is None or not self.log.rows:
            return
        if (
            dist.is_available()
            and dist.is_initialized()
            and dist.get_rank(self.collector.group) != 0
        ):
            return
        # post_checkpoint_saved may run in the trainer's checkpointing thread while the
        # next steps append rows: write a copy of the rows so far
        snapshot = NoiseScaleLog(level=self.log.level, unit=self.log.unit)
        snapshot.rows = [dict(r) for r in list(self.log.rows)]
        snapshot.to_csv(self.log_path)

    def remove(self) -> None:
        """Remove the gradient hooks (the estimates stay readable)."""
        self.collector.remove()
