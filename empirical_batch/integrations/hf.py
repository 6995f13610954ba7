"""$B_{simple}$ inside a Hugging Face ``transformers.Trainer`` (needs ``transformers``).

Usage::

    from empirical_batch.integrations.hf import install

    trainer = Trainer(model, args, train_dataset=data)
    install(trainer)  # first in the callback list: every report_to sees the values
    trainer.train()
"""

from __future__ import annotations

from typing import Any

from .._optional import optional_import

with optional_import("torch", "transformers", by="empirical_batch.integrations.hf",
                     extra="hf"):
    import torch
    from transformers import TrainerCallback
    from transformers.trainer_callback import ExportableState

from ..errors import InputError
from ..measure import GradientNoiseScale, PerExampleNoiseScale
from ..schedule.online import AdaptiveBatchRule
from .adaptive import GrowthCallback, check_schedulers, on_examples
from .loggers import PREFIX
from .steps import CallbackValues, StepAccount, check_resumed_beta, token_rule_of

__all__ = ["AdaptiveBatchCallback", "NoiseScaleCallback", "install", "install_adaptive"]

_MODES = ("auto", "micro_batch", "per_example")


class NoiseScaleCallback(CallbackValues, TrainerCallback, ExportableState):
    r"""Measure $B_{simple}$ during ``Trainer.train()`` and add it to the Trainer's logs.

    With ``gradient_accumulation_steps >= 2`` it uses the micro-batches of the
    accumulation (`empirical_batch.measure.GradientNoiseScale`), each with the size of
    the batch the Trainer passed to the model (a ragged step of 4 and 1 sequences is
    measured as such; see `empirical_batch.integrations.steps`) and, when the Trainer
    normalises the loss by the tokens of the accumulated batch (``num_items_in_batch``),
    per token with the weights $n_j/N$; with one backward pass per step, the
    per-example norms of the batch (`empirical_batch.measure.PerExampleNoiseScale`,
    which covers the ``nn.Linear``/``Conv1D``/``nn.Embedding``/``nn.LayerNorm`` layers
    and says how much of the model that is; BatchNorm in training mode is refused at
    every step). Both take their norms at the backward passes, so the Trainer's
    gradient clipping (``max_grad_norm``, on by default) and AMP unscaling do not change
    the estimate; an epoch-end step with a single backward pass, or whose sizes cannot
    be read, is skipped and counted.

    At every log the keys of `empirical_batch.integrations.steps.callback_values`
    (``{prefix}b_simple`` in sequences, ``b_simple_tokens``, ``b_simple_se``, the
    interval, ``examples``/``tokens`` counters, ``ema_examples``, …) join the Trainer's
    logs *and* ``trainer.state.log_history`` (hence ``trainer_state.json``). Callbacks
    run in order and a value added after the reporting callbacks (TensorBoard, W&B, …)
    is lost: use `install`, or put this callback first in ``callbacks=``.

    The estimator's state is saved in the Trainer's checkpoints (``ExportableState``)
    and restored by ``trainer.train(resume_from_checkpoint=...)``: with default
    arguments from the checkpoint's ``trainer_state.json``, and with
    ``restore_callback_states_from_checkpoint=True`` into the callback `install`
    returned (the Trainer would otherwise replace it by a new instance).

    Parameters
    ----------
    beta : float, optional
        EMA decay of the estimator (default 0.99; on a resume without it, the
        checkpoint's): a time constant of $1/(1-\beta)$ steps, logged in
        examples as ``{prefix}ema_examples`` (attribute `ema_examples`).
    prefix : str
        Key prefix in the logs.
    mode : {"auto", "micro_batch", "per_example"}
        ``"auto"``: micro-batches when accumulating, per-example norms otherwise.
    max_history : int or None
        Per-step rows kept by the estimator (the last ones; ``None``: all). Bounded by
        default because the state rides in every checkpoint.
    level : float
        Confidence level of the logged interval ``b_simple_low``/``b_simple_high``.
    per_module : bool
        Per-example mode: also log ``{prefix}layer/{name}/b_simple`` per layer.
    params : None or "layernorm"
        Per-example mode: ``"layernorm"`` measures the LayerNorm parameters only (Gray et
        al.'s proxy).
    """

    def __init__(self, *, beta: float | None = None, prefix: str = PREFIX, mode: str = "auto",
                 max_history: int | None = 10_000, level: float = 0.95,
                 per_module: bool = False, params: str | None = None):
        if mode not in _MODES:
            raise InputError(f"mode must be one of {_MODES}, got {mode!r}")
        if params not in (None, "layernorm"):
            raise InputError(f"params must be None or 'layernorm', got {params!r}")
        if not 0.0 < level < 1.0:
            raise InputError(f"level must be in (0, 1), got {level!r}")
        self.beta = 0.99 if beta is None else beta
        self._beta_chosen = beta is not None
        self.prefix = prefix
        self.mode = mode
        self.max_history = max_history
        self.level = level
        self.per_module = bool(per_module)
        self.params = params
        self.collector: GradientNoiseScale | PerExampleNoiseScale | None = None
        self.account = StepAccount()
        self.estimator_state: dict | None = None  # restored from a checkpoint
        self.counters: dict | None = None  # restored from a checkpoint
        self._hook = None
        self.superseded = False  # replaced by the instance `install` returned
        self.adaptive: dict | None = None  # an AdaptiveBatchCallback's state, restored
        self._growth = None  # the BatchGrowth of the AdaptiveBatchCallback it feeds

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.superseded:  # its restored state moved into the installed callback
            return
        if model is None:
            raise InputError("the Trainer passed no model to NoiseScaleCallback")
        if int(getattr(args, "world_size", 1)) > 1:
            raise InputError("NoiseScaleCallback measures single-process training; under "
                             "DDP use empirical_batch.measure.DDPNoiseScaleHook, under FSDP "
                             "FSDPNoiseScale")
        k = int(args.gradient_accumulation_steps)
        mode = self.mode if self.mode != "auto" else ("micro_batch" if k >= 2 else
                                                      "per_example")
        if mode == "micro_batch":
            if k < 2:
                raise InputError("mode='micro_batch' needs gradient_accumulation_steps >= 2, "
                                 f"got {k}")
            self.collector = GradientNoiseScale(
                model, micro_batch_size=args.per_device_train_batch_size,
                accumulation_steps=k, beta=self.beta, max_history=self.max_history)
        else:
            if k != 1:
                raise InputError("mode='per_example' needs one backward pass per step "
                                 f"(gradient_accumulation_steps=1), got {k}")
            self.collector = PerExampleNoiseScale(model, beta=self.beta,
                                                  max_history=self.max_history,
                                                  per_module=self.per_module,
                                                  params=self.params)
        self.account = StepAccount(token_rule=token_rule_of(model))
        if self.estimator_state is None and state is not None:
            self._from_trainer_state(state)
        if self.estimator_state is not None:
            self.beta = check_resumed_beta(self.estimator_state["estimator"], self.beta,
                                           self._beta_chosen)
            self.collector.estimator.load_state_dict(self.estimator_state["estimator"])
            self.collector.skipped.update(self.estimator_state["skipped"])
        if self.counters:
            self.account.load_state_dict(self.counters)
        self._hook = model.register_forward_pre_hook(self._record, with_kwargs=True)

    def _from_trainer_state(self, state) -> None:
        """Resume with default arguments: this class's entry of the checkpoint's
        ``stateful_callbacks`` (the Trainer restores callbacks only when asked)."""
        saved = (getattr(state, "stateful_callbacks", None) or {}).get(type(self).__name__)
        for entry in saved if isinstance(saved, list) else [saved]:
            if isinstance(entry, dict) and entry.get("args", {}).get("prefix") == self.prefix:
                attributes = entry.get("attributes", {})
                self.estimator_state = attributes.get("estimator_state")
                self.counters = attributes.get("counters")
                return

    def _record(self, module, args, kwargs):
        if not (module.training and torch.is_grad_enabled()):
            return
        batch = dict(kwargs) if kwargs else {}
        if args:
            batch.setdefault("inputs", args[0])
        self.account.record(batch, kwargs.get("num_items_in_batch"))

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.collector is None:
            return
        if isinstance(self.collector, PerExampleNoiseScale):
            self.account.plan(lambda n: None, weighted=False)
            self.collector.step()
            return
        skip, sizes, weights = self.account.plan(lambda n: [1.0 / n] * n)
        # the Trainer divides a mean loss by the micro-batches of this very step
        try:
            self.collector.step(sizes or None, weights=weights, skip=skip)
        except InputError:  # backward passes and recorded forwards disagree
            self.collector.skipped["unknown_sizes"] = \
                self.collector.skipped.get("unknown_sizes", 0) + 1

    def on_log(self, args, state, control, logs=None, **kwargs):
        values = self.values()
        if logs is None or not values:
            return
        logs.update(values)
        # the Trainer appended a copy of the logs to its history before calling on_log;
        # the history (trainer_state.json, a noise log) also says what b_simple counts
        history = getattr(state, "log_history", None)
        if history and history[-1].get("step") == state.global_step:
            unit = "sequences" if f"{self.prefix}b_simple_tokens" in values else "examples"
            history[-1].update(values, **{f"{self.prefix}unit": unit})

    def on_train_end(self, args, state, control, **kwargs):
        if self.collector is not None:
            self.estimator_state = self.collector.state_dict()
            self.counters = self.account.state_dict()
            self.collector.remove()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    # ------------------------------------------------------------ checkpoint
    def state(self) -> dict[str, Any]:
        """What the Trainer writes into ``trainer_state.json`` (JSON: plain numbers)."""
        live = self.collector.state_dict() if self.collector is not None else \
            self.estimator_state
        counters = self.account.state_dict() if self.collector is not None else \
            self.counters
        growth = self._growth
        adaptive = growth.state_dict() if growth is not None and growth.accumulation else \
            self.adaptive
        return {"args": {"beta": self.beta, "prefix": self.prefix, "mode": self.mode,
                         "max_history": self.max_history, "level": self.level,
                         "per_module": self.per_module, "params": self.params},
                "attributes": {"estimator_state": live, "counters": counters,
                               "adaptive": adaptive}}


