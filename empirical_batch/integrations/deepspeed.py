r"""$B_{simple}$ in a DeepSpeed engine, ZeRO stages 0–2 (needs ``deepspeed``).

Usage (two added lines: the collector, and its `DeepSpeedNoiseScale.step` between
``engine.backward`` and ``engine.step``)::

    engine, *_ = deepspeed.initialize(model=model, config=config, ...)
    gns = DeepSpeedNoiseScale(engine)
    for batch in data:
        loss = loss_fn(engine(batch["x"]), batch["y"])
        engine.backward(loss)
        gns.step(loss=loss)        # every micro-batch; feeds at the boundary
        engine.step()

**What is measured.** A gradient hook on every trainable parameter takes the squared
norm of each micro-batch's local gradient as autograd hands it over, before DeepSpeed
accumulates, reduces or partitions it (DeepSpeed scales each micro-batch loss by
$1/k$ for ``gradient_accumulation_steps`` $k$). At the micro-batch where
``engine.is_gradient_accumulation_boundary()`` is true, ``safe_get_full_grad`` gives
each parameter's gradient averaged over the data-parallel group (ZeRO 1–2 assemble it
from their partitions; a collective every rank joins). So the $W k$ micro-batches of
$b$ examples of all data-parallel ranks are the small batches and the step's
$W k b$ examples the big one: the estimator of `empirical_batch.measure.tracker` with
sizes $b$ and weights $1/k$, over the data-parallel group only
(``engine.data_parallel_group``, ``engine.dp_world_size``).

**Tokens.** ``step(tokens=n)`` makes the noise scale per token: with
``token_weighted=True`` each micro-batch loss is its sum over tokens divided by the
tokens $N$ of the rank's accumulated batch (weights $n_j/(N k)$), otherwise each is its
own token mean (weights $1/k$).

**The adaptive loop.** `DeepSpeedNoiseScale.set_batch` changes the global batch through
``engine.set_train_batch_size`` (the micro-batch stays, the accumulation steps change)
and moves the collector's $k$ with it.

Pitfalls: the fp16/bf16 loss scale is divided out with ``loss_scale=`` (DeepSpeed's
``engine.optimizer.cur_scale`` when dynamic loss scaling is on); ZeRO stage 3 partitions
the parameters themselves and is refused; with pipeline or tensor parallelism each
tensor-parallel shard is counted by its own rank — use ``params=`` to measure the
replicated parameters only.
"""

from __future__ import annotations

from .._optional import optional_import

with optional_import("torch", "deepspeed", by="empirical_batch.integrations.deepspeed",
                     extra="deepspeed"):
    import deepspeed  # noqa: F401
    import torch.distributed as dist
    from deepspeed.utils import safe_get_full_grad

from ..errors import InputError, UsageError
from ..measure._common import (
    check_batch_size,
    resolve_scale,
    select_params,
)
from ._micro_hooks import MicroBatchNorms
from .engine import EngineNoiseScale
from .loggers import PREFIX

__all__ = ["DeepSpeedNoiseScale"]


class _MicroNorms(MicroBatchNorms):
    """The micro-batch norms (hooks) and the reduced gradient at the boundary
    (``safe_get_full_grad``)."""

    def take(self, sizes, weights, scale: float):
        passes = self.take_passes(len(sizes), f"step() was called {len(sizes)} times since "
                                              "the last boundary")
        grads = [safe_get_full_grad(p) for _, p in self.params]
        stats = self.sums(passes, [g for g in grads if g is not None], sizes, weights)
        dist.all_reduce(stats, group=self.group)  # Σ over ranks (big is the same on each)
        w, n_passes = self.world, len(passes)

        def finish(values):
            micro_sum, big_sq, a, s, c = values
            if n_passes * w < 2:
                self.skipped["single_backward"] += 1
                return None
            return self._feed(micro_sum / a, a / s, big_sq * w * w / (c * c), c * c / s,
                              scale)

        return self._defer(stats, finish)


