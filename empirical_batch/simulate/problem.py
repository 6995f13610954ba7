"""What the simulator's dynamics, search and traces read of a quadratic problem.

`QuadraticProblem` is the protocol `NoisyQuadratic` satisfies: the per-direction
arrays and options of the model, nothing else. The modules that compute with a problem
(`dynamics`, `search`, `traces`) type their argument with it, so they need not import
the class that calls them (no import circle).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = ["QuadraticProblem"]


class QuadraticProblem(Protocol):
    r"""A noisy quadratic problem: curvatures $h_i$, noise $c_i$, initial second
    moments $m_i(0)$, and their preconditioned forms $\hat h_i = p_i h_i$,
    $\hat c_i = p_i^2 c_i$ (see `empirical_batch.simulate.quadratic`)."""

    curvature: np.ndarray
    noise: np.ndarray
    init: np.ndarray
    update_curvature: np.ndarray
    update_noise: np.ndarray
    active: np.ndarray
    momentum: float
    ema: float | None
    dataset_size: int | None

    @property
    def dims(self) -> int: ...

    @property
    def is_plain(self) -> bool: ...

    def initial_loss(self) -> float: ...

    def noise_scalars(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]: ...
