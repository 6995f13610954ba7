r"""Batch-size laws over model size and tokens: fitted with intervals, published ones as
data, anchored and extrapolated with a status.

Pipeline: a grid of runs over $(N, D)$ (`load_grid`: StepLaw's CSV, a plain schema,
Zhang et al. 2024's steps-to-target table, Shallue et al. 2018's ``batch_science``
tree) → per-cell optima with intervals and edge flags (`cell_optima`: $B_{opt}$ and
$\eta_{opt}$ from the near-optimal band, or $B_{crit}$ from the steps) → a power law in
$D$, $N$, $(N, D)$, $C$ or $L$ with exponent intervals and fitted ranges (`fit_law`,
`select_law`) → the batch at the next run's $(N, D)$ from an anchor, rounded, with a
status that says how far it extrapolates (`predict_batch`). `PUBLISHED_LAWS` holds
published laws in the same `ScalingLaw` type.
"""

from .batch_science import load_batch_science, steps_to_result
from .fitting import LawSelection, fit_law, fit_points, select_law
from .grid import LAYOUTS, RunGrid, load_grid
from .law import INPUTS, QUANTITIES, ScalingLaw, law_from_dict
from .optima import CellOptima, cell_optima
from .predict import (
    Anchor,
    BatchPrediction,
    PredictedBatch,
    load_prediction,
    predict_batch,
    round_batch,
)
from .registry import PUBLISHED_LAWS, get_law

__all__ = [
    "INPUTS",
    "LAYOUTS",
    "PUBLISHED_LAWS",
    "QUANTITIES",
    "Anchor",
    "BatchPrediction",
    "CellOptima",
    "LawSelection",
    "PredictedBatch",
    "RunGrid",
    "ScalingLaw",
    "cell_optima",
    "fit_law",
    "fit_points",
    "get_law",
    "law_from_dict",
    "load_batch_science",
    "load_grid",
    "load_prediction",
    "predict_batch",
    "round_batch",
    "select_law",
    "steps_to_result",
]
