"""Types of the package's lazily imported top-level names (see ``__init__.py``).

The package resolves these names on first use; this stub tells type checkers what
each one is. tests/test_public_api.py holds it equal to ``__all__``.
"""

from __future__ import annotations

from .branched import BranchedCriticalBatch as BranchedCriticalBatch
from .branched import branched_critical_batch as branched_critical_batch
from .budget import FixedBudgetFit as FixedBudgetFit
from .budget import fit_fixed_budget as fit_fixed_budget
from .definitions import CBS_DEFINITIONS as CBS_DEFINITIONS
from .definitions import CBSDefinition as CBSDefinition
from .definitions import convert_cbs as convert_cbs
from .estimators import GNSEstimator as GNSEstimator
from .estimators import gns_many as gns_many
from .estimators import gns_regression as gns_regression
from .estimators import gns_two_batch as gns_two_batch
from .fit import BCritLaw as BCritLaw
from .fit import CriticalBatchCurve as CriticalBatchCurve
from .fit import LRScalingFit as LRScalingFit
from .fit import PowerLaw as PowerLaw
from .fit import StepsTable as StepsTable
from .fit import TradeoffFit as TradeoffFit
from .fit import critical_batch_curve as critical_batch_curve
from .fit import fit_b_crit_law as fit_b_crit_law
from .fit import fit_lr_scaling as fit_lr_scaling
from .fit import fit_power_law as fit_power_law
from .fit import fit_tradeoff as fit_tradeoff
from .fit import steps_to_target as steps_to_target
from .planning import Hardware as Hardware
from .planning import plan as plan
from .result import read_result as read_result
from .simulate import NoisyQuadratic as NoisyQuadratic
from .simulate import monte_carlo_sgd as monte_carlo_sgd
from .simulate import simulate_sweep as simulate_sweep
from .sweeps import Sweep as Sweep
from .sweeps import load_sweep as load_sweep
from .theory import QuadraticModel as QuadraticModel
from .theory import dl_opt as dl_opt
from .theory import eps_opt as eps_opt
from .theory import sign_descent_eps_opt as sign_descent_eps_opt
from .theory import surge_eps_opt as surge_eps_opt
from .throughput import ThroughputModel as ThroughputModel
from .throughput import fit_throughput as fit_throughput
from .tradeoff import AdaptiveSchedule as AdaptiveSchedule
from .tradeoff import Tradeoff as Tradeoff
from .tradeoff import adaptive_schedule as adaptive_schedule
from .transfer import RegimeWarning as RegimeWarning
from .transfer import TransferredValue as TransferredValue
from .transfer import TransferResult as TransferResult

__version__: str
__all__: list[str]

def __dir__() -> list[str]: ...