class DeepSpeedNoiseScale(EngineNoiseScale):
    r"""Measure $B_{simple}$ in a ``deepspeed`` engine (ZeRO stage 0, 1 or 2).

    Parameters
    ----------
    engine : deepspeed.DeepSpeedEngine
        What ``deepspeed.initialize`` returned first.
    micro_batch_size : int, optional
        Examples per micro-batch per rank (default: the engine's
        ``train_micro_batch_size_per_gpu()``).
    token_weighted : bool
        Each micro-batch loss is a sum over its tokens divided by the rank's tokens of
        the accumulated batch (pass ``step(tokens=...)``).
    params : iterable of parameters or names, optional
        Measure these parameters only (default: all trainable).
    beta, max_history, level, prefix
        As for the other collectors.
    """

    def __init__(self, engine, micro_batch_size: int | None = None, *, beta: float = 0.99,
                 token_weighted: bool = False, params=None, max_history: int | None = None,
                 level: float = 0.95, prefix: str = PREFIX):
        if not hasattr(engine, "is_gradient_accumulation_boundary"):
            raise InputError("engine must be a deepspeed engine (deepspeed.initialize), got "
                             f"{type(engine).__name__}")
        stage = int(engine.zero_optimization_stage())
        if stage > 2:
            raise InputError(f"ZeRO stage {stage} partitions the parameters: stages 0-2 "
                             "are supported")
        self.engine = engine
        self.stage = stage
        self.micro_batch_size = check_batch_size(
            micro_batch_size or engine.train_micro_batch_size_per_gpu(), "micro_batch_size")
        self.token_weighted = bool(token_weighted)
        self.world_size = int(engine.dp_world_size)
        group = getattr(engine, "data_parallel_group", None)
        self.collector = _MicroNorms(select_params(engine.module, params), group,
                                     self.world_size, beta, max_history)
        self._sizes: list[int] = []
        self._tokens: list[int] = []
        self._init_log(unit="examples", level=level, prefix=prefix)

    def __repr__(self) -> str:
        return (f"DeepSpeedNoiseScale(ZeRO stage {self.stage}, {self.world_size} data-"
                f"parallel ranks, {self.k} micro-batches per step, "
                f"steps={self.estimator.steps})")

    @property
    def k(self) -> int:
        """The engine's gradient accumulation steps."""
        return int(self.engine.gradient_accumulation_steps())

    def step(self, examples: int | None = None, *, tokens: int | None = None, loss=None,
             loss_scale=None):
        """Call after ``engine.backward(loss)`` for every micro-batch (before
        ``engine.step()``). At the accumulation boundary feeds the estimator and appends
        a row to `log`; returns ``(g2, trace_sigma)`` there, else ``None``."""
        self._count_micro(examples, tokens)
        if not self.engine.is_gradient_accumulation_boundary():
            return None
        sizes, toks = self._sizes, self._tokens
        self._sizes, self._tokens = [], []
        if toks and len(toks) != len(sizes):
            raise InputError("pass tokens= for every micro-batch of a step or for none")
        if toks and self.log.unit != "tokens":
            if self.log.rows:
                raise InputError("tokens= was given for a step after steps without it")
            self.log.unit = "tokens"
        measured = toks or sizes
        k = self.k
        weights = [n / (sum(toks) * k) for n in toks] if self.token_weighted else \
            [1.0 / k] * len(measured)
        scale = resolve_scale(loss_scale, None)
        out = self.collector.take(measured, weights, scale)
        w = self.world_size
        self._measured(sum(sizes) * w, sum(toks) * w if toks else None, loss=loss)
        return out

    def set_batch(self, global_batch: int) -> int:
        """Set the engine's global batch (``engine.set_train_batch_size``: the micro-batch
        stays, the accumulation steps change); returns the new accumulation steps."""
        b = check_batch_size(global_batch, "global_batch")
        per_step = self.micro_batch_size * self.world_size
        if b % per_step:
            raise InputError(f"global batch {b} is not a whole number of micro-batches of "
                             f"{self.micro_batch_size} on {self.world_size} ranks")
        if self._sizes:
            raise UsageError("set_batch() inside an accumulation: call it after "
                             "engine.step() at a boundary")
        self.engine.set_train_batch_size(b)
        return self.k

    def remove(self) -> None:
        """Remove the gradient hooks (the estimates stay readable)."""
        self.collector.remove()

