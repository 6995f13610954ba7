r"""The steps/examples tradeoff (McCandlish et al. 2018, §2.3).

If each optimizer step makes progress proportional to $1/(1 + B_{noise}/B)$,
the steps S and examples E = BS needed to reach a fixed loss obey

$$
\left(\frac{S}{S_{min}} - 1\right)\left(\frac{E}{E_{min}} - 1\right) = 1,
\qquad B_{crit} = \frac{E_{min}}{S_{min}},
$$

so $S(B) = S_{min}(1 + B_{crit}/B)$ and $E(B) = E_{min}(1 + B/B_{crit})$.

`adaptive_schedule` follows a noise scale $\mathcal{B}(s)$ that changes
during training (App. D): the batch size $B(s) = \sqrt{r\mathcal{B}(s)}$ and the
gain $\gamma = E[\sqrt{\mathcal{B}}]^2/E[\mathcal{B}] \le 1$ it brings.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._numeric import trapezoid
from ._validate import (
    as_array,
    as_float,
    check_broadcast,
    check_count,
    check_positive,
    scalar_or_array,
)
from .errors import InputError
from .params import Domain, check, validate_params
from .result import Result

__all__ = ["AdaptiveSchedule", "Tradeoff", "adaptive_schedule"]



@dataclass(frozen=True)
class Tradeoff(Result):
    r"""The hyperbola $(S/S_{min} - 1)(E/E_{min} - 1) = 1$.

    Parameters
    ----------
    s_min : float
        Fewest optimizer steps to reach the target (the infinite-batch limit).
    e_min : float
        Fewest training examples to reach the target (the small-batch limit).

    Examples
    --------
    >>> t = Tradeoff(s_min=1000, e_min=64000)
    >>> t.b_crit
    64.0
    >>> t.steps(64), t.examples(64)
    (2000.0, 128000.0)
    """

    s_min: float
    e_min: float

    def __post_init__(self) -> None:
        for name in ("s_min", "e_min"):
            object.__setattr__(self, name, float(check(name, as_float(getattr(self, name),
                                                                        name))))
        ratio = self.e_min / self.s_min
        if not (math.isfinite(ratio) and ratio > 0):
            raise InputError(f"e_min / s_min = B_crit must be a positive finite float, got "
                             f"e_min={self.e_min!r} and s_min={self.s_min!r}")

    @classmethod
    @validate_params(b_crit="b_crit")
    def from_b_crit(cls, b_crit: float, *, s_min: float | None = None,
                    e_min: float | None = None) -> Tradeoff:
        """The tradeoff with critical batch ``b_crit`` and one of ``s_min``, ``e_min``.

        >>> Tradeoff.from_b_crit(64, s_min=1000)
        Tradeoff(s_min=1000.0, e_min=64000.0)
        """
        b = as_float(b_crit, "b_crit")
        if (s_min is None) == (e_min is None):
            raise InputError("give exactly one of s_min and e_min with b_crit")
        if s_min is not None:
            return cls(s_min=s_min, e_min=b * as_float(s_min, "s_min"))
        e = as_float(e_min, "e_min")
        return cls(s_min=e / b, e_min=e)

    @validate_params(sigma="sigma")
    def sample_steps(self, batch_sizes: ArrayLike, *, n_seeds: int = 1, sigma: float = 0.1,
                     rng: int | np.random.Generator | None = None) -> Any:
        r"""A synthetic steps-to-target table: $S(B)\,e^{\sigma z}$ per seed.

        For testing fits against a known tradeoff: one row per (batch size, seed) with
        columns ``batch_size``, ``steps`` and ``seed``; ``z`` standard normal from
        ``rng`` (a seed or a ``numpy.random.Generator``).

        >>> Tradeoff(s_min=100, e_min=800).sample_steps([8, 16], sigma=0.0).steps.tolist()
        [200.0, 150.0]
        """
        import pandas as pd

        n_seeds = check_count(n_seeds, "n_seeds", 1)
        s = as_float(sigma, "sigma")
        gen = np.random.default_rng(rng)
        b = np.repeat(check_positive(batch_sizes, "batch_sizes").reshape(-1), n_seeds)
        steps = np.asarray(self.steps(b)) * np.exp(s * gen.standard_normal(b.size))
        return pd.DataFrame({"batch_size": b, "steps": steps,
                             "seed": np.tile(np.arange(n_seeds), b.size // n_seeds)})

    def to_frame(self, batch_sizes: ArrayLike | None = None) -> Any:
        """S(B), E(B), S/S_min and E/E_min for the given batch sizes (default: the powers
        of two from B_crit/64 to 64 B_crit), as a DataFrame."""
        import pandas as pd

        if batch_sizes is None:
            k = np.round(np.log2(self.b_crit))
            batch_sizes = 2.0 ** np.arange(k - 6, k + 7)
        b = np.atleast_1d(check_positive(batch_sizes, "batch_sizes"))
        steps, examples = self.steps(b), self.examples(b)
        return pd.DataFrame({
            "batch_size": b, "steps": steps, "examples": examples,
            "steps/s_min": steps / self.s_min, "examples/e_min": examples / self.e_min,
        })

    @property
    def b_crit(self) -> float:
        r"""$B_{crit} = E_{min}/S_{min}$ (eq. 2.12)."""
        return self.e_min / self.s_min

    def steps(self, batch_size: ArrayLike) -> Any:
        r"""$S(B) = S_{min}(1 + B_{crit}/B)$."""
        b = check("batch_size", batch_size)
        with np.errstate(over="ignore"):
            return _in_range(self.s_min + self.e_min / b, "steps")  # = S_min (1 + B_crit/B)

    def examples(self, batch_size: ArrayLike) -> Any:
        r"""$E(B) = E_{min}(1 + B/B_{crit})$."""
        b = check("batch_size", batch_size)
        with np.errstate(over="ignore"):
            return _in_range(self.e_min + self.s_min * b, "examples")  # = E_min (1 + B/B_crit)

    def batch_size_for_steps(self, steps: ArrayLike) -> Any:
        r"""Batch size that reaches the target in ``steps`` steps.

        $B = B_{crit}/(S/S_{min} - 1)$.

        Raises ``ValueError`` for ``steps <= s_min``, which no batch size reaches.
        """
        s = check("steps", steps)
        if np.any(s <= self.s_min):
            raise InputError(
                f"steps must be > s_min={self.s_min:.6g} (no batch size reaches the "
                f"target in fewer steps), got {s.min()!r}"
            )
        return scalar_or_array(self.e_min / (s - self.s_min))  # no overflow in B_crit * ...

    def batch_size_for_examples(self, examples: ArrayLike) -> Any:
        r"""Batch size that reaches the target with ``examples`` examples.

        $B = B_{crit}(E/E_{min} - 1)$.

        Raises ``ValueError`` for ``examples <= e_min``, which no batch size reaches.
        """
        e = check("examples", examples)
        if np.any(e <= self.e_min):
            raise InputError(
                f"examples must be > e_min={self.e_min:.6g} (no batch size reaches the "
                f"target with fewer examples), got {e.min()!r}"
            )
        return scalar_or_array((e - self.e_min) / self.s_min)

    def residual(self, steps: ArrayLike, examples: ArrayLike) -> Any:
        r"""$(S/S_{min} - 1)(E/E_{min} - 1) - 1$: zero on the tradeoff curve."""
        s = check("steps", steps)
        e = check("examples", examples)
        check_broadcast(("steps", s), ("examples", e))
        return scalar_or_array((s / self.s_min - 1.0) * (e / self.e_min - 1.0) - 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "b_crit": self.b_crit}


@dataclass(frozen=True, eq=False)
class AdaptiveSchedule(Result):
    r"""An adaptive batch-size schedule and what it costs (App. D, eqs. D.1–D.5).

    Training progress is measured by $s$, in units of infinite-batch steps, so
    $S_{min} = \int ds$. With noise scale $\mathcal{B}(s)$ and batch size
    $B(s)$:

    $$
    S = \int \left(1 + \frac{\mathcal{B}}{B}\right) ds, \qquad
    E = \int (\mathcal{B} + B)\, ds, \qquad E_{min} = \int \mathcal{B}\, ds.
    $$

    The schedule $B = \sqrt{r\mathcal{B}}$ minimises $E + rS$ and gives
    $(S/S_{min} - 1)(E/E_{min} - 1) = \gamma$, with
    $\gamma = E_s[\sqrt{\mathcal{B}}]^2 / E_s[\mathcal{B}] \le 1$ (averages over
    s). A fixed batch size obeys the same law with 1 in place of γ, so at equal steps
    the adaptive schedule needs γ times the *excess* examples $E - E_{min}$
    of the best fixed batch (and vice versa at equal examples).

    Attributes
    ----------
    s, noise_scale, batch_size : arrays
        The grid, $\mathcal{B}(s)$ on it and the schedule $\sqrt{r\mathcal{B}(s)}$.
    r : float
        The exchange rate (examples per step) the schedule is optimal for.
    steps, examples : float
        S and E of the schedule (trapezoidal quadrature of D.1 on the grid).
    s_min, e_min : float
        $\int ds$ and $\int \mathcal{B}\,ds$.
    gamma : float
        $E_s[\sqrt{\mathcal{B}}]^2 / E_s[\mathcal{B}]$.
    fixed_batch_size : float
        The constant batch that needs the same number of steps,
        $E_s[\mathcal{B}]\,S_{min}/(S - S_{min})$.
    fixed_examples : float
        Its examples $E_{min} + B_{fixed}S_{min}$.
    fixed_steps_same_examples : float
        Steps of the constant batch that uses the same number of examples.
    """

    s: np.ndarray = field(repr=False)
    noise_scale: np.ndarray = field(repr=False)
    batch_size: np.ndarray = field(repr=False)
    r: float
    steps: float
    examples: float
    s_min: float
    e_min: float
    gamma: float
    fixed_batch_size: float
    fixed_examples: float
    fixed_steps_same_examples: float

    @property
    def tradeoff(self) -> Tradeoff:
        r"""The fixed-batch tradeoff of this trajectory: $B_{crit} = E_s[\mathcal{B}]$."""
        return Tradeoff(self.s_min, self.e_min)

    @property
    def examples_saved(self) -> float:
        """Fraction of the fixed batch's examples saved at equal steps."""
        return 1.0 - self.examples / self.fixed_examples

    def to_dict(self) -> dict[str, Any]:
        """The fields (the arrays as lists, also the columns of `to_frame`) and
        ``examples_saved``."""
        return super().to_dict() | {"examples_saved": self.examples_saved}

    def to_frame(self) -> Any:
        """The schedule as a DataFrame with columns ``s, noise_scale, batch_size``."""
        import pandas as pd

        return pd.DataFrame(
            {"s": self.s, "noise_scale": self.noise_scale, "batch_size": self.batch_size}
        )


