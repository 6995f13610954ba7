r"""$B_{simple}$ in a Hugging Face Accelerate loop (needs ``accelerate``).

Usage (two added lines: the collector, and its `AccelerateNoiseScale.step` after
``accelerator.backward``)::

    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    gns = AccelerateNoiseScale(accelerator, model, micro_batch_size=8)
    for batch in data:
        with accelerator.accumulate(model):
            loss = loss_fn(model(batch["x"]), batch["y"])
            accelerator.backward(loss)
            gns.step(loss=loss)          # feeds the estimator when sync_gradients
            optimizer.step()
            optimizer.zero_grad()
    if accelerator.is_main_process:
        gns.log.to_csv("gns.csv")         # a noise log: empirical-batch schedule --log

**One process** (``accelerator.num_processes == 1``): the micro-batches of
``accelerator.accumulate`` (``gradient_accumulation_steps`` $k \ge 2$), through the
parameter hooks of `empirical_batch.measure.GradientNoiseScale`; ``accelerator.backward``
divides each micro-batch loss by $k$, so micro-batch $j$ enters ``.grad`` with weight
$1/k$ (also in the short step at the end of a data loader). The step is fed at the
micro-batch where ``accelerator.sync_gradients`` is true.

**DDP** (``accelerator.prepare`` returned a ``DistributedDataParallel`` model): a
communication hook on the prepared model (`empirical_batch.measure.DDPNoiseScaleHook`)
takes each rank's local gradient of its $k b$ examples before the all-reduce and the
average after it: $b_{small} = k b$, $b_{big} = W k b$ over the $W$ ranks of the
model's process group (the data-parallel group: nothing else is counted).

**Tokens.** ``step(tokens=n)`` gives a micro-batch's loss tokens; the noise scale is
then per token. With ``token_weighted=True`` (one process) the loss of each micro-batch
is its sum over tokens divided by the tokens $N$ of the accumulated batch, so
micro-batch $j$ has weight $n_j/N$ (the estimator of
`empirical_batch.measure.tracker`); otherwise each micro-batch loss is its own token
mean (weight $1/k$).

Pitfalls: with ``GradientAccumulationPlugin(sync_each_batch=True)`` DDP all-reduces
every micro-batch (refused: measure with ``sync_each_batch=False``); a DDP
communication hook set through ``DistributedDataParallelKwargs(comm_hook=...)`` and this
collector's hook cannot both be registered; under DDP every rank must hold the same
number of examples per step.
"""

from __future__ import annotations

from .._optional import optional_import

with optional_import("torch", "accelerate", by="empirical_batch.integrations.accelerate",
                     extra="accelerate"):
    import accelerate  # noqa: F401
    import torch
    from torch.nn.parallel import DistributedDataParallel

from ..errors import InputError
from ..measure import DDPNoiseScaleHook, GradientNoiseScale
from ..measure._common import check_batch_size
from .engine import EngineNoiseScale
from .loggers import PREFIX

__all__ = ["AccelerateNoiseScale"]


