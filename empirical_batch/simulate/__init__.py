"""Quadratic SGD simulator: exact expected dynamics and Monte Carlo, emitting sweeps.

``import empirical_batch.simulate`` does not import torch; only
`monte_carlo_sgd` does, when called.
"""

from __future__ import annotations

from .adaptive import AdaptiveResult, greedy_run, simulate_adaptive
from .montecarlo import MonteCarloResult, log_steps, monte_carlo_sgd
from .quadratic import BestLR, NoiseScaleTrace, NoisyQuadratic
from .sweep import SimulatedSweep, simulate_sweep

__all__ = [
    "AdaptiveResult",
    "BestLR",
    "MonteCarloResult",
    "NoiseScaleTrace",
    "NoisyQuadratic",
    "SimulatedSweep",
    "greedy_run",
    "log_steps",
    "monte_carlo_sgd",
    "simulate_adaptive",
    "simulate_sweep",
]
