r"""Grow the batch during training from the noise scale measured so far.

`AdaptiveBatchRule` is the decision of the framework callbacks'
closed loop (`empirical_batch.integrations.hf.AdaptiveBatchCallback`,
`empirical_batch.integrations.lightning.AdaptiveBatchCallback`) and of its check on the
noisy quadratic (``analysis/adaptive_savings.py``). The batch only grows, by powers of
two of the current batch (the callbacks double the gradient-accumulation steps).
Policies:

``"doubling"``
    Merrill et al. (2025): double the batch when the noise scale has grown past twice
    the batch. The statistical test: the *lower end* of the measured noise scale's
    confidence interval (the collectors' Fieller interval at ``level``) reaches
    $2B$, i.e. $B_{noise} \ge 2B$ is supported at one-sided level $(1 + level)/2$.
``"app_d"``
    McCandlish et al. (2018, App. D): $B = \sqrt{r\,\mathcal B}$ for the exchange rate
    $r$ (examples one step is worth), the best tradeoff of steps and examples when the
    noise scale changes along training; the batch moves to the power-of-two multiple
    of the current batch nearest (in log) to it.
``"b_noise"``
    $B = \mathcal B$, the critical batch itself (App. D's rule at $r = \mathcal B$).

The measured quantity is $B_{simple}$, which equals $B_{noise}$ when the Hessian is a
multiple of the identity (eq. 2.9); it stands in for $B_{noise}$ here, as in the
paper's experiments. The learning rate follows the batch through
`empirical_batch.transfer.transfer` with the chosen rule.

References
----------
S. McCandlish, J. Kaplan, D. Amodei. "An Empirical Model of Large-Batch Training."
arXiv:1812.06162 (2018), App. D.

W. Merrill, S. Arora, D. Groeneveld, H. Hajishirzi. "Critical Batch Size Revisited: A
Simple Empirical Approach to Large-Batch Language Model Training." arXiv:2505.23971
(2025).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from .._validate import as_scalar, check_count, positive_float
from ..errors import InputError
from ..params import Options, check_fields

__all__ = ["ADAPTIVE_POLICIES", "AdaptiveBatchRule"]

ADAPTIVE_POLICIES = ("doubling", "app_d", "b_noise")


@dataclass(frozen=True)
class AdaptiveBatchRule:
    """When and how far to grow the batch.

    Parameters
    ----------
    policy : {"doubling", "app_d", "b_noise"}
        See the module notes.
    exchange_rate : float, optional
        $r$ of ``"app_d"`` (required there, in examples per step).
    max_batch : float
        The batch never exceeds this (default: unbounded).
    min_steps : int
        Measured steps before the first change and between two changes (the estimate
        settles on the new batch's steps first).

    Examples
    --------
    >>> rule = AdaptiveBatchRule("doubling")
    >>> rule.next_batch(8, b_noise=30.0, lower=17.0), rule.next_batch(8, 30.0, 12.0)
    (16, 8)
    >>> AdaptiveBatchRule("app_d", exchange_rate=100.0).next_batch(8, b_noise=40.0)
    64
    """

    policy: str = "doubling"
    exchange_rate: float | None = None
    max_batch: float = math.inf
    min_steps: int = 10

    def __post_init__(self) -> None:
        check_fields(self, {"policy": Options(ADAPTIVE_POLICIES)})
        if self.policy == "app_d":
            r = as_scalar(self.exchange_rate)
            if not (isinstance(r, int | float) and not isinstance(r, bool) and
                    math.isfinite(r) and r > 0):
                raise InputError(f"policy 'app_d' needs exchange_rate > 0 (examples one "
                                 f"step is worth), got {r!r}")
            object.__setattr__(self, "exchange_rate", float(r))
        elif self.exchange_rate is not None:
            raise InputError(f"exchange_rate applies to policy 'app_d' only, not "
                             f"{self.policy!r}")
        object.__setattr__(self, "max_batch",
                           positive_float(self.max_batch, "max_batch", allow_inf=True))
        object.__setattr__(self, "min_steps", check_count(self.min_steps, "min_steps", 1))

    def target(self, b_noise: float) -> float:
        """The batch the policy aims at for a noise scale (``"doubling"``: ``b_noise/2``,
        the batch it doubles past)."""
        if self.policy == "app_d":
            return math.sqrt(self.exchange_rate * b_noise)  # type: ignore[operator]
        return b_noise if self.policy == "b_noise" else b_noise / 2.0

    def next_batch(self, batch: int, b_noise: float, lower: float | None = None) -> int:
        """The batch for the next steps: ``batch`` times a power of two >= 1.

        ``b_noise`` is the current estimate, ``lower`` the lower end of its interval
        (``"doubling"`` tests it; without one, the estimate itself). An estimate that is
        not a positive finite number (the gradient not resolved yet) changes nothing.
        """
        batch = check_count(batch, "batch", 1)
        b = _estimate(b_noise, "b_noise")
        if not (math.isfinite(b) and b > 0):
            return batch
        if self.policy == "doubling":
            test = b if lower is None else _estimate(lower, "lower")
            grow = 1 if math.isfinite(test) and test >= 2.0 * batch else 0
        else:
            grow = max(0, round(math.log2(self.target(b) / batch)))
        while grow and batch * 2 ** grow > self.max_batch:
            grow -= 1
        return int(batch * 2 ** grow)


def _estimate(value: object, name: str) -> float:
    """A measured value as a float: any real number (NaN or a value <= 0: not resolved
    yet), a numpy scalar too; text, a boolean or another object is refused naming
    ``name``."""
    v = as_scalar(value)
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise InputError(f"{name} must be a real number (NaN while not resolved), got "
                         f"{type(value).__name__} {value!r:.40}")
    return float(v)
