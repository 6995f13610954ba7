"""What the engine collectors share: the data-parallel counters, the noise log they
write and the values they hand to the engine's logger.

Every engine collector (`empirical_batch.integrations.accelerate`,
`empirical_batch.integrations.ray_train`, `empirical_batch.integrations.deepspeed`)
holds one collector of `empirical_batch.measure` and counts the examples (and tokens)
of the whole data-parallel group; at each measured optimizer step it appends one row
of the noise-log schema (`empirical_batch.noise_log`) to `EngineNoiseScale.log`, so
that ``empirical-batch schedule --log``, ``plan --noise-log`` and ``transfer
--noise-log`` read the file `EngineNoiseScale.log` writes unchanged.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InputError
from ..measure._common import check_batch_size
from ..measure.log import NoiseScaleLog
from .loggers import PREFIX, noise_scale_values

__all__ = ["EngineNoiseScale"]


class EngineNoiseScale:
    """Counters, noise log and logged values around one collector (``self.collector``).

    Subclasses set ``self.collector`` and call `_measured` once per optimizer step with
    the step's examples and tokens over the data-parallel group.
    """

    collector: Any = None  # a collector of empirical_batch.measure
    micro_batch_size: int  # examples of a micro-batch when step() is not told
    token_weighted: bool = False
    _sizes: list[int]  # the micro-batches of the step in progress: examples, tokens
    _tokens: list[int]

    def _init_log(self, *, unit: str = "examples", level: float = 0.95,
                  prefix: str = PREFIX) -> None:
        if not 0.0 < level < 1.0:
            raise InputError(f"level must be in (0, 1), got {level!r}")
        self.prefix = prefix
        self.log = NoiseScaleLog(level=level, unit=unit)
        self.steps = 0  # optimizer steps seen (measured or skipped)
        self.examples = 0.0  # examples of the data-parallel group so far
        self.tokens: float | None = None  # tokens so far, when the step said

    def _count_micro(self, examples: int | None, tokens: int | None) -> None:
        """Note one micro-batch's examples (``micro_batch_size`` when not given) and
        tokens; ``token_weighted=True`` needs the tokens of every micro-batch."""
        self._sizes.append(self.micro_batch_size if examples is None else
                           check_batch_size(examples, "examples"))
        if tokens is not None:
            self._tokens.append(check_batch_size(tokens, "tokens"))
        elif self.token_weighted:
            raise InputError("token_weighted=True needs step(tokens=...) for every "
                             "micro-batch")

    def _measured(self, examples: float, tokens: float | None, loss=None, **extra) -> dict:
        """Count one optimizer step and append its row to `log`."""
        self.steps += 1
        self.examples += float(examples)
        if tokens is not None:
            self.tokens = (self.tokens or 0.0) + float(tokens)
        if loss is not None and hasattr(loss, "detach"):
            loss = float(loss.detach())
        return self.log.record(self.steps, self.collector, loss=loss, examples=self.examples,
                               tokens=self.tokens, **extra)

    @property
    def estimator(self):
        """The collector's `empirical_batch.estimators.GNSEstimator`."""
        return self.collector.estimator

    @property
    def skipped(self) -> dict[str, int]:
        return self.collector.skipped

    @property
    def b_simple(self) -> float:
        return self.collector.b_simple

    def values(self) -> dict[str, float]:
        """``{prefix}b_simple``, ``g2``, ``trace_sigma``, ``skipped`` and the counters, for
        the engine's logger (empty before the first measured step)."""
        values = noise_scale_values(self.collector, self.prefix)
        if values:
            values[f"{self.prefix}examples"] = self.examples
            if self.tokens is not None:
                values[f"{self.prefix}tokens"] = self.tokens
        return values

    def state_dict(self) -> dict:
        return {"collector": self.collector.state_dict(), "steps": self.steps,
                "examples": self.examples, "tokens": self.tokens,
                "rows": [dict(r) for r in self.log.rows]}

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict`; every entry is checked first (nothing changes on an
        error)."""
        if not isinstance(state, dict):
            raise InputError(f"engine collector state must be a dict from state_dict(), got "
                             f"{type(state).__name__}")
        unknown = sorted(set(state) - {"collector", "steps", "examples", "tokens", "rows"})
        if unknown:
            raise InputError(f"engine collector state has unknown entries {unknown}")
        if "collector" not in state:
            raise InputError("engine collector state has no 'collector' entry")
        steps = state.get("steps", 0)
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise InputError(f"engine collector state['steps'] must be an integer >= 0, got "
                             f"{steps!r}")
        counts: dict[str, float | None] = {}
        for key, default in (("examples", 0.0), ("tokens", None)):
            v = state.get(key, default)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v < 0):
                raise InputError(f"engine collector state[{key!r}] must be a finite number "
                                 f">= 0, got {v!r}")
            counts[key] = None if v is None else float(v)
        rows = state.get("rows", [])
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise InputError("engine collector state['rows'] must be a list of noise-log rows "
                             "(dicts)")
        self.collector.load_state_dict(state["collector"])  # checks its own entries first
        self.steps = steps
        self.examples = float(counts["examples"] or 0.0)
        self.tokens = counts["tokens"]
        self.log.rows = [dict(r) for r in rows]