class AccelerateNoiseScale(EngineNoiseScale):
    r"""Measure $B_{simple}$ in a loop driven by an ``accelerate.Accelerator``.

    Parameters
    ----------
    accelerator : accelerate.Accelerator
    model : torch.nn.Module
        The model ``accelerator.prepare`` returned (a ``DistributedDataParallel`` under
        DDP).
    micro_batch_size : int
        Examples per micro-batch on each process (a step may pass its own with
        ``step(examples=...)``).
    beta : float
        EMA decay of the estimator.
    token_weighted : bool
        One process: each micro-batch loss is summed over its tokens and divided by
        the tokens of the accumulated batch (pass ``step(tokens=...)``).
    max_history : int, optional
        Per-step rows kept by the estimator.
    level : float
        Confidence level of the interval in `log`.
    """

    def __init__(self, accelerator, model, micro_batch_size: int, *, beta: float = 0.99,
                 token_weighted: bool = False, max_history: int | None = None,
                 level: float = 0.95, prefix: str = PREFIX):
        if not hasattr(accelerator, "sync_gradients"):
            raise InputError("accelerator must be an accelerate.Accelerator, got "
                             f"{type(accelerator).__name__}")
        self.accelerator = accelerator
        self.micro_batch_size = check_batch_size(micro_batch_size, "micro_batch_size")
        self.k = int(accelerator.gradient_accumulation_steps)
        self.token_weighted = bool(token_weighted)
        self.distributed = isinstance(model, DistributedDataParallel)
        if self.distributed:
            plugin = getattr(accelerator.gradient_state, "plugin_kwargs", {}) or {}
            if self.k > 1 and plugin.get("sync_each_batch", False):
                raise InputError("sync_each_batch=True all-reduces every micro-batch: the "
                                 "DDP hook needs one all-reduce per step "
                                 "(GradientAccumulationPlugin(sync_each_batch=False))")
            if self.token_weighted:
                raise InputError("token_weighted=True is for one process; under DDP every "
                                 "rank's micro-batches are weighted 1/k")
            self.world_size = int(torch.distributed.get_world_size(model.process_group))
            self.collector = DDPNoiseScaleHook(
                model, local_batch_size=self.k * self.micro_batch_size, beta=beta,
                max_history=max_history)
        else:
            if int(accelerator.num_processes) > 1:
                raise InputError("with several processes pass the model accelerator.prepare "
                                 "returned (DistributedDataParallel); other wrappers (FSDP, "
                                 "DeepSpeed) have their own collectors")
            if self.k < 2:
                raise InputError("one process needs gradient_accumulation_steps >= 2 (two "
                                 "batch sizes); without accumulation use "
                                 "empirical_batch.measure.PerExampleNoiseScale")
            self.world_size = 1
            self.collector = GradientNoiseScale(
                model, micro_batch_size=self.micro_batch_size, accumulation_steps=self.k,
                beta=beta, max_history=max_history)
        self._sizes: list[int] = []
        self._tokens: list[int] = []
        self._init_log(unit="examples", level=level, prefix=prefix)

    def __repr__(self) -> str:
        how = f"DDP over {self.world_size} ranks" if self.distributed else "one process"
        return (f"AccelerateNoiseScale({how}, {self.k} micro-batches per step, "
                f"steps={self.estimator.steps})")

    def step(self, examples: int | None = None, *, tokens: int | None = None, loss=None):
        """Call after ``accelerator.backward(loss)`` for every micro-batch, inside
        ``accelerator.accumulate(model)``.

        Records this micro-batch (``examples`` on this process, default
        ``micro_batch_size``; its loss ``tokens``); where ``accelerator.sync_gradients``
        is true (the step's last micro-batch) feeds the estimator and appends a row to
        `log`. Returns the step's ``(g2, trace_sigma)``, or ``None`` (not the last
        micro-batch, or a skipped step).
        """
        self._count_micro(examples, tokens)
        if not self.accelerator.sync_gradients:
            return None
        sizes, toks = self._sizes, self._tokens
        self._sizes, self._tokens = [], []
        if toks and len(toks) != len(sizes):
            raise InputError("pass tokens= for every micro-batch of a step or for none")
        per_token = bool(toks)
        if per_token and self.log.unit != "tokens":
            if self.log.rows:
                raise InputError("tokens= was given for a step after steps without it")
            self.log.unit = "tokens"
        measured = toks if per_token else sizes
        if self.distributed:
            out = self.collector.step(local_batch_size=sum(measured))
        else:
            # the loss is Σ_tokens / N, and accelerator.backward divides it by k
            weights = [n / (sum(toks) * self.k) for n in toks] if self.token_weighted \
                else None
            out = self.collector.step(measured, weights=weights)
        w = self.world_size
        self._measured(sum(sizes) * w, sum(toks) * w if per_token else None, loss=loss)
        return out

    def remove(self) -> None:
        """Remove the parameter hooks (one process); DDP keeps its communication hook."""
        if not self.distributed:
            self.collector.remove()
