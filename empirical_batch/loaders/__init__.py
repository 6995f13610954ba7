"""Loaders for published sweep formats, each landing in the sweep schema.

================================  ==========================================  ==================
loader                            source                                      returns
================================  ==========================================  ==================
`load_mlperf_curves`        ``runs.csv`` + ``evals.csv`` (MLLOG evals   `Sweep`
                                  of MLPerf Training submissions, extracted)
`load_mllog`                MLPerf MLLOG ``result_N.txt`` files         `Sweep`
`load_wandb`                W&B CSV exports (long history, or a panel   `Sweep`
                                  export joined with a runs-table export)
`load_tensorboard`          TensorBoard event files (via ``tbparse``)   `Sweep`
`load_mlperf_rcp`           MLPerf reference convergence points         steps-to-target
                                  (``rcps_*.json``, mlcommons/logging)        table (per seed)
================================  ==========================================  ==================

MLPerf RCPs are not curves but the amount of training each seed needed to reach
the benchmark target, so `load_mlperf_rcp` returns a per-seed
steps-to-target table (``batch_size``, ``steps``/``examples``, ``run``, ``seed``)
that `empirical_batch.fit.fit_tradeoff` takes directly.

Units: MLPerf logs progress in the benchmark's own unit (``epoch_num`` is epochs,
training samples or tokens depending on benchmark and round; ``samples_count``
for newer LLM benchmarks). `MLPERF_UNITS` records what is known (from the
MLCommons rules and the SOURCE.md of the published data); a unit that cannot be
converted to examples is refused unless ``examples_per_epoch`` is given.
"""

from __future__ import annotations

from .mlperf import (
    MLPERF_DIRECTION,
    MLPERF_UNITS,
    RCPTable,
    load_mllog,
    load_mlperf_curves,
    load_mlperf_rcp,
)
from .trackers import load_tensorboard, load_wandb

__all__ = [
    "MLPERF_DIRECTION",
    "MLPERF_UNITS",
    "RCPTable",
    "load_mllog",
    "load_mlperf_curves",
    "load_mlperf_rcp",
    "load_tensorboard",
    "load_wandb",
]
