"""$B_{simple}$ inside a Hugging Face ``transformers.Trainer`` (needs ``transformers``).

Usage::

    from empirical_batch.integrations.hf import install

    trainer = Trainer(model, args, train_dataset=data)
    install(trainer)  # first in the callback list: every report_to sees the values
    trainer.train()
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from ..errors import InputError
from ..measure import GradientNoiseScale, PerExampleNoiseScale
from .loggers import PREFIX, noise_scale_values

__all__ = ["NoiseScaleCallback", "install"]

_MODES = ("auto", "micro_batch", "per_example")


class NoiseScaleCallback(TrainerCallback, ExportableState):
    r"""Measure $B_{simple}$ during ``Trainer.train()`` and add it to the Trainer's logs.

    With ``gradient_accumulation_steps >= 2`` it uses the micro-batches of the
    accumulation (`empirical_batch.measure.GradientNoiseScale`, micro-batch size
    ``per_device_train_batch_size``); with one backward pass per step, the per-example
    norms of the batch (`empirical_batch.measure.PerExampleNoiseScale`, which covers the
    ``nn.Linear``/``Conv1D``/``nn.Embedding``/``nn.LayerNorm`` layers and says how much
    of the model that is). Both take their norms at the backward passes, so the
    Trainer's gradient clipping (``max_grad_norm``, on by default) and AMP unscaling do
    not change the estimate; an epoch-end step with a single backward pass is skipped
    and counted.

    At every log the keys ``{prefix}b_simple``, ``{prefix}g2``,
    ``{prefix}trace_sigma`` and ``{prefix}skipped`` join the Trainer's logs. Callbacks
    run in order and a value added after the reporting callbacks (TensorBoard, W&B, …)
    is lost: use `install`, or put this callback first in ``callbacks=``. The
    estimator's state is saved in the Trainer's checkpoints (``ExportableState``) and
    restored by ``trainer.train(resume_from_checkpoint=...)``.

    Parameters
    ----------
    beta : float
        EMA decay of the estimator.
    prefix : str
        Key prefix in the logs.
    mode : {"auto", "micro_batch", "per_example"}
        ``"auto"``: micro-batches when accumulating, per-example norms otherwise.
    max_history : int or None
        Per-step rows kept by the estimator (the last ones; ``None``: all). Bounded by
        default because the state rides in every checkpoint.
    """

    def __init__(self, *, beta: float = 0.99, prefix: str = PREFIX, mode: str = "auto",
                 max_history: int | None = 10_000):
        if mode not in _MODES:
            raise InputError(f"mode must be one of {_MODES}, got {mode!r}")
        self.beta = beta
        self.prefix = prefix
        self.mode = mode
        self.max_history = max_history
        self.collector: GradientNoiseScale | PerExampleNoiseScale | None = None
        self.estimator_state: dict | None = None  # restored from a checkpoint

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self, args, state, control, model=None, **kwargs):
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
                                                  max_history=self.max_history)
        if self.estimator_state is not None:
            self.collector.estimator.load_state_dict(self.estimator_state["estimator"])
            self.collector.skipped.update(self.estimator_state["skipped"])

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.collector is not None:
            self.collector.step()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is not None and self.collector is not None:
            logs.update(noise_scale_values(self.collector, self.prefix))

    def on_train_end(self, args, state, control, **kwargs):
        if self.collector is not None:
            self.estimator_state = self.collector.state_dict()
            self.collector.remove()

    # ------------------------------------------------------------ checkpoint
    def state(self) -> dict[str, Any]:
        """What the Trainer writes into ``trainer_state.json`` (JSON: plain numbers)."""
        live = self.collector.state_dict() if self.collector is not None else \
            self.estimator_state
        return {"args": {"beta": self.beta, "prefix": self.prefix, "mode": self.mode,
                         "max_history": self.max_history},
                "attributes": {"estimator_state": live}}

    def values(self) -> dict[str, float]:
        """The current estimates under their log keys (empty before the first step)."""
        return {} if self.collector is None else noise_scale_values(self.collector,
                                                                    self.prefix)


def install(trainer, **kwargs) -> NoiseScaleCallback:
    """Add a `NoiseScaleCallback` (``kwargs`` go to it) to ``trainer`` *first*, so that
    the reporting callbacks after it log its values; returns the callback."""
    cb = NoiseScaleCallback(**kwargs)
    trainer.callback_handler.callbacks.insert(0, cb)
    return cb
