"""The study's fit settings, and the library calls that use them (one place).

``FIT_OPTIONS`` are the options of every B_crit fit of the validation study (the
library's defaults, stated once); `b_crit_curve` and `b_crit_points` call
`empirical_batch.critical_batch_curve` with them, `select` takes one optimizer's runs
out of a harness sweep.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..errors import InputError
from ..fit import FitWarning, critical_batch_curve
from ..sweeps import load_sweep

__all__ = ["FIT_OPTIONS", "b_crit_curve", "b_crit_points", "select"]

#: fit options used everywhere in the study (library defaults, stated once)
FIT_OPTIONS: dict[str, Any] = {"combine": "mean", "level": 0.95, "n_boot": 1000, "seed": 0}


def select(sweep, **equal):
    """The sub-sweep whose pass-through columns equal ``equal`` (e.g. optimizer="sgd")."""
    frame = sweep.to_frame()
    for col, value in equal.items():
        frame = frame[frame[col] == value]
    if frame.empty:
        raise InputError(f"sweep has no rows with {equal}")
    return load_sweep(frame.reset_index(drop=True), metric_name=sweep.metric_name)


def b_crit_curve(sweep, targets):
    """``critical_batch_curve`` with ``FIT_OPTIONS``, failures reported per target."""
    return critical_batch_curve(sweep, np.asarray(targets, dtype=float), errors="report",
                                **FIT_OPTIONS)


def b_crit_points(sweep, targets) -> np.ndarray:
    """B_crit point estimates at ``targets`` (NaN where not fitted), with no interval.

    ``critical_batch_curve`` with ``n_boot=0``: its point estimate is the same whatever
    the interval options (``FIT_OPTIONS``'s combine rule is kept); for the seed
    bootstrap of `empirical_batch.validation.uncertainty` and the target-shift check.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        curve = critical_batch_curve(sweep, np.asarray(targets, dtype=float), errors="report",
                                     combine=FIT_OPTIONS["combine"], n_boot=0,
                                     interval="percentile")
    return curve.b_crit
