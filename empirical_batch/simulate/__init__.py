"""Quadratic SGD simulator: exact expected dynamics and Monte Carlo, emitting sweeps.

``import empirical_batch.simulate`` does not import torch; only
:func:`monte_carlo_sgd` does, when called.
"""

from __future__ import annotations

from .quadratic import BestLR, NoiseScaleTrace, NoisyQuadratic

__all__ = ["BestLR", "NoiseScaleTrace", "NoisyQuadratic"]