def install(trainer, **kwargs) -> NoiseScaleCallback:
    """Add a `NoiseScaleCallback` (``kwargs`` go to it) to ``trainer`` *first*, so that
    the reporting callbacks after it log its values; returns the callback.

    With ``restore_callback_states_from_checkpoint=True`` the Trainer replaces its
    callbacks by new instances on resume; the state restored into the new instance is
    moved into the returned callback, which stays first and keeps reporting."""
    cb = NoiseScaleCallback(**kwargs)
    trainer.callback_handler.callbacks.insert(0, cb)
    trainer.callback_handler.callbacks.insert(1, _KeepInstalled(trainer, cb))
    return cb


class _KeepInstalled(TrainerCallback):
    """Keeps the callback `install` returned in the Trainer, through public hooks only.

    On a resume with ``restore_callback_states_from_checkpoint=True`` the Trainer removes
    a stateful callback before ``on_train_begin`` and appends a new instance holding the
    checkpoint's state. At ``on_train_begin`` (this callback comes before that instance)
    the restored state moves into the installed callback, which goes back first in
    ``trainer.callback_handler.callbacks`` and starts; the new instance leaves the list
    and stays idle."""

    def __init__(self, trainer, installed: NoiseScaleCallback):
        self.trainer = trainer
        self.installed = installed

    def on_train_begin(self, args, state, control, **kwargs):
        cb = self.installed
        callbacks = self.trainer.callback_handler.callbacks
        if any(other is cb for other in callbacks):
            return
        for i, other in enumerate(callbacks):
            if type(other) is type(cb) and other.prefix == cb.prefix:
                cb.estimator_state, cb.counters = other.estimator_state, other.counters
                cb.adaptive = other.adaptive
                other.superseded = True
                del callbacks[i]
                callbacks.insert(0, cb)
                cb.on_train_begin(args, state, control, **kwargs)  # its turn has passed
                return


