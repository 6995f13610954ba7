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

The learning-rate schedule runs on examples, not optimizer steps: every
``torch.optim.lr_scheduler.LambdaLR`` that steps once per optimizer step (what the
``transformers`` schedules are) is evaluated at the *equivalent step*, the examples seen
divided by the starting batch (`BatchGrowth.equivalent_step`), so a warmup or a decay
keeps its length in examples and a decay reaches its end value when the data budget
ends; a run bounded by a number of optimizer steps ends when the equivalent step reaches
it. Another scheduler that steps per optimizer step is refused (`check_schedulers`): its
horizon would stay in optimizer steps, which hold more examples after a change.

The learning-rate rule is the one of the run's optimizer: `BatchGrowth.check_optimizers`
reads its type (``torch.optim.SGD``, ``Adam``, ``AdamW``, through the frameworks'
wrappers) before the first step; ``optimizer=`` and ``lr_rule=`` default to it (the
linear rule for SGD, the square-root rule for Adam, `empirical_batch.rules.default_lr_rule`)
and an ``optimizer=`` that names another optimizer than the run's is refused, naming
both. A rule outside its regime at a change (the square-root and linear rules hold for
$B \le 0.1\,B_{noise}$, and this loop grows the batch as it nears $B_{noise}$) is said
once per run, in words; every change keeps ``lr_in_regime`` and the note.

`BatchGrowth.state_dict` holds all of it (accumulation, pending change, changes, the
clock of the schedule and the position in the epoch); the callbacks save it in the
framework's checkpoints and restore it, so a resumed run continues as the uninterrupted
one would.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, cast

from .._optional import optional_import
from ..errors import InputError, warn
from ..rules import default_lr_rule, lr_rules
from ..schedule.online import AdaptiveBatchRule
from ..transfer import OPTIMIZERS, Optimizer, RegimeWarning, transfer

__all__ = ["BatchGrowth", "GrowthCallback", "check_schedulers", "on_examples"]

_LR_RULES = (*lr_rules(), "unchanged")


