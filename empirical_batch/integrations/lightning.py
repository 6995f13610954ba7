"""$B_{simple}$ inside a ``lightning`` training run (needs ``lightning``)."""

from __future__ import annotations

from typing import Any

import lightning as L

from ..errors import InputError
from ..estimators import GNSEstimator
from ..measure import GradientNoiseScale, PerExampleNoiseScale
from ..measure._common import checked_skipped
from .loggers import PREFIX, noise_scale_values

__all__ = ["NoiseScaleCallback"]


class NoiseScaleCallback(L.Callback):
    r"""Measure $B_{simple}$ and log it with ``pl_module.log_dict`` (so it reaches every
    logger the ``Trainer`` has).

    With ``Trainer(accumulate_grad_batches=k)``, ``k >= 2``, the micro-batches of the
    accumulation (`empirical_batch.measure.GradientNoiseScale`); with ``k = 1`` the
    per-example norms of each batch (`empirical_batch.measure.PerExampleNoiseScale`).
    Norms are taken at the backward passes: ``gradient_clip_val`` and mixed-precision
    unscaling do not change the estimate; an epoch-end step with one backward pass is
    skipped and counted. The estimator's state rides in Lightning's checkpoints
    (`state_dict`/`load_state_dict`).

    Parameters
    ----------
    micro_batch_size : int
        Examples per training batch (Lightning does not know it).
    beta : float
        EMA decay of the estimator.
    prefix : str
        Metric name prefix.
    max_history : int or None
        Per-step rows kept by the estimator (the last ones; ``None``: all).
    """

    def __init__(self, micro_batch_size: int, *, beta: float = 0.99, prefix: str = PREFIX,
                 max_history: int | None = 10_000):
        self.micro_batch_size = micro_batch_size
        self.beta = beta
        self.prefix = prefix
        self.max_history = max_history
        self.collector: GradientNoiseScale | PerExampleNoiseScale | None = None
        self._restored: dict | None = None

    def on_train_start(self, trainer, pl_module):
        if trainer.world_size > 1:
            raise InputError("NoiseScaleCallback measures single-process training; under "
                             "DDP use empirical_batch.measure.DDPNoiseScaleHook, under FSDP "
                             "FSDPNoiseScale")
        k = int(trainer.accumulate_grad_batches)
        if k >= 2:
            self.collector = GradientNoiseScale(
                pl_module, micro_batch_size=self.micro_batch_size, accumulation_steps=k,
                beta=self.beta, max_history=self.max_history)
        else:
            self.collector = PerExampleNoiseScale(pl_module, beta=self.beta,
                                                  max_history=self.max_history)
        if self._restored is not None:
            self._load(self._restored)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        if self.collector is None or self.collector.step() is None:
            return
        values = noise_scale_values(self.collector, self.prefix)
        if values:
            pl_module.log_dict(values, on_step=True, on_epoch=False)

    def on_train_end(self, trainer, pl_module):
        if self.collector is not None:
            self._restored = self.collector.state_dict()
            self.collector.remove()

    def state_dict(self) -> dict[str, Any]:
        if self.collector is not None:
            return self.collector.state_dict()
        return dict(self._restored or {})

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not state_dict:
            return
        if self.collector is None:
            checked_skipped(state_dict)  # refuse a bad state now, not at fit start
            GNSEstimator().load_state_dict(state_dict["estimator"])
            self._restored = state_dict
        else:
            self._load(state_dict)

    def _load(self, state: dict) -> None:
        assert self.collector is not None
        skipped = checked_skipped(state)
        self.collector.estimator.load_state_dict(state["estimator"])  # checks first
        self.collector.skipped.update(skipped)
