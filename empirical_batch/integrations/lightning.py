"""$B_{simple}$ inside a ``lightning`` training run (needs ``lightning``)."""

from __future__ import annotations

from typing import Any

from .._optional import optional_import

with optional_import("torch", "lightning", by="empirical_batch.integrations.lightning",
                     extra="lightning"):
    import lightning as L

from ..errors import InputError
from ..estimators import GNSEstimator
from ..measure import GradientNoiseScale, PerExampleNoiseScale
from ..measure._common import checked_skipped
from .adaptive import GrowthCallback, check_schedulers, on_examples
from .loggers import PREFIX
from .steps import (
    LOSS_NORMALIZATIONS,
    CallbackValues,
    StepAccount,
    batch_examples,
    check_resumed_beta,
    token_rule_of,
)

__all__ = ["AdaptiveBatchCallback", "NoiseScaleCallback"]


class NoiseScaleCallback(CallbackValues, L.Callback):
    r"""Measure $B_{simple}$ and log it with ``pl_module.log_dict`` (so it reaches every
    logger the ``Trainer`` has).

    With ``Trainer(accumulate_grad_batches=k)``, ``k >= 2``, the micro-batches of the
    accumulation (`empirical_batch.measure.GradientNoiseScale`), each with the size of
    the batch Lightning passed to ``on_train_batch_start`` (a ragged epoch-end step of
    4 and 1 examples is measured as such; Lightning divides every micro-batch loss by
    ``k``). When the batches carry integer ``labels`` (-100 for padding) and the loss is
    the mean over each micro-batch's loss tokens, the step is measured per token: with
    $n_j$ loss tokens in micro-batch $j$ the step's loss is
    $\frac1k\sum_j \frac{1}{n_j}\sum_{t\in j}\ell_t$, so the sizes are the $n_j$ and
    the weights $1/k$ (`empirical_batch.integrations.steps`; ``b_simple`` is then
    divided by the loss tokens per sequence). With ``k = 1`` the per-example norms of each batch
    (`empirical_batch.measure.PerExampleNoiseScale`; BatchNorm in training mode is
    refused at every step). Norms are taken at the backward passes:
    ``gradient_clip_val`` and mixed-precision unscaling do not change the estimate; an
    epoch-end step with one backward pass, or whose sizes cannot be read, is skipped and
    counted. The logged keys are those of
    `empirical_batch.integrations.steps.callback_values` (``b_simple`` in examples,
    ``b_simple_tokens`` when the batches carry integer ``labels``, the standard error
    and interval, ``examples``/``tokens`` counters, ``ema_examples``, per-layer values).
    The estimator's state and the counters ride in Lightning's checkpoints
    (`state_dict`/`load_state_dict`).

    Parameters
    ----------
    loss_normalization : {"auto", "micro_batch_tokens", "examples"}
        What each micro-batch loss is a mean over: its loss tokens
        (``"micro_batch_tokens"``; a step whose batches have no integer ``labels`` is
        then skipped and counted as ``unknown_sizes``), its examples (``"examples"``), or
        ``"auto"``: tokens when every micro-batch of the step has integer ``labels`` of
        shape ``(B, T, ...)``, else examples (a run that switches is refused).
    token_rule : {"all", "shifted"}, optional
        Which labels the token mean runs over: every position not equal to -100
        (``"all"``) or ``labels[..., 1:]`` (``"shifted"``, a causal LM that shifts its
        targets itself). Default: the rule of a ``transformers`` model inside the module
        (``"shifted"`` for ``ForCausalLMLoss``), else ``"all"``.
    micro_batch_size : int, optional
        Examples per batch, used only for batches whose size cannot be read (no tensor
        in them); such steps are skipped and counted without it.
    beta : float, optional
        EMA decay of the estimator (default 0.99; on a resume without it, the
        checkpoint's): a time constant of $1/(1-\beta)$ steps (logged in
        examples as ``{prefix}ema_examples``).
    prefix : str
        Metric name prefix.
    max_history : int or None
        Per-step rows kept by the estimator (the last ones; ``None``: all).
    level : float
        Confidence level of the logged interval.
    per_module : bool
        Per-example mode: also log ``{prefix}layer/{name}/b_simple`` per layer.
    params : None or "layernorm"
        Per-example mode: ``"layernorm"`` measures the LayerNorm parameters only.
    """

    def __init__(self, micro_batch_size: int | None = None, *, beta: float | None = None,
                 prefix: str = PREFIX, max_history: int | None = 10_000,
                 level: float = 0.95, per_module: bool = False, params: str | None = None,
                 loss_normalization: str = "auto", token_rule: str | None = None):
        if params not in (None, "layernorm"):
            raise InputError(f"params must be None or 'layernorm', got {params!r}")
        if loss_normalization not in LOSS_NORMALIZATIONS:
            raise InputError(f"loss_normalization must be one of {LOSS_NORMALIZATIONS}, "
                             f"got {loss_normalization!r}")
        if token_rule not in (None, "all", "shifted"):
            raise InputError(f"token_rule must be None, 'all' or 'shifted', got "
                             f"{token_rule!r}")
        self.loss_normalization = loss_normalization
        self.token_rule = token_rule
        self.micro_batch_size = micro_batch_size
        self.beta = 0.99 if beta is None else beta
        self._beta_chosen = beta is not None
        self.prefix = prefix
        self.max_history = max_history
        self.level = level
        self.per_module = bool(per_module)
        self.params = params
        self.collector: GradientNoiseScale | PerExampleNoiseScale | None = None
        self.account = StepAccount()
        self._restored: dict | None = None

    def on_train_start(self, trainer, pl_module):
        if trainer.world_size > 1:
            raise InputError("NoiseScaleCallback measures single-process training; under "
                             "DDP use empirical_batch.measure.DDPNoiseScaleHook, under FSDP "
                             "FSDPNoiseScale")
        k = int(trainer.accumulate_grad_batches)
        if k >= 2:
            self.collector = GradientNoiseScale(
                pl_module, micro_batch_size=self.micro_batch_size or 1,
                accumulation_steps=k, beta=self.beta, max_history=self.max_history)
        else:
            self.collector = PerExampleNoiseScale(pl_module, beta=self.beta,
                                                  max_history=self.max_history,
                                                  per_module=self.per_module,
                                                  params=self.params)
        if self._restored is not None:
            self._load(self._restored)
        self.account.loss_normalization = self.loss_normalization
        self.account.token_rule = self.token_rule or next(
            (r for r in map(token_rule_of, pl_module.modules()) if r is not None), "all")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.account.record(batch, examples=self.micro_batch_size)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        if self.collector is None:
            return
        if isinstance(self.collector, PerExampleNoiseScale):
            self.account.plan(lambda n: None, weighted=False)
            done = self.collector.step()
        else:
            k = int(trainer.accumulate_grad_batches)
            skip, sizes, weights = self.account.plan(lambda n: [1.0 / k] * n)
            try:
                done = self.collector.step(sizes or None, weights=weights, skip=skip)
            except InputError:  # backward passes and recorded batches disagree
                self.collector.skipped["unknown_sizes"] = \
                    self.collector.skipped.get("unknown_sizes", 0) + 1
                done = None
        if done is None:
            return
        values = self.values()
        if values:
            pl_module.log_dict(values, on_step=True, on_epoch=False)

    def on_train_end(self, trainer, pl_module):
        if self.collector is not None:
            self._restored = self.state_dict()
            self.collector.remove()

    def state_dict(self) -> dict[str, Any]:
        if self.collector is not None:
            return {**self.collector.state_dict(), "counters": self.account.state_dict()}
        return dict(self._restored or {})

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not state_dict:
            return
        if self.collector is None:
            checked_skipped(state_dict)  # refuse a bad state now, not at fit start
            GNSEstimator().load_state_dict(state_dict["estimator"])
            self.beta = check_resumed_beta(state_dict["estimator"], self.beta,
                                           self._beta_chosen)
            self._restored = state_dict
        else:
            self._load(state_dict)

    def _load(self, state: dict) -> None:
        assert self.collector is not None
        skipped = checked_skipped(state)
        self.beta = check_resumed_beta(state["estimator"], self.beta, self._beta_chosen)
        self.collector.estimator.load_state_dict(state["estimator"])  # checks first
        self.collector.skipped.update(skipped)
        if state.get("counters"):
            self.account.load_state_dict(state["counters"])


