r"""The reference for `empirical_batch.simulate._crossing`: step and compare.

The fast search in ``_crossing`` finds the smallest integer $k \ge 0$ with

$$
L(k) = L_\infty + \sum_i w_i \rho_i^k \le \text{target}
$$

without visiting every step (shared powers, Newton, bisection, branch and bound, a
rigorous rounding margin). This module answers the same question the obvious way:
evaluate $L(0), L(1), \dots$ one after another, each as an exactly rounded sum
(``math.fsum``), and stop at the first one at or below the target. It is slow
($O(k \cdot d)$) and bounded by ``max_steps``, and it is what the tests hold the
fast path against (``tests/test_simulate_crossing.py``).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["first_crossing_reference"]


def first_crossing_reference(l_inf, w, logrho, target, *, max_steps: int = 10_000):
    """Smallest k in ``0..max_steps`` with ``l_inf + sum(w * exp(k * logrho)) <= target``.

    Same arguments as ``_crossing.first_crossing`` (``l_inf``, ``target`` of shape
    ``(n,)``, ``w``, ``logrho`` of shape ``(n, d)``); ``inf`` where no step up to
    ``max_steps`` reaches the target.
    """
    l_inf = np.asarray(l_inf, float)
    w = np.asarray(w, float)
    logrho = np.asarray(logrho, float)
    target = np.asarray(target, float)
    out = np.full(l_inf.shape, np.inf)
    for r in range(l_inf.size):
        for k in range(max_steps + 1):
            terms = [
                wi * (1.0 if k == 0 else math.exp(k * li))
                for wi, li in zip(w[r], logrho[r], strict=True)
                if wi != 0.0
            ]
            if math.fsum([l_inf[r], *terms]) <= target[r]:
                out[r] = k
                break
    return out
