"""Machine-readable output of the commands (``--json``, ``--csv``)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

__all__ = ["dumps"]


def _clean(x: Any) -> Any:
    """JSON-safe: numpy scalars to Python, tuples to lists, inf to "inf", NaN to null."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_clean(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float):
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
    return x


def dumps(obj: Any) -> str:
    """``json.dumps`` of ``obj`` after `_clean`: strict JSON (no NaN/Infinity tokens);
    infinite values are the strings ``"inf"``/``"-inf"``, undefined ones ``null``."""
    return json.dumps(_clean(obj), indent=1, allow_nan=False)