class AdaptiveBatchCallback(GrowthCallback, L.Callback):
    r"""Grow the global batch during ``trainer.fit`` as the measured noise scale grows,
    and move the learning rate with it (a closed loop; see
    `empirical_batch.integrations.adaptive` and `empirical_batch.schedule.online`).

    The batch is the dataloader's batch × ``trainer.accumulate_grad_batches``; a change
    doubles the accumulation (one or more times) at the first optimizer step where the
    batches of the epoch fill whole groups of the new size. The rates of the
    ``trainer.optimizers`` and the ``base_lrs`` of their schedulers are multiplied by the
    `empirical_batch.transfer.transfer` factor of ``lr_rule``. ``{prefix}batch_size``
    and ``{prefix}accumulation_steps`` are logged at every optimizer step; `changes`
    lists every change. Put it after the ``noise`` callback in ``callbacks=``.

    Schedulers that step per optimizer step (``"interval": "step"``) must be
    ``LambdaLR``: they run on examples seen (see
    `empirical_batch.integrations.adaptive`), so a decay reaches its end value when the
    epochs end and a run bounded by ``max_steps`` stops when the examples of
    ``max_steps`` starting batches are seen; epoch-interval schedulers are left alone.
    The loop's state (accumulation, pending change, changes, schedule clock) rides in
    Lightning's checkpoints (`state_dict`/`load_state_dict`), so
    ``trainer.fit(..., ckpt_path=...)`` continues as the uninterrupted run would.

    Parameters
    ----------
    noise : NoiseScaleCallback
        The measuring callback (needs ``accumulate_grad_batches >= 2``).
    rule : AdaptiveBatchRule, optional
        Default: ``AdaptiveBatchRule("doubling")``.
    lr_rule : str, optional
        `transfer`'s learning-rate rule; default: the run's optimizer's.
    optimizer : {"sgd", "adam", "adamw"}, optional
        Default: read from the run's optimizer (``torch.optim.SGD``, ``Adam``,
        ``AdamW``); one that names another optimizer than the run's is refused.
    """

    noise_type = NoiseScaleCallback

    def on_train_start(self, trainer, pl_module):
        if int(trainer.accumulate_grad_batches) < 2:
            raise InputError("AdaptiveBatchCallback measures the noise scale from the "
                             "micro-batches: set accumulate_grad_batches >= 2")
        per_step = [c.scheduler for c in trainer.lr_scheduler_configs
                    if c.interval == "step"]
        check_schedulers(per_step, what="the step-interval scheduler")
        self.growth.check_optimizers(trainer.optimizers)
        on_examples(per_step, self.growth)
        restored = self.growth.restored
        if restored is not None and restored.get("micro_batch_size"):
            self.growth.start(restored["micro_batch_size"], trainer.accumulate_grad_batches)
            trainer.accumulate_grad_batches = self.growth.accumulation

    def state_dict(self) -> dict[str, Any]:
        """The loop's state (`BatchGrowth.state_dict`), saved in checkpoints."""
        return self.growth.state_dict() if self.growth.accumulation else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict:
            self.growth.load_state_dict(state_dict)

    def _apply(self, trainer) -> None:
        if self.growth.ready():
            trainer.accumulate_grad_batches = self.growth.apply(
                trainer.global_step, trainer.optimizers,
                [c.scheduler for c in trainer.lr_scheduler_configs])

    def on_train_epoch_start(self, trainer, pl_module):
        self.growth.micro_in_epoch = self._micro_done(trainer) or 0
        self._apply(trainer)

    @staticmethod
    def _micro_done(trainer) -> int | None:
        """Lightning's count of the epoch's batches (restored on a resume)."""
        progress = getattr(getattr(trainer.fit_loop, "epoch_loop", None), "batch_progress",
                           None)
        return None if progress is None else int(progress.current.ready)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if not self.growth.accumulation:  # the micro-batch size: the first batch's
            size = batch_examples(batch) or self.noise.micro_batch_size
            if size is None:
                raise InputError("cannot read the batch size of the first batch: pass "
                                 "micro_batch_size= to the NoiseScaleCallback")
            self.growth.start(size, trainer.accumulate_grad_batches)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.growth.micro_in_epoch += 1
        done = self._micro_done(trainer)
        if done is not None:  # Lightning's own count (also after a resume)
            self.growth.micro_in_epoch = done
        if self.growth.micro_in_epoch % self.growth.accumulation:
            return  # not an optimizer step boundary of whole groups
        self.growth.after_step(trainer.global_step)
        self._apply(trainer)
        if 0 < trainer.max_steps <= self.growth.equivalent_step(trainer.global_step):
            trainer.should_stop = True  # the examples of max_steps starting batches
        pl_module.log_dict(self.growth.values(self.noise.prefix), on_step=True,
                           on_epoch=False)
