"""Collect the gradient noise scale from a PyTorch training loop (needs torch).

- `GradientNoiseScale`: micro-batches of gradient accumulation, via
  parameter gradient hooks (single device).
- `per_example_sq_norms`: per-example squared gradient norms (``torch.func``,
  with a fast path for linear, embedding and LayerNorm layers).
- `PerExampleNoiseScale`: the per-example noise scale collected inside the training
  step, with its `Coverage` of the model, tied weights, the LayerNorm-only proxy and
  per-layer scales.
- `DDPNoiseScaleHook`: a DDP communication hook; local batch = small batch,
  global batch = big batch.
- `FSDPNoiseScale`: the same under FSDP2 (``fully_shard``), recorded in FSDP's
  reduce-scatter.
- `hessian_noise_scale`: exact $B_{noise}$ and $B_{simple}$ of a
  small model from per-example gradients and Hessian-vector products.
- `NoiseScaleLog`: per-step log of any of them to a DataFrame / CSV.

The estimators themselves are numpy-only, in `empirical_batch.estimators`.
"""

from __future__ import annotations

from .._optional import optional_import

# without torch: the numpy estimators are in empirical_batch.estimators
with optional_import("torch", by="empirical_batch.measure"):
    import torch  # noqa: F401

from .ddp import DDPNoiseScaleHook
from .fsdp import FSDPNoiseScale
from .hessian import HessianNoiseScale, hessian_noise_scale
from .log import NoiseScaleLog
from .per_example import check_no_batchnorm, per_example_sq_norms
from .per_example_collector import Coverage, CoverageWarning, PerExampleNoiseScale
from .tracker import GradientNoiseScale

__all__ = [
    "Coverage",
    "CoverageWarning",
    "DDPNoiseScaleHook",
    "FSDPNoiseScale",
    "GradientNoiseScale",
    "HessianNoiseScale",
    "NoiseScaleLog",
    "PerExampleNoiseScale",
    "check_no_batchnorm",
    "hessian_noise_scale",
    "per_example_sq_norms",
]
