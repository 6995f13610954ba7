"""A batch-size scheduler for plain PyTorch loops, with the learning rate stepped in
examples so that a change of batch size cannot desynchronise it.

A learning-rate scheduler stepped once per optimizer step counts steps; when the batch
grows, a step holds more examples, and a schedule written in steps (warmup, decay)
drifts from the one intended in examples. `BatchSizeScheduler` keeps one clock — the
examples consumed — and derives both the batch size (from a `BatchSchedule`) and the
learning rate (a function of examples, times the stage's factor) from it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any, Protocol

import numpy as np

from .._validate import as_float, as_scalar, check_count
from ..errors import InputError
from ..params import Domain, Kind, instance_of, validate_params
from .policies import BatchSchedule


class _Optimizer(Protocol):
    """What the scheduler needs of a ``torch.optim.Optimizer``: its parameter groups."""

    @property
    def param_groups(self) -> Sequence[MutableMapping[str, Any]]: ...

__all__ = ["BatchSizeScheduler"]


class BatchSizeScheduler:
    """Batch size and learning rate as functions of the examples consumed.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        Its parameter groups' ``lr`` are set at every `step`.
    schedule : BatchSchedule
    base_lr : float
        The learning rate of the first stage; stage k runs at
        ``base_lr * lr_factor[k] / lr_factor[0]`` (times ``lr_lambda``).
    lr_lambda : callable, optional
        A multiplier of the rate as a function of the examples consumed (warmup,
        decay), written in examples; default 1.

    Examples
    --------
    ``sched = BatchSizeScheduler(opt, schedule, base_lr=3e-4)``; each iteration: take
    ``sched.batch_size`` examples, ``loss.backward(); opt.step(); sched.step()``.
    """

    @validate_params(optimizer=Kind("a torch.optim.Optimizer",
                                    lambda v: hasattr(v, "param_groups")),
                     schedule=instance_of(BatchSchedule),
                     base_lr=Domain(0.0, meaning="learning rate of the first stage"),
                     lr_lambda=Kind("a function of the examples consumed", callable))
    def __init__(self, optimizer: _Optimizer, schedule: BatchSchedule, base_lr: float, *,
                 lr_lambda: Callable[[float], float] | None = None) -> None:
        self.optimizer = optimizer
        self.schedule = schedule
        self.base_lr = as_float(base_lr, "base_lr")
        self.lr_lambda = lr_lambda or (lambda examples: 1.0)
        first = float(schedule.stages["lr_factor"].iloc[0])
        if not (math.isfinite(first) and first > 0):
            raise InputError(f"schedule's first stage has lr_factor {first!r}; it must be > 0")
        self._first_factor = first  # base_lr is the first stage's rate, whatever its factor
        self.examples = 0.0
        self.steps = 0
        self._apply()

    @property
    def batch_size(self) -> int:
        """The batch size for the next step."""
        return int(self.schedule.batch_at_examples(self.examples))

    @property
    def lr(self) -> float:
        """The learning rate for the next step."""
        factor = as_scalar(self.lr_lambda(self.examples))
        if (isinstance(factor, bool) or not isinstance(factor, numbers.Real)
                or not (math.isfinite(float(factor)) and float(factor) >= 0)):
            raise InputError(f"lr_lambda returned {factor!r} at {self.examples:g} examples; "
                             "it must return a finite number >= 0 (the rate's multiplier)")
        return (self.base_lr * self.schedule.lr_factor_at_examples(self.examples)
                / self._first_factor * float(factor))

    def _apply(self) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr

    def step(self, examples: int | None = None) -> None:
        """Count one optimizer step of ``examples`` (default: the current batch size)."""
        n = self.batch_size if examples is None else check_count(examples, "examples", 1)
        self.examples += n
        self.steps += 1
        self._apply()

    def state_dict(self) -> dict[str, float]:
        return {"examples": self.examples, "steps": self.steps}

    def load_state_dict(self, state: object) -> None:
        """Restore a `state_dict`; both entries are checked first (nothing changes on an
        error)."""
        if not isinstance(state, dict) or not {"examples", "steps"} <= set(state):
            raise InputError(f"state must be a dict with 'examples' and 'steps', got {state!r}")
        examples = as_float(state["examples"], "state['examples']")
        steps = state["steps"]
        if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
            raise InputError(f"state['steps'] must be an integer >= 0, got {steps!r}")
        if examples < 0:
            raise InputError(f"state['examples'] must be >= 0, got {examples!r}")
        self.examples = examples
        self.steps = int(steps)
        self._apply()
