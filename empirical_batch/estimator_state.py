"""Checks of a `GNSEstimator`'s settings and of its saved state (`state_dict`).

`GNSEstimator.load_state_dict` checks every entry here before it changes anything, so a
bad state leaves the estimator as it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._validate import as_array, as_float, as_scalar
from .errors import InputError, NotFoundError
from .params import check

__all__ = ["check_beta", "check_dataset_size", "check_max_history", "checked_state"]


def check_dataset_size(dataset_size: object, b_big: ArrayLike) -> float:
    """An integer >= 2 (`params.DOMAINS`) at least as large as every ``b_big``."""
    dataset_size = float(check("dataset_size", dataset_size))
    if np.any(np.asarray(b_big) > dataset_size):
        raise InputError(f"batches of {float(np.max(b_big)):g} cannot be drawn without "
                         f"replacement from dataset_size={dataset_size} examples")
    return float(dataset_size)


def check_beta(beta: object) -> float:
    """The EMA decay, in [0, 1)."""
    return float(check("beta", as_float(beta, "beta")))


def check_max_history(value: object) -> int | None:
    """``None`` (keep every step) or a positive integer."""
    if value is None:
        return None
    if isinstance(as_scalar(value), bool) or not isinstance(as_scalar(value), int) or \
            as_scalar(value) < 1:
        raise InputError(f"max_history must be a positive integer or None, got {value!r}")
    return int(as_scalar(value))


def checked_state(state: object, dataset_size: object,
                  columns: tuple[str, ...]) -> dict[str, Any]:
    """The entries of a `GNSEstimator.state_dict`, each checked (type, finiteness, sign),
    as plain Python values; raises before anything is changed."""
    if not isinstance(state, dict):
        raise InputError(f"state must be a dict (from state_dict()), got {type(state).__name__}")
    missing = [k for k in ("beta", "keep_history", "steps", "w", "w2", "mean_s", "mean_g",
                           "css", "cgg", "csg", "history") if k not in state]
    if missing:
        raise NotFoundError(f"state is missing the entry {missing[0]!r}")
    out: dict[str, Any] = {"beta": check_beta(state["beta"])}
    if not isinstance(state["keep_history"], bool | np.bool_):
        raise InputError(f"state['keep_history'] must be a bool, got {state['keep_history']!r}")
    out["keep_history"] = bool(state["keep_history"])
    out["max_history"] = check_max_history(state.get("max_history"))
    ds = state.get("dataset_size", dataset_size)
    out["dataset_size"] = None if ds is None else int(check_dataset_size(ds, 0))
    steps = state["steps"]
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise InputError(f"state['steps'] must be an integer >= 0, got {steps!r}")
    out["steps"] = int(steps)
    for k in ("w", "w2", "mean_s", "mean_g", "css", "cgg", "csg"):
        out[k] = as_float(state[k], f"state[{k!r}]")
    for k in ("w", "w2", "css", "cgg"):
        if out[k] < 0:
            raise InputError(f"state[{k!r}] must be >= 0 (a sum of weights or squares), "
                             f"got {out[k]!r}")
    if (out["steps"] == 0) != (out["w"] == 0) or out["w2"] > out["w"] * out["w"] * (1 + 1e-12):
        raise InputError(f"state's weights w={out['w']!r}, w2={out['w2']!r} do not fit "
                         f"steps={out['steps']} (w = 0 exactly when steps = 0, w2 <= w^2)")
    hist = state["history"]
    if not isinstance(hist, dict):
        raise InputError(f"state['history'] must be a dict of lists, got {type(hist).__name__}")
    rows = {}
    for c in columns:
        if c not in hist:
            raise NotFoundError(f"state['history'] is missing the column {c!r}")
        col = as_array(hist[c], f"state['history'][{c!r}]", ndim=1)
        rows[c] = [int(v) for v in col] if c == "step" else col.tolist()
    if len({len(v) for v in rows.values()}) > 1:
        raise InputError("state['history'] columns differ in length: "
                         f"{ {c: len(v) for c, v in rows.items()} }")
    out["history"] = rows
    return out