@validate_params(r=Domain(0.0, meaning="exchange rate, examples per step"))
def adaptive_schedule(
    noise_scale: np.ndarray | Callable[[np.ndarray], np.ndarray],
    s: ArrayLike,
    *,
    r: float,
) -> AdaptiveSchedule:
    r"""The optimal adaptive batch size $B(s) = \sqrt{r\,\mathcal{B}(s)}$ (App. D).

    Parameters
    ----------
    noise_scale : array or callable
        $\mathcal{B}$ on the grid ``s`` (same shape), or a function evaluated
        on it. Must be finite, ≥ 0 and not all zero.
    s : array (k,), k ≥ 2
        Strictly increasing grid of training progress in infinite-batch steps;
        the integrals of eq. D.1 are trapezoidal sums on it, so use a grid fine
        enough for $\sqrt{\mathcal{B}}$ (the trapezoid error is
        $O(h^2)$ for smooth $\mathcal{B}$).
    r : float
        Exchange rate, examples per step: the schedule minimises $E + rS$.
        $r = E_s[\mathcal{B}]$ puts the fixed-batch comparison at its critical
        batch.

    Returns
    -------
    AdaptiveSchedule

    Examples
    --------
    >>> import numpy as np
    >>> s = np.linspace(0.0, 1.0, 20001)
    >>> a = adaptive_schedule(np.sqrt, s, r=1.0)
    >>> round(a.gamma, 4)    # E[s^(1/4)]^2 / E[s^(1/2)] = (4/5)^2 / (2/3) = 24/25
    0.96
    """
    grid = _as_1d(s, "s")
    if grid.shape[0] < 2:
        raise InputError(f"s must have at least 2 points, got {grid.shape[0]}")
    if np.any(np.diff(grid) <= 0):
        raise InputError("s must be strictly increasing")
    values = noise_scale(grid) if callable(noise_scale) else noise_scale
    b = _as_1d(values, "noise_scale")
    if b.shape != grid.shape:
        raise InputError(
            f"noise_scale has shape {b.shape}, which does not match s of shape {grid.shape}"
        )
    if np.any(b < 0):
        raise InputError(f"noise_scale must be >= 0, got {b.min()!r}")
    if not np.any(b > 0):
        raise InputError("noise_scale must not be zero everywhere")
    rate = as_float(r, "r")
    root = np.sqrt(b)
    batch = np.sqrt(rate) * root
    s_min = float(grid[-1] - grid[0])
    e_min = trapezoid(b, grid)
    i_half = trapezoid(root, grid)
    # B/B(s) = sqrt(B/r): written without the division so B = 0 points are exact
    steps = s_min + i_half / np.sqrt(rate)
    examples = e_min + np.sqrt(rate) * i_half
    gamma = i_half**2 / (s_min * e_min)
    # E_s[B] S_min / (S - S_min) with E_s[B] = e_min/s_min and S - S_min = i_half/sqrt(r),
    # written without the difference (which rounds to 0 for a huge r)
    fixed_b = e_min * np.sqrt(rate) / i_half
    fixed_b_same_e = np.sqrt(rate) * i_half / s_min  # E = E_min + B S_min for constant B
    fixed_steps = s_min + e_min / fixed_b_same_e
    return AdaptiveSchedule(
        s=grid, noise_scale=b, batch_size=batch, r=rate, steps=float(steps),
        examples=float(examples), s_min=s_min, e_min=e_min, gamma=float(gamma),
        fixed_batch_size=float(fixed_b), fixed_examples=float(e_min + fixed_b * s_min),
        fixed_steps_same_examples=float(fixed_steps),
    )


def _in_range(values: np.ndarray, what: str) -> Any:
    """The values as a float or array; an `InputError` naming ``batch_size`` where the
    exact answer is beyond the largest float (instead of ``inf`` and a warning)."""
    if not np.all(np.isfinite(values)):
        raise InputError(f"{what} at this batch_size exceed the largest float (1.8e308)")
    return scalar_or_array(values)


def _as_1d(value: ArrayLike, name: str) -> np.ndarray:
    return as_array(value, name, ndim=1)
