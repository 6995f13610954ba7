r"""The critical batch measured directly, by branched training (Merrill et al. 2025).

From a checkpoint of a run at batch size $B$, train short branches at $kB$
($k = 1, 2, 4, \dots$) for the same number of examples $\Delta$ each
($\Delta / (kB)$ steps), with the learning rate scaled by a rule $f(k)$
($\sqrt{k}$ for Adam, $k$ for SGD, or the user's). Below the critical batch a
larger batch with a suitably scaled learning rate loses nothing per example, so the
branch's loss at the end keeps up with the $k = 1$ branch; above it the branch falls
behind. The local critical batch is the largest $kB$ that keeps up.

Merrill et al. call a branch "keeping up" when its smoothed loss is within a
hand-picked tolerance $\epsilon$ of the reference. Here each factor is run with the
same seeds as the reference ($k = 1$), the per-seed differences

$$
d_k(s) = \bar L_k(s) - \bar L_1(s)
$$

(smoothed losses: the mean over the last ``tail`` fraction of each branch's examples)
are compared with a one-sided paired $t$-test of $H_0: E[d_k] \le \tau$ (``tolerance``,
0 by default), and a branch *falls behind* when $H_0$ is rejected at ``level``. The
critical batch is bracketed by the last factor that keeps up and the first that falls
behind (factors beyond the first failure are not trusted to keep up, whatever their
own test says; ``keeps_up`` reports each test as it came out):

$$
B_{crit} \in [k^\ast B,\; k_{next} B).
$$

If every factor keeps up only the lower bound is known; if the first factor above 1
already falls behind, $B_{crit} \in [B, k_2 B)$. A branch whose loss becomes non-finite
(it diverged with the scaled rate) falls behind and is flagged (``diverged``); a
diverged reference branch is an error. Seeds whose branches all give the same loss are
copies of one run (a ``train_steps`` that ignores its seed): the test then has no
variance to measure and is refused. Seeds must pair: ``train_steps``
should draw its batches from ``seed`` so that the $k$ branches of one seed share their
data order as far as possible, which removes most of the seed-to-seed variance from
$d_k$.

The answer depends on the learning-rate rule and on the base learning rate: on SGD
on a noisy quadratic with $B_{noise} \approx 107$, linear scaling from a base rate
of 0.02 brackets it as $[64, 128)$, from 0.01 as $[256, 512)$
(``tests/test_branched.py``); with a base rate far from optimal, a larger batch with
a scaled rate can even beat the reference. Use the run's tuned rate and the rule its
optimizer follows.

References
----------
W. Merrill, S. Arora, D. Groeneveld, H. Hajishirzi. "Critical Batch Size Revisited: A
Simple Empirical Approach to Large-Batch Language Model Training." arXiv:2505.23971
(2025).
"""

from __future__ import annotations

import copy
import inspect
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ._validate import as_float, as_scalar
from .errors import InputError
from .params import Domain, validate_params
from .result import Interval, Result
from .rules import RULES, ratio_rules

__all__ = ["BranchedCriticalBatch", "branched_critical_batch"]

TrainSteps = Callable[..., tuple[Any, Sequence[float]]]

# the learning-rate rules of empirical_batch.rules that depend on the batch factor alone
# (sqrt: Adam-like, linear: SGD), and "constant" (the rate kept)
_LR_RULES: dict[str, Callable[[float], float]] = {
    **{name: RULES[name].factor for name in ratio_rules()},
    "constant": RULES["unchanged"].factor,
}


