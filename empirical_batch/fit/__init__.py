r"""From sweep logs to the critical batch size (McCandlish et al. 2018, §2.3 and §3).

Pipeline: a `Sweep` →
`steps_to_target` (steps/examples to first reach a target, best
hyper-parameters per batch size) → `fit_tradeoff` (the hyperbola
$S(B) = S_{min}(1 + B_{crit}/B)$, eq. 2.11–2.12, with a bootstrap
interval) → `critical_batch_curve` ($B_{crit}$ as a function of the
target) → `fit_power_law`, or `fit_b_crit_law` for Kaplan et al. 2020's
$B_{crit}(L) = B_*/L^{1/\alpha_B}$ with an interval on $\alpha_B$. `fit_lr_scaling` fits the
learning-rate law $\epsilon(B) = \epsilon_*/(1 + B_*/B)^\alpha$ (App. C, E).
`choose_targets` fixes the target losses of a curve from the sweep's losses alone
(before any fit; ``fit.targets``).

How the tradeoff is fitted
--------------------------
In log space: minimise $\sum_i [\log S_i - \log S_{min} - \log(1 + B_{crit}/B_i)]^2$
(identical to fitting $\log E_i$ since $E_i = B_i S_i$), subject to
$S_{min} \le \min_i S_i$ and $E_{min} \le \min_i E_i$. For fixed
$B_{crit}$ the best $\log S_{min}$ is a mean (clipped to the bounds), so
the objective is profiled over a log-spaced grid of $B_{crit}$ (spacing
< 1 %) with one matrix product for *all* bootstrap draws at once, then refined
by parabolic interpolation (bootstrap draws) or a bounded scalar minimisation
(point estimate). No optimizer runs per bootstrap draw.

The constraints are those of ``fit_tradeoff(..., bounded=True)``. Off by default: with
scatter the constraint binds in most fits (a noisy large-batch point lies below the
asymptote) and biases $B_{crit}$ upwards (+3.5 % to +7.5 % at 15 % log-noise, see
``benchmarks/coverage_fit.py``); without it the log-space least-squares fit is unbiased.

The interval on B_crit
----------------------
``fit_tradeoff(..., interval=...)`` forms ``b_crit_interval`` from the draws.
``"profile"`` (default): the profile-likelihood set $\{B : F(B) \le c\}$ with
$F(B) = [\mathrm{RSS}(B) - \mathrm{RSS}_{min}]/[\mathrm{RSS}_{min}/(n-2)]$
and the critical value $c$ calibrated as the ``level`` quantile of the same
statistic over the bootstrap draws (evaluated at the point estimate) — a
bootstrap-calibrated likelihood-ratio interval, nearly pivotal, so it keeps
close to nominal coverage with few seeds or batch sizes, where plain
percentile intervals under-cover. The ends are found by root-finding on the
continuous profile, so the interval always contains the estimate. An end is 0
or ``inf`` when the set reaches the edge of the searched range
($B_{crit}$ not bounded by the data; see ``status``); the other, finite end of
such a one-sided set is then the ``"f"`` set's (it depends on the data only, so a
reported bound does not move with ``seed``; ``benchmarks/bound_stability.py``),
except with ``bounded=True``.
``"f"``: the same set with $c$ the F(1, n − 2) quantile (exact for
Gaussian log-errors, no bootstrap needed). ``"percentile"``: quantiles of the
bootstrap $B_{crit}$ (under-covers with few points: 0.80–0.85 at nominal
0.90 in ``benchmarks/coverage_fit.py``, against 0.87–0.90 for ``"profile"``;
widened to contain the estimate where it does not).
``fit.interval("b_crit", level)`` forms the same interval at another level from the
fit's ``b_crit_profile`` and draws (`empirical_batch.fit.tradeoff_intervals.BCritProfile`).
"""

from .b_crit_law import KAPLAN_2020, BCritLaw, fit_b_crit_law
from .curve import CriticalBatchCurve, critical_batch_curve
from .lr_scaling import LRRecommendation, LRScalingFit, fit_lr_scaling
from .power_law import PowerLaw, fit_power_law
from .steps import StepsTable, steps_to_target
from .targets import choose_targets, common_target
from .tradeoff_fit import (
    FitWarning,
    NotEnoughBatchSizes,
    TargetAtStart,
    TradeoffFit,
    fit_tradeoff,
)

__all__ = [
    "KAPLAN_2020",
    "BCritLaw",
    "CriticalBatchCurve",
    "FitWarning",
    "LRRecommendation",
    "LRScalingFit",
    "NotEnoughBatchSizes",
    "PowerLaw",
    "StepsTable",
    "TargetAtStart",
    "TradeoffFit",
    "choose_targets",
    "common_target",
    "critical_batch_curve",
    "fit_b_crit_law",
    "fit_lr_scaling",
    "fit_power_law",
    "fit_tradeoff",
    "steps_to_target",
]