class BatchGrowth:
    """Decide and apply the batch changes of one run (framework-free).

    Parameters
    ----------
    noise : a framework ``NoiseScaleCallback``
        Where the measured values are read (`values`: ``b_simple``, ``b_simple_low`` in
        examples).
    rule : AdaptiveBatchRule
    lr_rule : str or None
        The `transfer` learning-rate rule (``"linear"``, ``"sqrt"``, ``"sgd_optimal"``,
        ``"surge"``, ``"unchanged"``); ``None``: the optimizer's
        (`empirical_batch.rules.default_lr_rule`: ``"linear"`` for SGD, ``"sqrt"`` for
        Adam).
    optimizer : {"sgd", "adam", "adamw"} or None
        For `transfer` (which rules hold); ``None``: read from the run's optimizer
        (`check_optimizers`). One that names another optimizer than the run's is refused.
    """

    def __init__(self, noise, rule: AdaptiveBatchRule, *, lr_rule: str | None,
                 optimizer: str | None):
        if not isinstance(rule, AdaptiveBatchRule):
            raise InputError(f"rule must be an AdaptiveBatchRule, got {type(rule).__name__}")
        self.noise = noise
        self.rule = rule
        if lr_rule is not None and lr_rule not in _LR_RULES:
            raise InputError(f"lr_rule must be one of {_LR_RULES}, got {lr_rule!r}")
        if optimizer is not None and optimizer not in OPTIMIZERS:
            raise InputError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        self.declared = (optimizer, lr_rule)  # as given (None: from the run's optimizer)
        self.optimizer = optimizer
        self.lr_rule = lr_rule
        self._said: set[str] = set()  # regime notes already said in this run
        self.micro_batch_size = 0
        self.accumulation = 0
        self.pending: int | None = None
        self.micro_in_epoch = 0
        self.last_change_at = 0  # measured steps at the last change
        self.changes: list[dict] = []
        self._trigger: dict = {}  # the estimate behind the pending change
        self.start_batch = 0  # the global batch of the first step (examples)
        self.clock = (0, 0.0)  # (step, equivalent step) at the last change
        self.restored: dict | None = None  # a checkpoint's state, applied at `start`

    def check_optimizers(self, optimizers) -> None:
        """Read the run's optimizer type (``torch.optim.SGD``, ``Adam``, ``AdamW``;
        through the wrappers of Accelerate and Lightning) and settle ``optimizer`` and
        ``lr_rule``: an ``optimizer=`` naming another optimizer than the run's is
        refused naming both; an optimizer of another type needs ``optimizer=``."""
        kinds = {_kind(opt) for opt in optimizers if opt is not None}
        declared, lr_rule = self.declared
        if not kinds:  # no optimizer visible yet: checked again at the first change
            return
        if len(kinds) > 1:
            raise InputError(f"AdaptiveBatchCallback moves one learning-rate rule, but the "
                             f"run has optimizers of several kinds {sorted(kinds)}")
        (kind,) = kinds
        name, detected = kind
        if declared is None:
            if detected is None:
                raise InputError(
                    f"AdaptiveBatchCallback cannot tell which learning-rate rule holds for "
                    f"the run's optimizer {name}: pass optimizer='sgd', 'adam' or 'adamw' "
                    "(the one it behaves like) and lr_rule=")
            self.optimizer = detected
        elif detected is not None and detected != declared:
            raise InputError(
                f"AdaptiveBatchCallback was given optimizer={declared!r} but the run "
                f"trains with {name}: the learning-rate rule of {declared!r} "
                f"({default_lr_rule(declared)!r}) is not {name}'s. Pass "
                f"optimizer={detected!r} (or leave it out: it is read from the run)")
        else:
            self.optimizer = declared
        assert self.optimizer is not None
        self.lr_rule = lr_rule if lr_rule is not None else default_lr_rule(self.optimizer)

    def start(self, micro_batch_size: int, accumulation: int) -> None:
        """Begin with the configured sizes, or continue a restored run: its accumulation
        steps, pending change, changes and schedule clock (the configured micro-batch
        must be the checkpoint's)."""
        self.micro_batch_size, self.accumulation = int(micro_batch_size), int(accumulation)
        self.start_batch = self.micro_batch_size * self.accumulation
        state, self.restored = self.restored, None
        if state is None:
            return
        saved_micro = state.get("micro_batch_size", self.micro_batch_size)
        if saved_micro != self.micro_batch_size:
            raise InputError(
                f"the checkpoint was written with micro-batches of {saved_micro} examples, "
                f"this run has {self.micro_batch_size}: resume with the same per-device "
                "batch size")
        self.accumulation = state["accumulation"]
        self.last_change_at = state["last_change_at"]
        self.changes = list(state["changes"])
        self.start_batch = state.get("start_batch", self.start_batch)
        self.pending = state.get("pending")
        self._trigger = dict(state.get("trigger") or {})
        clock = state.get("clock")
        if clock is not None:
            self.clock = (int(clock[0]), float(clock[1]))
        self.micro_in_epoch = state.get("micro_in_epoch", 0)

    def equivalent_step(self, step: int) -> float:
        """Optimizer steps of the starting batch that hold the examples of ``step``
        optimizer steps (the clock the learning-rate schedule runs on)."""
        if not self.start_batch:
            return float(step)
        at, equivalent = self.clock
        return equivalent + (step - at) * self.batch_size / self.start_batch

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
        self.clock = (int(step), self.equivalent_step(step))
        old_b, k = self.batch_size, self.pending
        new_b = self.micro_batch_size * k
        b_noise = self._trigger["b_simple"]
        rows = []
        for opt in optimizers:
            for group in opt.param_groups:
                rows.append(group)
        lr = float(rows[0]["lr"]) if rows else math.nan
        if self.optimizer is None or self.lr_rule is None:
            self.check_optimizers(optimizers)
        if self.optimizer is None or self.lr_rule is None:
            raise InputError("AdaptiveBatchCallback found no optimizer in the run to read "
                             "its kind from: pass optimizer= and lr_rule=")
        with warnings.catch_warnings():  # said once per run below, in words
            warnings.simplefilter("ignore", RegimeWarning)
            res = transfer({"lr": lr if lr > 0 else 1.0}, old_b, new_b,
                           optimizer=cast(Optimizer, self.optimizer),  # one of OPTIMIZERS
                           rule=self.lr_rule,
                           b_noise=b_noise if b_noise > 0 else None)
        self._say_regime(res["lr"].in_regime, res["lr"].note)
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

    def _say_regime(self, in_regime: bool | None, note: str) -> None:
        """Say once per run (not at every change) that the learning-rate rule is applied
        outside its regime."""
        if in_regime is not False or self.lr_rule in self._said:
            return
        self._said.add(str(self.lr_rule))
        warn(
            f"AdaptiveBatchCallback: the learning rate follows lr_rule={self.lr_rule!r} "
            f"outside that rule's regime ({note}). The loop grows the batch as the "
            "measured noise scale nears it, where the linear and square-root rules no "
            "longer hold; it keeps applying the rule at every change (said once; each "
            "change in `changes` has lr_in_regime and the note). lr_rule='sgd_optimal' "
            "(SGD) or 'surge' (Adam) follow the noise scale instead",
            RegimeWarning)

    def values(self, prefix: str) -> dict[str, float]:
        """``{prefix}batch_size`` and ``{prefix}accumulation_steps`` for the logs."""
        return {f"{prefix}batch_size": float(self.batch_size),
                f"{prefix}accumulation_steps": float(self.accumulation)}

    def state_dict(self) -> dict:
        """Everything a resumed run needs (JSON: plain numbers, lists and dicts)."""
        return {"accumulation": self.accumulation, "last_change_at": self.last_change_at,
                "changes": [dict(c) for c in self.changes],
                "micro_batch_size": self.micro_batch_size, "start_batch": self.start_batch,
                "pending": self.pending, "trigger": dict(self._trigger),
                "clock": [self.clock[0], self.clock[1]],
                "micro_in_epoch": self.micro_in_epoch}

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict`; every entry is checked first (nothing changes on an
        error)."""
        if not isinstance(state, dict) or not {"accumulation", "last_change_at",
                                               "changes"} <= set(state):
            raise InputError("state must be a dict with 'accumulation', 'last_change_at' "
                             f"and 'changes', got {state!r}")
        acc, last, changes = state["accumulation"], state["last_change_at"], state["changes"]
        checked = {}
        for name, v, low in (("accumulation", acc, 1), ("last_change_at", last, 0),
                             ("micro_batch_size", state.get("micro_batch_size", 1), 1),
                             ("start_batch", state.get("start_batch", 1), 1),
                             ("micro_in_epoch", state.get("micro_in_epoch", 0), 0),
                             ("pending", 1 if state.get("pending") is None
                              else state["pending"], 1)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
                raise InputError(f"state[{name!r}] must be an integer >= {low}, got {v!r}")
            checked[name] = int(v)
        if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
            raise InputError(f"state['changes'] must be a list of dicts, got {changes!r}")
        clock = state.get("clock", [0, 0.0])
        if (not isinstance(clock, (list, tuple)) or len(clock) != 2
                or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                           and math.isfinite(v) and float(v) >= 0 for v in clock)):
            raise InputError(f"state['clock'] must be [step, equivalent step], got {clock!r}")
        trigger = state.get("trigger") or {}
        if not isinstance(trigger, dict):
            raise InputError(f"state['trigger'] must be a dict, got {trigger!r}")
        self.accumulation, self.last_change_at, self.changes = acc, last, list(changes)
        self.restored = {**state, **checked, "pending": state.get("pending"),
                         "clock": list(clock), "trigger": trigger}
        if "micro_batch_size" not in state:
            self.restored.pop("micro_batch_size")
        if "start_batch" not in state:
            self.restored.pop("start_batch")


def _kind(optimizer) -> tuple[str, str | None]:
    """(type name, ``"sgd"``/``"adam"``/``"adamw"`` or None) of a torch optimizer, seen
    through the wrappers that hold it as ``optimizer`` (Accelerate) or ``_optimizer``
    (Lightning)."""
    with optional_import("torch", by="the adaptive batch loop", extra="torch"):
        import torch

    for _ in range(8):
        inner = getattr(optimizer, "optimizer", None) or getattr(optimizer, "_optimizer", None)
        if inner is None or inner is optimizer or not isinstance(inner, torch.optim.Optimizer):
            break
        optimizer = inner
    name = type(optimizer).__name__
    for cls, kind in ((torch.optim.AdamW, "adamw"), (torch.optim.Adam, "adam"),
                      (torch.optim.SGD, "sgd")):
        if isinstance(optimizer, cls):
            return name, kind
    return name, None


class _OnExamples:
    """A ``LambdaLR`` factor evaluated at the equivalent step of `BatchGrowth` (its
    ``__dict__`` stays empty: ``LambdaLR.state_dict`` saves it)."""

    __slots__ = ("__dict__", "fn", "growth")

    def __init__(self, fn, growth: BatchGrowth):
        self.fn, self.growth = fn, growth

    def __call__(self, step):
        return self.fn(self.growth.equivalent_step(step))


def _lambda_lr():
    with optional_import("torch", by="the adaptive batch loop", extra="torch"):
        import torch

    return torch.optim.lr_scheduler.LambdaLR


def check_schedulers(schedulers, *, what: str = "the learning-rate scheduler") -> None:
    """Refuse, before the first step, a scheduler that steps per optimizer step and is
    not a ``LambdaLR``: its horizon is counted in optimizer steps, which hold more
    examples after a batch change, so a decay would end early or be cut off."""
    lambda_lr = _lambda_lr()
    for sched in schedulers:
        if sched is None or isinstance(sched, lambda_lr) or not hasattr(sched, "base_lrs"):
            continue  # ReduceLROnPlateau has no base_lrs: it follows a metric
        raise InputError(
            f"AdaptiveBatchCallback runs the learning-rate schedule on examples seen, "
            f"which it can do for a torch.optim.lr_scheduler.LambdaLR (every transformers "
            f"schedule is one) but not for {what} {type(sched).__name__}: its horizon "
            "would stay in optimizer steps, which hold more examples after the batch "
            "grows, and a decay would stop early. Use a LambdaLR (e.g. "
            "LambdaLR(opt, lambda step: ...)), a constant rate, or a scheduler that steps "
            "once per epoch")


def on_examples(schedulers, growth: BatchGrowth) -> None:
    """Make every ``LambdaLR`` of ``schedulers`` run on `BatchGrowth.equivalent_step`
    (once: a wrapped factor is not wrapped again) and recompute its current rates."""
    lambda_lr = _lambda_lr()
    for sched in schedulers:
        if not isinstance(sched, lambda_lr):
            continue
        sched.lr_lambdas = [fn if isinstance(fn, _OnExamples) and fn.growth is growth
                            else _OnExamples(getattr(fn, "fn", fn), growth)
                            for fn in sched.lr_lambdas]


class GrowthCallback:
    """What the frameworks' ``AdaptiveBatchCallback`` classes share: the measuring
    callback checked (``noise_type``: the framework's ``NoiseScaleCallback``), the
    `BatchGrowth` loop built, and its `changes`."""

    noise_type: type = object

    def __init__(self, noise, rule: AdaptiveBatchRule | None = None, *,
                 lr_rule: str | None = None, optimizer: str | None = None):
        if not isinstance(noise, self.noise_type):
            raise InputError("noise must be the NoiseScaleCallback that measures the run")
        self.noise: Any = noise  # the framework's NoiseScaleCallback
        self.growth = BatchGrowth(noise, rule or AdaptiveBatchRule("doubling"),
                                  lr_rule=lr_rule, optimizer=optimizer)

    @property
    def changes(self) -> list[dict]:
        """One row per batch change (see `BatchGrowth`)."""
        return self.growth.changes
