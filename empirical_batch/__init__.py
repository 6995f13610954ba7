"""empirical_batch: the empirical model of large-batch training.

McCandlish, Kaplan & Amodei, *An Empirical Model of Large-Batch Training*
(arXiv:1812.06162, 2018) as a library: closed forms of the quadratic-loss SGD
model, gradient-noise-scale estimators, a quadratic SGD simulator, critical-batch
fits to sweep logs and a time/cost planner.

The public names below import without torch; the torch collectors live in
`empirical_batch.measure`. Names are resolved lazily, so ``import
empirical_batch`` stays fast and loads only what is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.4.0"

# public name -> submodule that defines it (one concept, one place)
_EXPORTS: dict[str, str] = {
    # theory: one SGD step on a quadratic loss
    "QuadraticModel": "theory",
    "eps_opt": "theory",
    "surge_eps_opt": "theory",
    "sign_descent_eps_opt": "theory",
    "dl_opt": "theory",
    # steps/examples tradeoff and adaptive batch size
    "Tradeoff": "tradeoff",
    "AdaptiveSchedule": "tradeoff",
    "adaptive_schedule": "tradeoff",
    # fixed-budget optimal batch and learning rate (DeepSeek LLM 2024, Step Law 2025)
    "fit_fixed_budget": "budget",
    "FixedBudgetFit": "budget",
    # step times fitted to measured timings (Pollux)
    "fit_throughput": "throughput",
    "ThroughputModel": "throughput",
    # time/cost planner
    "plan": "planning",
    "Hardware": "planning",
    # gradient-noise-scale estimators (numpy)
    "gns_two_batch": "estimators",
    "gns_many": "estimators",
    # the critical batch measured directly (Merrill et al. 2025)
    "branched_critical_batch": "branched",
    "BranchedCriticalBatch": "branched",
    "gns_regression": "estimators",
    "GNSEstimator": "estimators",
    # simulator
    "NoisyQuadratic": "simulate",
    "simulate_sweep": "simulate",
    "monte_carlo_sgd": "simulate",
    # sweep logs and fits
    "Sweep": "sweeps",
    "load_sweep": "sweeps",
    "steps_to_target": "fit",
    "fit_tradeoff": "fit",
    "TradeoffFit": "fit",
    "critical_batch_curve": "fit",
    "CriticalBatchCurve": "fit",
    "StepsTable": "fit",
    "fit_power_law": "fit",
    "PowerLaw": "fit",
    "fit_b_crit_law": "fit",
    "BCritLaw": "fit",
    "fit_lr_scaling": "fit",
    "LRScalingFit": "fit",
    # critical-batch-size vocabulary and hyperparameter transfer (the function itself is
    # empirical_batch.transfer.transfer: the name `transfer` is the submodule)
    "CBSDefinition": "definitions",
    "CBS_DEFINITIONS": "definitions",
    "convert_cbs": "definitions",
    "TransferResult": "transfer",
    "TransferredValue": "transfer",
    "RegimeWarning": "transfer",
    # the result protocol: any result's JSON read back
    "read_result": "result",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'empirical_batch' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # cache: the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