class AdaptiveBatchCallback(GrowthCallback, TrainerCallback):
    r"""Grow the global batch during ``Trainer.train()`` as the measured noise scale
    grows, and move the learning rate with it (a closed loop; see
    `empirical_batch.integrations.adaptive` and `empirical_batch.schedule.online`).

    The batch is ``per_device_train_batch_size × gradient_accumulation_steps``; a change
    doubles the accumulation steps (``args.gradient_accumulation_steps``, which the
    Trainer reads at every optimizer step) one or more times, at the first step boundary
    where the micro-batches of the epoch fill whole groups of the new size. The
    learning rate of the optimizer and the ``base_lrs`` of the Trainer's scheduler are
    multiplied by the `empirical_batch.transfer.transfer` factor of ``lr_rule``.
    ``{prefix}batch_size`` and ``{prefix}accumulation_steps`` join the logs and
    ``log_history``; `changes` lists every change.

    The Trainer's learning-rate schedule (a ``LambdaLR``, as every ``lr_scheduler_type``
    but ``reduce_lr_on_plateau``) runs on examples seen (see
    `empirical_batch.integrations.adaptive`): a decay reaches its end value when the
    epochs end, and a run bounded by ``max_steps`` stops when the examples of
    ``max_steps`` configured batches are seen.

    The loop's state rides in the checkpoints (in the `NoiseScaleCallback`'s entry of
    ``trainer_state.json``) and ``trainer.train(resume_from_checkpoint=...)`` continues
    with the accumulation steps, learning rate, schedule clock and changes of the
    checkpoint. The Trainer skips ``global_step × gradient_accumulation_steps``
    micro-batches of the epoch on a resume, which is not where a run stopped after a
    change; the callback has the data loader skip the micro-batches the run had really
    used instead. A resume it cannot place (a checkpoint in a later epoch than the
    Trainer counts, or whose epoch would end in a partial step) is refused with the
    reason.

    Parameters
    ----------
    noise : NoiseScaleCallback
        The installed measuring callback (needs ``gradient_accumulation_steps >= 2``).
    rule : AdaptiveBatchRule, optional
        Default: ``AdaptiveBatchRule("doubling")``.
    lr_rule : str, optional
        `transfer`'s learning-rate rule (``"linear"`` for SGD, ``"sqrt"`` for Adam, …);
        default: the run's optimizer's.
    optimizer : {"sgd", "adam", "adamw"}, optional
        Default: read from the run's optimizer (``torch.optim.SGD``, ``Adam``,
        ``AdamW``); one that names another optimizer than the run's is refused.
    """

    noise_type = NoiseScaleCallback

    def __init__(self, noise, rule: AdaptiveBatchRule | None = None, *,
                 lr_rule: str | None = None, optimizer: str | None = None):
        super().__init__(noise, rule, lr_rule=lr_rule, optimizer=optimizer)
        noise._growth = self.growth  # its checkpoint entry carries the loop's state
        self._skip: tuple | None = None  # (loader, micro-batches) of a resumed epoch
        self._ignore_data_skip: bool | None = None

    def _saved(self, state) -> dict | None:
        """The loop's state in the checkpoint a run resumes from (None: a new run)."""
        if not getattr(state, "global_step", 0):
            return None
        if self.noise.adaptive is not None:  # restored into the installed callback
            return self.noise.adaptive
        saved = (getattr(state, "stateful_callbacks", None) or {}).get(
            type(self.noise).__name__)
        for entry in saved if isinstance(saved, list) else [saved]:
            if isinstance(entry, dict) and entry.get("args", {}).get("prefix") == \
                    self.noise.prefix:
                return entry.get("attributes", {}).get("adaptive")
        return None

    def on_train_begin(self, args, state, control, **kwargs):
        if int(args.gradient_accumulation_steps) < 2:
            raise InputError("AdaptiveBatchCallback measures the noise scale from the "
                             "micro-batches: set gradient_accumulation_steps >= 2")
        scheduler = kwargs.get("lr_scheduler")
        check_schedulers([scheduler], what="the Trainer's scheduler")
        self.growth.check_optimizers([kwargs.get("optimizer")])
        configured = int(args.gradient_accumulation_steps)
        saved = self._saved(state)
        if saved is not None:
            self.growth.load_state_dict(saved)
        self.growth.start(args.per_device_train_batch_size, configured)
        on_examples([scheduler], self.growth)
        if saved is not None:
            self._place(args, state, configured, kwargs.get("train_dataloader"))
        args.gradient_accumulation_steps = self.growth.accumulation

    def _place(self, args, state, configured: int, loader) -> None:
        """Resume at the micro-batch where the run stopped: the Trainer would skip
        ``global_step × configured`` micro-batches of epoch ``global_step // steps per
        epoch`` (both counted at the configured accumulation)."""
        try:
            per_epoch = len(loader)
        except TypeError:
            per_epoch = None
        used = self.growth.micro_in_epoch
        if per_epoch is None or args.ignore_data_skip:
            return
        epoch = round(state.epoch * per_epoch) // per_epoch
        updates = per_epoch // configured + int(per_epoch % configured > 0)
        trainer_epoch = state.global_step // updates
        trainer_skip = (state.global_step % updates) * configured
        if (trainer_epoch, trainer_skip) == (epoch, used):
            return
        why = None
        if trainer_epoch != epoch:
            why = (f"the checkpoint is in epoch {epoch} but the Trainer, counting "
                   f"{configured} micro-batches a step, would resume in epoch "
                   f"{trainer_epoch}")
        elif (per_epoch - used) % self.growth.accumulation:
            why = (f"the {per_epoch - used} micro-batches left in the epoch do not fill "
                   f"whole steps of {self.growth.accumulation}")
        elif not hasattr(loader, "skip_batches"):
            why = (f"the data loader ({type(loader).__name__}) cannot skip the "
                   f"{used} micro-batches already used")
        if why is not None:
            raise InputError(
                f"cannot resume this adaptive-batch run from step {state.global_step}: "
                f"{why}. Resume from a checkpoint written before the first batch change, "
                "or pass ignore_data_skip=True to train the rest of the run on the "
                "epoch from its start")
        self._ignore_data_skip = args.ignore_data_skip
        args.ignore_data_skip = True  # the loader skips instead
        loader.skip_batches = used
        self._skip = (loader, used)

    def _maybe_apply(self, args, state, kwargs) -> None:
        if self.growth.ready():
            args.gradient_accumulation_steps = self.growth.apply(
                state.global_step, [kwargs.get("optimizer")] if kwargs.get("optimizer")
                else [], [kwargs.get("lr_scheduler")])

    def on_epoch_begin(self, args, state, control, **kwargs):
        if self._skip is None:
            self.growth.micro_in_epoch = 0
        self._maybe_apply(args, state, kwargs)

    def on_epoch_end(self, args, state, control, **kwargs):
        self._unskip(args)

    def _unskip(self, args) -> None:
        if self._skip is not None:
            self._skip[0].skip_batches = 0
            self._skip = None
        if self._ignore_data_skip is not None:
            args.ignore_data_skip, self._ignore_data_skip = self._ignore_data_skip, None

    def on_substep_end(self, args, state, control, **kwargs):
        self.growth.micro_in_epoch += 1

    def on_step_end(self, args, state, control, **kwargs):
        self.growth.micro_in_epoch += 1
        try:  # the Trainer's own count (also right after a resume within an epoch)
            per_epoch = len(kwargs["train_dataloader"])
            epoch, fraction = divmod(state.epoch, 1.0)
            done = round(fraction * per_epoch)
            if self._skip is not None:  # the Trainer counts from the resumed position
                done += self._skip[1]
                state.epoch = epoch + done / per_epoch
            self.growth.micro_in_epoch = done
        except (KeyError, TypeError):  # no dataloader length: the callback's count
            pass
        self.growth.after_step(state.global_step)
        self._maybe_apply(args, state, kwargs)
        if 0 < args.max_steps <= self.growth.equivalent_step(state.global_step):
            control.should_training_stop = True  # the examples of max_steps batches

    def on_train_end(self, args, state, control, **kwargs):
        self._unskip(args)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None or not self.growth.accumulation:
            return
        values = self.growth.values(self.noise.prefix)
        logs.update(values)
        history = getattr(state, "log_history", None)
        if history and history[-1].get("step") == state.global_step:
            history[-1].update(values)


def install_adaptive(trainer, rule: AdaptiveBatchRule | None = None, *,
                     lr_rule: str | None = None, optimizer: str | None = None,
                     **noise_kwargs) -> AdaptiveBatchCallback:
    """`install` a `NoiseScaleCallback` (``noise_kwargs``) and an `AdaptiveBatchCallback`
    right after it (both before the reporting callbacks); returns the latter (its
    ``noise`` attribute is the former)."""
    noise = install(trainer, **noise_kwargs)
    cb = AdaptiveBatchCallback(noise, rule, lr_rule=lr_rule, optimizer=optimizer)
    trainer.callback_handler.callbacks.insert(1, cb)
    return cb
