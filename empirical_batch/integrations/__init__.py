"""Collectors inside training frameworks and their loggers (optional extras, imported
lazily: importing this package imports no framework).

- `empirical_batch.integrations.hf.NoiseScaleCallback`: a ``transformers`` Trainer
  callback (`empirical_batch.integrations.hf.install` puts it first, so that its values
  reach every ``report_to``); ``pip install empirical_batch[hf]``.
- `empirical_batch.integrations.lightning.NoiseScaleCallback`: a ``lightning`` callback
  logging through ``LightningModule.log_dict``; ``pip install empirical_batch[lightning]``.
- `empirical_batch.integrations.accelerate`, `empirical_batch.integrations.ray_train`,
  `empirical_batch.integrations.deepspeed` and `empirical_batch.integrations.olmo_core`
  (an OLMo-core trainer callback): collectors inside those engines, writing the noise log
  (extras ``accelerate``, ``ray-train``, ``deepspeed``, ``olmo-core``).
- `empirical_batch.integrations.loggers`: `log_tensorboard` (a ``SummaryWriter``) and
  `log_wandb` (a W&B run) for plain loops.

The callbacks measure $B_{simple}$ from the micro-batches of gradient accumulation, each
with the size of the batch the framework passed (and, for a loss normalised by the
tokens of the accumulated batch, the weights $n_j/N$:
`empirical_batch.integrations.steps`), or from per-example norms without accumulation;
the norms are taken at the backward passes, so the frameworks' clipping and AMP
unscaling before their optimizer hooks do not change the estimate, and a step with one
backward pass, or whose sizes cannot be read, is skipped and counted. Their
``AdaptiveBatchCallback`` grows the batch as the measured noise scale grows
(`empirical_batch.integrations.adaptive`).
"""

from .loggers import log_tensorboard, log_wandb, noise_scale_values

__all__ = ["log_tensorboard", "log_wandb", "noise_scale_values"]
