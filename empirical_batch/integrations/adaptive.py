r"""The closed loop shared by the frameworks' adaptive-batch callbacks.

`BatchGrowth` reads the noise scale a `NoiseScaleCallback` measures, asks an
`empirical_batch.schedule.AdaptiveBatchRule` for the next global batch
(micro-batch × accumulation steps; the accumulation steps double), waits until the
micro-batches seen in the epoch are a multiple of the new accumulation steps (so that
every later optimizer step holds whole groups), then switches and moves the learning
rate with `empirical_batch.transfer.transfer` (``lr_rule``): the optimizer's rates and
the ``base_lrs`` of its learning-rate schedulers are multiplied by the same factor, so a
schedule (warmup, decay) keeps its shape. Every change is kept in `changes` (step,
examples and tokens so far, old and new batch and rate, the estimate that triggered it
and whether the rate rule was in its regime).
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InputError
from ..rules import lr_rules
from ..schedule.online import AdaptiveBatchRule
from ..transfer import OPTIMIZERS, transfer

__all__ = ["BatchGrowth", "GrowthCallback"]

_LR_RULES = (*lr_rules(), "unchanged")


class BatchGrowth:
    """Decide and apply the batch changes of one run (framework-free).

    Parameters
    ----------
    noise : a framework ``NoiseScaleCallback``
        Where the measured values are read (`values`: ``b_simple``, ``b_simple_low`` in
        examples).
    rule : AdaptiveBatchRule
    lr_rule : str
        The `transfer` learning-rate rule (``"linear"``, ``"sqrt"``, ``"sgd_optimal"``,
        ``"surge"``, ``"unchanged"``).
    optimizer : {"sgd", "adam", "adamw"}
        For `transfer` (which rules hold).
    """

    def __init__(self, noise, rule: AdaptiveBatchRule, *, lr_rule: str, optimizer: str):
        if not isinstance(rule, AdaptiveBatchRule):
            raise InputError(f"rule must be an AdaptiveBatchRule, got {type(rule).__name__}")
        self.noise = noise
        self.rule = rule
        self.lr_rule = lr_rule
        self.optimizer = optimizer
        if lr_rule not in _LR_RULES:
            raise InputError(f"lr_rule must be one of {_LR_RULES}, got {lr_rule!r}")
        if optimizer not in OPTIMIZERS:
            raise InputError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        self.micro_batch_size = 0
        self.accumulation = 0
        self.pending: int | None = None
        self.micro_in_epoch = 0
        self.last_change_at = 0  # measured steps at the last change
        self.changes: list[dict] = []
        self._trigger: dict = {}  # the estimate behind the pending change

    def start(self, micro_batch_size: int, accumulation: int) -> None:
        self.micro_batch_size, self.accumulation = int(micro_batch_size), int(accumulation)

    @property
    def batch_size(self) -> int:
        """The global batch of the current steps (examples)."""
        return self.micro_batch_size * self.accumulation

    def _measured(self) -> int:
        collector = getattr(self.noise, "collector", None)
        return 0 if collector is None else collector.estimator.steps

    def after_step(self, step: int) -> None:
        """Decide after an optimizer step (the noise scale of this step included)."""
        if self.pending is not None:
            return
        measured = self._measured()
        if measured - self.last_change_at < self.rule.min_steps:
            return
        values = self.noise.values()
        prefix = self.noise.prefix
        b = values.get(f"{prefix}b_simple", math.nan)
        low = values.get(f"{prefix}b_simple_low")
        lower = None if low is None or math.isnan(low) else low
        new = self.rule.next_batch(self.batch_size, b, lower)
        if new > self.batch_size:
            self.pending = new // self.micro_batch_size
            self._trigger = {"decided_step": step, "b_simple": b,
                             "b_simple_low": math.nan if lower is None else lower}

    def ready(self) -> bool:
        """A change is pending and the micro-batches of the epoch so far fill whole
        groups of the new accumulation steps."""
        return self.pending is not None and self.micro_in_epoch % self.pending == 0

    def apply(self, step: int, optimizers, schedulers) -> int:
        """Switch to the pending accumulation steps and move the learning rates; returns
        the new accumulation steps."""
        assert self.pending is not None
        old_b, k = self.batch_size, self.pending
        new_b = self.micro_batch_size * k
        b_noise = self._trigger["b_simple"]
        rows = []
        for opt in optimizers:
            for group in opt.param_groups:
                rows.append(group)
        lr = float(rows[0]["lr"]) if rows else math.nan
        res = transfer({"lr": lr if lr > 0 else 1.0}, old_b, new_b,
                       optimizer=self.optimizer, rule=self.lr_rule,
                       b_noise=b_noise if b_noise > 0 else None)  # warns out of regime
        factor = res["lr"].new / res["lr"].old
        for group in rows:
            group["lr"] *= factor
            if "initial_lr" in group:
                group["initial_lr"] *= factor
        for sched in schedulers:
            if sched is not None and hasattr(sched, "base_lrs"):
                sched.base_lrs = [b * factor for b in sched.base_lrs]
        counters = self.noise.values()
        prefix = self.noise.prefix
        self.changes.append({
            "step": step, **self._trigger, "old_batch": old_b, "new_batch": new_b,
            "old_accumulation": self.accumulation, "new_accumulation": k,
            "examples": counters.get(f"{prefix}examples", math.nan),
            "tokens": counters.get(f"{prefix}tokens", math.nan),
            "lr_factor": factor, "lr_rule": self.lr_rule,
            "lr_in_regime": res["lr"].in_regime, "note": res["lr"].note})
        self.accumulation, self.pending = k, None
        self.last_change_at = self._measured()
        return k

    def values(self, prefix: str) -> dict[str, float]:
        """``{prefix}batch_size`` and ``{prefix}accumulation_steps`` for the logs."""
        return {f"{prefix}batch_size": float(self.batch_size),
                f"{prefix}accumulation_steps": float(self.accumulation)}

    def state_dict(self) -> dict:
        return {"accumulation": self.accumulation, "last_change_at": self.last_change_at,
                "changes": list(self.changes)}

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict`; every entry is checked first (nothing changes on an
        error)."""
        if not isinstance(state, dict) or not {"accumulation", "last_change_at",
                                               "changes"} <= set(state):
            raise InputError("state must be a dict with 'accumulation', 'last_change_at' "
                             f"and 'changes', got {state!r}")
        acc, last, changes = state["accumulation"], state["last_change_at"], state["changes"]
        for name, v, low in (("accumulation", acc, 1), ("last_change_at", last, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise InputError(f"state[{name!r}] must be an integer >= {low}, got {v!r}")
        if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
            raise InputError(f"state['changes'] must be a list of dicts, got {changes!r}")
        self.accumulation, self.last_change_at, self.changes = acc, last, list(changes)


class GrowthCallback:
    """What the frameworks' ``AdaptiveBatchCallback`` classes share: the measuring
    callback checked (``noise_type``: the framework's ``NoiseScaleCallback``), the
    `BatchGrowth` loop built, and its `changes`."""

    noise_type: type = object

    def __init__(self, noise, rule: AdaptiveBatchRule | None = None, *,
                 lr_rule: str = "linear", optimizer: str = "sgd"):
        if not isinstance(noise, self.noise_type):
            raise InputError("noise must be the NoiseScaleCallback that measures the run")
        self.noise: Any = noise  # the framework's NoiseScaleCallback
        self.growth = BatchGrowth(noise, rule or AdaptiveBatchRule("doubling"),
                                  lr_rule=lr_rule, optimizer=optimizer)

    @property
    def changes(self) -> list[dict]:
        """One row per batch change (see `BatchGrowth`)."""
        return self.growth.changes