@dataclass(frozen=True, repr=False)
class BranchedCriticalBatch(Result):
    """The result of `branched_critical_batch`.

    ``b_crit_interval`` (an `Interval` whose ``level`` is the test's) brackets the
    local critical batch (``high`` is ``inf`` when every factor kept up). ``losses``
    holds the smoothed branch losses, one row per factor and one column per seed.
    """

    batch_size: int
    examples: int
    factors: tuple[int, ...]
    learning_rates: tuple[float, ...]
    seeds: tuple[int, ...]
    losses: np.ndarray = field(repr=False)
    mean_difference: tuple[float, ...] = field(repr=False)
    p_value: tuple[float, ...] = field(repr=False)
    keeps_up: tuple[bool, ...] = field(repr=False)
    tolerance: float
    b_crit_interval: Interval
    #: a seed of this factor diverged (a non-finite loss): it falls behind
    diverged: tuple[bool, ...] = field(repr=False, default=())

    @property
    def level(self) -> float:
        """Confidence level of the one-sided test per factor."""
        return self.b_crit_interval.level

    @property
    def status(self) -> str:
        """``"identified"`` (bracketed) or ``"lower_bound"`` (every factor kept up)."""
        return "lower_bound" if math.isinf(self.b_crit_interval.high) else "identified"

    def to_frame(self) -> pd.DataFrame:
        """One row per factor: batch size, learning rate, loss, difference, p, verdict."""
        return pd.DataFrame(
            {
                "factor": self.factors,
                "batch_size": [k * self.batch_size for k in self.factors],
                "learning_rate": self.learning_rates,
                "steps": [self.examples // (k * self.batch_size) for k in self.factors],
                "loss_mean": self.losses.mean(axis=1),
                "difference": self.mean_difference,
                "p_value": self.p_value,
                "keeps_up": self.keeps_up,
                "diverged": self.diverged or (False,) * len(self.factors),
            }
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "examples": self.examples,
            "b_crit_low": self.b_crit_interval.low,
            "b_crit_high": self.b_crit_interval.high,
            "status": self.status,
            "level": self.level,
            "tolerance": self.tolerance,
            "seeds": list(self.seeds),
            "factors": self.to_frame().to_dict(orient="records"),
            "losses": self.losses.tolist(),
            "diverged": list(self.diverged),
        }

    @classmethod
    def from_dict(cls, d: Any) -> BranchedCriticalBatch:
        """The result of `to_dict` (its ``factors`` rows, ``losses`` and the flat
        ``b_crit_low``/``b_crit_high``/``level``)."""
        from ._revive import array, number
        from .errors import DataError

        try:
            rows = d["factors"]
            return cls(
                batch_size=int(d["batch_size"]), examples=int(d["examples"]),
                factors=tuple(int(r["factor"]) for r in rows),
                learning_rates=tuple(number(r["learning_rate"]) for r in rows),
                seeds=tuple(int(v) for v in d["seeds"]), losses=array(d["losses"]),
                mean_difference=tuple(number(r["difference"]) for r in rows),
                p_value=tuple(number(r["p_value"]) for r in rows),
                keeps_up=tuple(bool(r["keeps_up"]) for r in rows),
                tolerance=number(d["tolerance"]),
                b_crit_interval=Interval(number(d["b_crit_low"]), number(d["b_crit_high"]),
                                         number(d["level"])),
                diverged=tuple(bool(v) for v in d.get("diverged", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"BranchedCriticalBatch.from_dict: not its to_dict() "
                            f"({type(exc).__name__}: {exc})") from None

    def __repr__(self) -> str:
        return (
            f"BranchedCriticalBatch(b_crit in [{self.b_crit_interval.low:g}, "
            f"{self.b_crit_interval.high:g}), "
            f"status={self.status!r}, base batch {self.batch_size}, "
            f"{len(self.seeds)} seeds, level {self.level:g})"
        )

    def summary(self) -> str:
        """The bracket and the per-factor table as text."""
        return f"{self!r}\n{self.to_frame().to_string(index=False)}"


def _lr_factor(rule: str | Callable[[float], float]) -> Callable[[float], float]:
    if callable(rule):
        return rule
    if rule not in _LR_RULES:
        raise InputError(f"lr_rule must be one of {sorted(_LR_RULES)} or a callable, got {rule!r}")
    return _LR_RULES[rule]


def _smoothed(losses: Sequence[float], tail: float, where: str, n_steps: int) -> float:
    """Mean of the last ``tail`` of the losses; NaN when the branch diverged. One loss
    per step is required: a shorter or longer list would compare other parts of the
    branches."""
    try:
        arr = np.asarray(losses, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"train_steps returned losses that are not numbers for {where}: "
                         f"{exc}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"train_steps returned no losses for {where}")
    if arr.size != n_steps:
        raise InputError(f"train_steps returned {arr.size} losses for {where}, which ran "
                         f"{n_steps} steps: return one loss per step")
    if not np.all(np.isfinite(arr)):
        return math.nan
    n = max(1, math.ceil(tail * arr.size))
    return float(arr[-n:].mean())


@validate_params(lr=Domain(0.0, meaning="learning rate at the run's batch size"),
                 tail=Domain(0.0, 1.0, True, False, meaning="fraction of a branch compared"),
                 level="level",
                 tolerance=Domain(0.0, low_open=False, meaning="loss a branch may lose"))
def branched_critical_batch(
    train_steps: TrainSteps,
    state: Any,
    batch_size: int,
    *,
    examples: int,
    lr: float,
    factors: Sequence[int] = (1, 2, 4, 8, 16),
    lr_rule: str | Callable[[float], float] = "sqrt",
    seeds: Sequence[int] = (0, 1, 2, 3),
    tail: float = 0.2,
    level: float = 0.95,
    tolerance: float = 0.0,
    copy_state: Callable[[Any], Any] = copy.deepcopy,
) -> BranchedCriticalBatch:
    r"""Bracket the local critical batch by branching a run at several batch sizes.

    Parameters
    ----------
    train_steps
        ``train_steps(state, batch_size, lr, n_steps[, seed=s]) -> (state, losses)``:
        train ``n_steps`` optimizer steps from ``state`` and return the new state and
        the training loss of each step. ``seed`` is passed when the function accepts a
        parameter of that name (use it for the data order and any other randomness).
        Framework-agnostic: ``state`` is whatever the function understands (a model
        and optimizer, a ``state_dict``, a JAX pytree).
    state
        The checkpoint to branch from; each branch gets ``copy_state(state)``.
    batch_size
        The run's batch size $B$ at the checkpoint.
    examples
        Examples $\Delta$ each branch trains on; a branch at $kB$ takes
        $\lfloor\Delta/(kB)\rfloor$ steps (at least one).
    lr
        The run's learning rate at $B$; a branch at $kB$ uses ``lr * f(k)``.
    factors
        Increasing integers starting at 1 (the reference branch).
    lr_rule
        ``"sqrt"`` (Adam-like), ``"linear"`` (SGD), ``"constant"`` or a callable $f(k)$.
    seeds
        At least two; every factor runs with each of them (paired comparison).
    tail
        Fraction of each branch (by examples) whose mean loss is compared.
    level
        Confidence of the one-sided paired $t$-test that declares a branch behind.
    tolerance
        $\tau$: how much worse than the reference a branch may be and still keep up
        (0: any significant loss of per-example progress counts).

    Returns
    -------
    BranchedCriticalBatch

    Examples
    --------
    A toy run whose branches fall behind above $4B$:

    >>> def train_steps(state, batch_size, lr, n_steps, seed=0):
    ...     rng = np.random.default_rng(seed)
    ...     k = batch_size / 32
    ...     final = 1.0 + 0.1 * max(0.0, k - 4) + 1e-3 * rng.standard_normal()
    ...     return state, [final] * n_steps
    >>> r = branched_critical_batch(train_steps, None, 32, examples=32 * 64, lr=1e-3)
    >>> tuple(r.b_crit_interval)
    (128.0, 256.0)
    """
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    ks = [int(k) for k in factors]
    if len(ks) < 2 or ks[0] != 1 or any(b <= a for a, b in itertools.pairwise(ks)):
        raise InputError(
            f"factors must be increasing integers starting at 1, got {list(factors)!r}"
        )
    examples = as_scalar(examples)
    if not isinstance(examples, int) or isinstance(examples, bool) or \
            examples < ks[-1] * batch_size:
        raise InputError(
            f"examples={examples!r} is fewer than one step at the largest branch "
            f"({ks[-1]} x {batch_size}); give at least {ks[-1] * batch_size}"
        )
    lr = as_float(lr, "lr")
    seeds = tuple(int(s) for s in seeds)
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise InputError(f"seeds must hold at least two distinct seeds, got {seeds!r}")
    f = _lr_factor(lr_rule)
    lrs = tuple(float(lr * f(k)) for k in ks)
    if not all(math.isfinite(x) and x > 0 for x in lrs):
        raise InputError(f"lr_rule gave non-positive or non-finite learning rates {lrs!r}")
    takes_seed = "seed" in inspect.signature(train_steps).parameters

    losses = np.empty((len(ks), len(seeds)))
    for i, (k, rate) in enumerate(zip(ks, lrs, strict=True)):
        n_steps = examples // (k * batch_size)
        for j, s in enumerate(seeds):
            kwargs = {"seed": s} if takes_seed else {}
            out = train_steps(copy_state(state), k * batch_size, rate, n_steps, **kwargs)
            if not (isinstance(out, tuple) and len(out) == 2):
                raise InputError("train_steps must return a (state, losses) pair")
            losses[i, j] = _smoothed(out[1], tail, f"factor {k}, seed {s}", n_steps)

    bad = np.isnan(losses)
    if bad[0].any():
        raise InputError(
            f"the reference branch (factor 1) diverged (a non-finite loss) for seed(s) "
            f"{[s for s, b in zip(seeds, bad[0], strict=True) if b]}: lower lr")
    if np.all(losses == losses[:, :1]):
        raise InputError(
            f"every branch gave the same smoothed loss for all seeds {list(seeds)}: the "
            "seeds are copies of one run, so the paired test has no seed-to-seed "
            "variation to measure and no bracket can be identified. Have train_steps draw "
            "its data order (and any other randomness) from its seed argument")
    diverged = np.asarray(bad.any(axis=1), dtype=bool)  # a diverged seed: cannot keep up
    diffs = losses[1:] - losses[0]
    n = len(seeds)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = diffs.mean(axis=1)
        sd = diffs.std(axis=1, ddof=1)
        t = (mean - tolerance) / (sd / math.sqrt(n))
        # identical differences across seeds: only the sign of mean - tolerance counts
        t = np.where(sd == 0, np.sign(mean - tolerance) * np.inf, t)
    p = stats.t.sf(np.nan_to_num(t, nan=0.0, posinf=np.inf, neginf=-np.inf), df=n - 1)
    p = np.where(diverged[1:], 0.0, p)
    mean = np.where(diverged[1:], np.inf, mean)
    behind = p < 1.0 - level
    keeps = [True] + [not b for b in behind]

    last = 0
    while last + 1 < len(ks) and keeps[last + 1]:
        last += 1
    low = float(ks[last] * batch_size)
    high = float(ks[last + 1] * batch_size) if last + 1 < len(ks) else math.inf
    return BranchedCriticalBatch(
        batch_size=int(batch_size),
        examples=int(examples),
        factors=tuple(ks),
        learning_rates=lrs,
        seeds=seeds,
        losses=losses,
        mean_difference=(0.0, *map(float, mean)),
        p_value=(1.0, *map(float, p)),
        keeps_up=tuple(bool(x) for x in keeps),
        diverged=tuple(bool(x) for x in diverged),
        tolerance=float(tolerance),
        b_crit_interval=Interval(low, high, level),
    )
