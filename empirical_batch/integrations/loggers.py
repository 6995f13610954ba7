"""A collector's estimates for the loggers of a plain training loop.

`noise_scale_values` is the one place the log keys are chosen; the framework
callbacks (`empirical_batch.integrations.hf`, `empirical_batch.integrations.lightning`)
use it too.

>>> from empirical_batch.estimators import GNSEstimator
>>> est = GNSEstimator(beta=0.0)
>>> _ = est.update(2 + 40 / 4, 4, 2 + 40 / 16, 16)
>>> class Collector:  # anything with ``estimator`` and ``skipped``
...     estimator, skipped = est, {"single_backward": 1}
>>> noise_scale_values(Collector())  # doctest: +NORMALIZE_WHITESPACE
{'noise_scale/b_simple': 20.0, 'noise_scale/g2': 2.0,
 'noise_scale/trace_sigma': 40.0, 'noise_scale/skipped': 1.0}
"""

from __future__ import annotations

from typing import Any

__all__ = ["log_tensorboard", "log_wandb", "noise_scale_values"]

PREFIX = "noise_scale/"


def noise_scale_values(collector, prefix: str = PREFIX) -> dict[str, float]:
    r"""``{prefix}b_simple``, ``{prefix}g2`` ($|G|^2$), ``{prefix}trace_sigma``
    ($\operatorname{tr}\Sigma$) and ``{prefix}skipped`` (steps skipped so far) of any
    collector of `empirical_batch.measure`; empty before its first measured step."""
    from ..estimators import estimator_of

    est = estimator_of(collector, "collector")
    if est.steps == 0:
        return {}
    return {f"{prefix}b_simple": float(est.b_simple), f"{prefix}g2": float(est.g2),
            f"{prefix}trace_sigma": float(est.trace_sigma),
            f"{prefix}skipped": float(sum(getattr(collector, "skipped", {}).values()))}


def log_tensorboard(writer, collector, step: int, prefix: str = PREFIX) -> dict[str, float]:
    """Write the estimates with ``writer.add_scalar`` (a
    ``torch.utils.tensorboard.SummaryWriter`` or anything with that method) at
    ``step``; returns what was written (nothing before the first measured step)."""
    if not callable(getattr(writer, "add_scalar", None)):
        from ..errors import InputError

        raise InputError(f"writer must be a TensorBoard SummaryWriter (with add_scalar), got "
                         f"{type(writer).__name__}")
    values = noise_scale_values(collector, prefix)
    for key, value in values.items():
        writer.add_scalar(key, value, global_step=step)
    return values


def log_wandb(run: Any, collector, step: int, prefix: str = PREFIX) -> dict[str, float]:
    """Log the estimates to a Weights & Biases run (``wandb.init()``'s result, or the
    ``wandb`` module) with ``run.log(values, step=step)``; returns what was logged."""
    if not callable(getattr(run, "log", None)):
        from ..errors import InputError

        raise InputError(f"run must be a Weights & Biases run (wandb.init()) or the wandb "
                         f"module, got {type(run).__name__}")
    values = noise_scale_values(collector, prefix)
    if values:
        run.log(values, step=step)
    return values
