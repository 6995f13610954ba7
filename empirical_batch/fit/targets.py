r"""Target losses for a critical-batch curve, chosen by a fixed rule before any fit.

$B_{crit}$ is defined at a target loss (McCandlish et al. 2018, §2.3: the steps and
examples a run needs to *first reach* it), and it grows as the target gets harder
(§3, Table 1). Which targets a sweep can support depends on the sweep; choosing them by
looking at the fits would bias the result, so `choose_targets` fixes them from the
losses alone:

Let $L_0$ be the median loss at step 0, and for each batch size let its *best loss* be
the lowest loss that every seed of one learning rate reaches (the minimum over learning
rates of the worst seed's minimum: seeds are averaged, so a configuration reaches a
target only if every seed does). With $n$ batch sizes,
$K = \min(n, \max(K_{min}, \lceil n/2 \rceil))$ (`reach_count`; $K_{min}$ =
``TARGET_MIN_REACH`` = 5) and $L_K$ the $K$-th lowest best loss, the hardest target is

$$L_{hard} = (1 + m)\,L_K, \qquad m = \text{TARGET\_MARGIN} = 2\,\%,$$

so at least $K$ batch sizes reach it with a relative margin $m$ to spare, and for each
fraction $f$ (e.g. 1/2, 1/4, 1/8, 1/16, 0)

$$L_f = L_{hard} + f\,(L_0 - L_{hard}).$$

A target is never at one configuration's best loss: any target within a relative
``TARGET_CLEARANCE`` ($10^{-3}$) of the best loss of some (batch size, learning rate),
where that configuration stops reaching it, is moved up to $(1 + 2\cdot10^{-3})$ times
that loss, repeated until clear (`clear_of`). A target reached only by equality makes
$B_{crit}$ jump when the target moves by rounding error (with the hardest target at the
median best loss, moving it by $10^{-9}$ changed $B_{crit}$ by up to 43 % on the
validation harness's sweeps).

`common_target` is one target for several sweeps of one task (e.g. two optimizers): the
easiest of their hardest targets, clear of every configuration's best loss in all of
them, so that their $B_{crit}$ are compared at one loss.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ..errors import InputError

__all__ = ["TARGET_CLEARANCE", "TARGET_MARGIN", "TARGET_MIN_REACH", "best_losses",
           "choose_targets", "clear_of", "common_target", "reach_count"]

#: relative margin of the hardest target above the K-th lowest best loss
TARGET_MARGIN = 0.02
#: K, the number of batch sizes that must reach the hardest target with that margin,
#: is at least this (all batch sizes when there are fewer) and at least half of them
TARGET_MIN_REACH = 5
#: no target lies within this relative distance of a configuration's best loss
TARGET_CLEARANCE = 1e-3


def best_losses(frame: pd.DataFrame) -> tuple[float, pd.Series, pd.Series]:
    """L_0 and the best losses of the module doc: per batch size and per configuration.

    ``frame`` is a sweep in the sweep schema (``batch_size``, ``step``, ``metric``;
    ``learning_rate`` and ``seed`` where the sweep has them). Returns
    ``(l0, per_batch_size, per_config)``: the median loss at step 0, the best loss
    every seed of one learning rate reaches at each batch size (min over learning rates
    of the worst seed's minimum), and that worst-seed minimum per (batch size, learning
    rate).
    """
    missing = [c for c in ("batch_size", "step", "metric") if c not in frame.columns]
    if missing:
        raise InputError(f"the sweep lacks columns {missing}")
    finite = frame[np.isfinite(frame["metric"])]
    if finite.empty:
        raise InputError("every logged loss is NaN/inf: no targets can be chosen")
    l0 = float(finite.loc[finite.step == 0, "metric"].median())
    keys = ["batch_size", "learning_rate"] if "learning_rate" in finite else ["batch_size"]
    seed = ["seed"] if "seed" in finite else []
    per_run = finite.groupby([*keys, *seed])["metric"].min()
    per_config = per_run.groupby(level=keys).max() if seed else per_run
    best = per_config.groupby(level="batch_size").min()
    return l0, best, per_config


def reach_count(n_batch_sizes: int, min_reach: int = TARGET_MIN_REACH) -> int:
    """K = min(n, max(min_reach, ⌈n/2⌉)): batch sizes that must reach the hardest target."""
    return int(min(n_batch_sizes, max(min_reach, -(-n_batch_sizes // 2))))


def clear_of(target: float, losses: ArrayLike, clearance: float = TARGET_CLEARANCE) -> float:
    """``target`` moved up past every loss in ``losses`` within relative ``clearance``.

    Each loss ``b`` with |target − b| ≤ clearance·|b| moves the target to
    b + 2·clearance·|b|; repeated until no loss is that close (it only moves up, past
    finitely many losses, so it ends).
    """
    vals = np.asarray(losses, float)
    vals = np.sort(vals[np.isfinite(vals)])
    t = float(target)
    for b in vals:  # ascending: a move past b can only bring later (larger) losses near
        if abs(t - b) <= clearance * abs(b):
            t = b + 2 * clearance * abs(b)
    return t


def choose_targets(frame: pd.DataFrame, fractions: Iterable[float], *,
                   margin: float = TARGET_MARGIN,
                   min_reach: int = TARGET_MIN_REACH,
                   clearance: float = TARGET_CLEARANCE) -> np.ndarray:
    r"""Targets by the rule of the module docstring (descending, distinct).

    $L_{hard} = (1 + m) L_K$ with $L_K$ the $K$-th lowest per-batch-size best loss
    ($K$ = `reach_count`), $L_f = L_{hard} + f (L_0 - L_{hard})$ for each $f$ of
    ``fractions``, each moved clear of every configuration's best loss (`clear_of`).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"batch_size": [1, 1, 2, 2, 4, 4], "step": [0, 9] * 3,
    ...                       "metric": [3.0, 1.0, 3.0, 1.1, 3.0, 1.5]})
    >>> choose_targets(frame, [0.5, 0.0]).round(4).tolist()
    [2.265, 1.53]
    """
    if not margin > 0 or not clearance > 0 or 2 * clearance >= margin:
        raise InputError(f"need margin > 2 × clearance > 0, got margin={margin}, "
                         f"clearance={clearance}")
    l0, best, per_config = best_losses(frame)
    k = reach_count(len(best), min_reach)
    l_k = float(np.sort(best.to_numpy(float))[k - 1])
    if not l_k > 0:
        raise InputError(f"a relative target margin needs positive losses; the {k}-th lowest "
                         f"best loss over batch sizes is {l_k:.4g}")
    l_hard = (1 + margin) * l_k
    if not l_hard < l0:
        raise InputError(f"no training progress: {1 + margin:g} × the {k}-th lowest best "
                         f"loss over batch sizes, {l_hard:.4g}, is >= initial loss {l0:.4g}")
    targets = [clear_of(l_hard + f * (l0 - l_hard), per_config.to_numpy(float), clearance)
               for f in fractions]
    out: np.ndarray = np.unique(targets)[::-1]
    return out


def common_target(frames: Iterable[pd.DataFrame], hardest: ArrayLike) -> float:
    """The easiest of the ``hardest`` targets (one per sweep), clear of every
    configuration's best loss in every sweep of ``frames`` (module doc)."""
    losses = np.concatenate([best_losses(f)[2].to_numpy(float) for f in frames])
    return clear_of(float(np.max(hardest)), losses)
