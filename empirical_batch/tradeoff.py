r"""The steps/examples tradeoff (McCandlish et al. 2018, §2.3).

If each optimizer step makes progress proportional to :math:`1/(1 + B_{noise}/B)`,
the steps S and examples E = BS needed to reach a fixed loss obey

.. math::

    \left(\frac{S}{S_{min}} - 1\right)\left(\frac{E}{E_{min}} - 1\right) = 1,
    \qquad B_{crit} = \frac{E_{min}}{S_{min}},

so :math:`S(B) = S_{min}(1 + B_{crit}/B)` and :math:`E(B) = E_{min}(1 + B/B_{crit})`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ._validate import as_float, check_positive

__all__ = ["Tradeoff"]


def _out(arr):
    return float(arr) if np.ndim(arr) == 0 else arr


@dataclass(frozen=True)
class Tradeoff:
    r"""The hyperbola :math:`(S/S_{min} - 1)(E/E_{min} - 1) = 1`.

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

    def __post_init__(self):
        for name in ("s_min", "e_min"):
            value = as_float(getattr(self, name), name)
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
            object.__setattr__(self, name, value)

    @property
    def b_crit(self) -> float:
        r""":math:`B_{crit} = E_{min}/S_{min}` (eq. 2.12)."""
        return self.e_min / self.s_min

    def steps(self, batch_size):
        r""":math:`S(B) = S_{min}(1 + B_{crit}/B)`."""
        b = check_positive(batch_size, "batch_size")
        return _out(self.s_min * (1.0 + self.b_crit / b))

    def examples(self, batch_size):
        r""":math:`E(B) = E_{min}(1 + B/B_{crit})`."""
        b = check_positive(batch_size, "batch_size")
        return _out(self.e_min * (1.0 + b / self.b_crit))

    def batch_size_for_steps(self, steps):
        r"""Batch size that reaches the target in ``steps`` steps.

        :math:`B = B_{crit}/(S/S_{min} - 1)`.

        Raises ``ValueError`` for ``steps <= s_min``, which no batch size reaches.
        """
        s = check_positive(steps, "steps")
        if np.any(s <= self.s_min):
            raise ValueError(
                f"steps must be > s_min={self.s_min:.6g} (no batch size reaches the "
                f"target in fewer steps), got {s.min()!r}"
            )
        return _out(self.b_crit / (s / self.s_min - 1.0))

    def batch_size_for_examples(self, examples):
        r"""Batch size that reaches the target with ``examples`` examples.

        :math:`B = B_{crit}(E/E_{min} - 1)`.

        Raises ``ValueError`` for ``examples <= e_min``, which no batch size reaches.
        """
        e = check_positive(examples, "examples")
        if np.any(e <= self.e_min):
            raise ValueError(
                f"examples must be > e_min={self.e_min:.6g} (no batch size reaches the "
                f"target with fewer examples), got {e.min()!r}"
            )
        return _out(self.b_crit * (e / self.e_min - 1.0))

    def residual(self, steps, examples):
        r""":math:`(S/S_{min} - 1)(E/E_{min} - 1) - 1`: zero on the tradeoff curve."""
        s = check_positive(steps, "steps")
        e = check_positive(examples, "examples")
        return _out((s / self.s_min - 1.0) * (e / self.e_min - 1.0) - 1.0)

    def to_dict(self) -> dict:
        return {**asdict(self), "b_crit": self.b_crit}
