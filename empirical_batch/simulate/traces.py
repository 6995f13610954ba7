r"""The noise scales of `NoisyQuadratic` along its expected trajectory (App. C)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from .._numeric import progress_mean
from .._validate import check_count
from ..errors import InputError
from ..params import validate_params
from ..result import Result
from ..theory import noise_scales_from_scalars
from .dynamics import check_steps, expected_loss, lr_and_batch, second_moment
from .problem import QuadraticProblem

__all__ = ["NoiseScaleTrace", "noise_scales", "noise_scales_along_run"]


@dataclass(frozen=True)
class NoiseScaleTrace(Result):
    r"""The model's noise scales along the expected trajectory.

    ``b_noise`` $= E[\operatorname{tr}(H\Sigma)]/E[G^THG]$ and ``b_simple``
    $= \operatorname{tr}\Sigma / E|G|^2$ at each step: ratios of expectations
    over the SGD randomness (see `NoisyQuadratic.noise_scales`).
    """

    step: np.ndarray
    loss: np.ndarray
    b_noise: np.ndarray
    b_simple: np.ndarray
    eps_max: np.ndarray

    def to_dict(self) -> dict:
        return {k: np.asarray(v).tolist() for k, v in self.__dict__.items()}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({k: np.asarray(v) for k, v in self.__dict__.items()})


def noise_scales(problem: QuadraticProblem, lr, batch_size, steps) -> NoiseScaleTrace:
    """Noise scales along the expected trajectory: see `NoisyQuadratic.noise_scales`."""
    a, b = lr_and_batch(lr, batch_size)
    if a.ndim or b.ndim:
        raise InputError("noise_scales takes a scalar lr and batch_size")
    k = np.atleast_1d(check_steps(steps))
    if k.ndim != 1:
        raise InputError("steps must be a 1-D array")
    m = second_moment(problem, float(a), float(b), k)
    g2, ghg, trs, trhs = problem.noise_scalars(m)
    d = noise_scales_from_scalars(g2, ghg, trs, trhs)
    # an undefined ratio (no resolved gradient or curvature) is NaN in every column
    bad = ~(np.isfinite(g2) & np.isfinite(ghg) & (g2 > 0) & (ghg > 0))
    bn, bs, em = (np.where(bad, np.nan, np.asarray(d[c], float))
                  for c in ("b_noise", "b_simple", "eps_max"))
    loss = np.asarray(expected_loss(problem, float(a), float(b), k))
    return NoiseScaleTrace(k, loss, np.atleast_1d(bn), np.atleast_1d(bs), np.atleast_1d(em))


Average = Literal["steps", "progress"]
"""How `noise_scales_along_run` averages over a run: per step, or weighted by progress."""


@validate_params(average=Average)
def noise_scales_along_run(problem: QuadraticProblem, lr: float, batch_size: float, steps: int,
                           *, b_crit: float | None = None,
                           average: Average = "steps") -> pd.DataFrame:
    r"""B_noise and B_simple at the start, at the end and averaged over a run.

    The run is ``steps`` steps at ``lr`` and ``batch_size`` on the exact dynamics. The
    average is over steps (``average="steps"``) or weighted by progress, the paper's
    App. D average $E_s[\mathcal B]$ with $ds = 1/(1 + B_{noise}/B)$ per
    step (``average="progress"``; `empirical_batch._numeric.progress_mean` with each
    step's progress as its increment). With ``b_crit`` (e.g. fitted to a sweep of the same
    problem), the column ``b_crit_over_b_noise`` compares it with each row: a noise
    scale that changes during training has no single value that *is* B_crit.
    """
    steps = check_count(steps, "steps", 1)
    tr = noise_scales(problem, lr, batch_size, np.arange(int(steps)))
    w = (np.ones_like(tr.b_noise) if average == "steps"
         else 1.0 / (1.0 + tr.b_noise / float(batch_size)))
    ok = np.isfinite(tr.b_noise) & np.isfinite(tr.b_simple)
    avg = [progress_mean(v[ok], increments=w[ok]) for v in (tr.b_noise, tr.b_simple)]
    out = pd.DataFrame({
        "where": ["at the start", "at the end", f"averaged over the run ({average})"],
        "b_noise": [tr.b_noise[0], tr.b_noise[-1], avg[0]],
        "b_simple": [tr.b_simple[0], tr.b_simple[-1], avg[1]],
    })
    if b_crit is not None:
        out["b_crit_over_b_noise"] = float(b_crit) / out["b_noise"]
    return out

