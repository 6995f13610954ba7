"""Simulated batch-size sweeps in the sweep schema (docs/design.md, "The sweep schema").

`simulate_sweep` runs every (batch size, learning rate) pair on a
`NoisyQuadratic` and returns the long table the fitting code reads: columns
``run, batch_size, learning_rate, step, examples, metric`` plus ``seed``,
``method`` and ``max_stable_lr``. ``metric`` is the loss (lower is better). The
table comes in a `SimulatedSweep` result (its ``frame``), which every function that
reads a sweep takes as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from .._validate import MAX_COUNT, as_array, check_positive
from ..params import Domain, instance_of, removed_keywords, validate_params
from ..result import TableResult
from . import dynamics
from .montecarlo import log_steps, monte_carlo_sgd
from .powers import Dtype
from .quadratic import NoisyQuadratic

if TYPE_CHECKING:
    from ..sweeps import Sweep

__all__ = ["SimulatedSweep", "simulate_sweep"]


@dataclass(frozen=True, repr=False, eq=False)
class SimulatedSweep(TableResult):
    """A simulated sweep (the result of `simulate_sweep`).

    Attributes
    ----------
    frame : pandas.DataFrame
        The long table in the sweep schema, one row per logged point (columns
        documented in `simulate_sweep`).
    method : str
        ``"exact"`` or ``"monte_carlo"``.
    max_stable_lr : float
        The problem's divergence limit.
    n_runs : int
        Runs in the table (pairs × seeds; read from ``frame``).
    """

    method: str
    max_stable_lr: float
    derived = ("n_runs",)

    @property
    def n_runs(self) -> int:
        return int(self.frame["run"].nunique())

    def to_sweep(self) -> Sweep:
        """The table as a validated `empirical_batch.sweeps.Sweep`."""
        from ..sweeps import load_sweep

        return load_sweep(self.frame)


def _run_name(b, lr, seed) -> str:
    tag = "exact" if seed is None else f"s{seed}"
    return f"B{b:g}_lr{lr:.6g}_{tag}"


Method = Literal["exact", "monte_carlo"]
"""How `simulate_sweep` computes the loss: the exact expectation or Monte Carlo SGD."""


@removed_keywords(seeds="n_seeds")
@validate_params(problem=instance_of(NoisyQuadratic),
                 batch_sizes=Domain(1.0, MAX_COUNT, False, False, integer=True,
                                    meaning="examples per optimizer step"),
                 method=Method, dtype=Dtype)
def simulate_sweep(
    problem: NoisyQuadratic,
    batch_sizes,
    learning_rates,
    max_steps: int,
    *,
    method: Method = "exact",
    n_seeds: int = 1,
    n_points: int = 50,
    seed: int = 0,
    device: str = "cpu",
    dtype: Dtype | None = None,
    dataset_size: int | None = None,
    progress: bool = False,
) -> SimulatedSweep:
    r"""Simulate a sweep over batch sizes and learning rates; return the sweep table.

    Parameters
    ----------
    problem : NoisyQuadratic
    batch_sizes, learning_rates : 1-D arrays of positive numbers
        Every pair is one run (per seed).
    max_steps : int
        Last step of every run.
    method : {"exact", "monte_carlo"}
        ``"exact"``: the expected loss from the closed-form dynamics (one run per
        pair, ``seed`` is NA): for plain SGD,
        $E[\theta_i(k+1)^2] = (1 - a\hat h_i)^2 E[\theta_i(k)^2] + a^2\hat c_i/B$
        summed as $E[L](k) = P(a, k) + Q(a, k)/B$, so the sums over the directions
        are shared by every batch size (`empirical_batch.simulate.powers`).
        ``"monte_carlo"``: `monte_carlo_sgd` with ``n_seeds`` replicas per pair, one
        run per seed.
    n_seeds : int
        Replicas per pair (Monte Carlo only); ``seed`` is the random seed.
    n_points : int
        About this many log-spaced logged steps per run, plus step 0.
    dtype : {"float64", "float32"}, optional
        The precision. ``"exact"``: default ``"float64"``; ``"float32"`` (plain SGD only)
        composes the per-direction powers $\rho_i^k$ in single precision (their table
        built in double, the sums in double), with a relative error against float64 of
        at most `empirical_batch.simulate.powers.F32_REL_ERR` (3e-6; measured at most
        3.6e-7 on random problems, 3e-8 to 1e-7 on the Zhang problem) where the loss
        lies within 1e-30 to 1e30 of the initial loss; powers under float32's smallest
        normal count as 0 and past its largest read ``inf`` (a diverging direction
        shows sooner). ``"monte_carlo"``: default ``"float32"``, passed to
        `monte_carlo_sgd`.
    seed, device, dataset_size, progress
        Passed to `monte_carlo_sgd`.

    Returns
    -------
    SimulatedSweep
        Its ``frame`` has one row per logged point: ``run`` (str), ``batch_size`` (int),
        ``learning_rate``,
        ``step`` (int), ``examples`` (= step × batch_size), ``metric`` (the loss; ``inf``
        once a run diverges), ``seed`` (Int64, NA for exact), ``method`` and
        ``max_stable_lr``, the problem's divergence limit
        (`NoisyQuadratic.max_stable_lr`; `empirical_batch.fit.steps_to_target` does
        not call a best rate just under it the edge of the grid).

    Examples
    --------
    >>> nq = NoisyQuadratic.zhang(100)
    >>> sim = simulate_sweep(nq, [1, 8], [0.1, 0.5], max_steps=100, n_points=5)
    >>> sorted(sim.frame.columns)[:4], len(sim.frame), sim.n_runs
    (['batch_size', 'examples', 'learning_rate', 'max_stable_lr'], 24, 4)
    """
    bs = as_array(batch_sizes, "batch_sizes", ndim=1)
    lrs = check_positive(as_array(learning_rates, "learning_rates", ndim=1), "learning_rates")
    steps = log_steps(max_steps, n_points)
    if method == "exact":
        with np.errstate(over="ignore", invalid="ignore"):
            loss = np.asarray(dynamics.expected_loss(
                problem, lrs[None, :, None], bs[:, None, None], steps[None, None, :],
                dtype=dtype or "float64"))[:, :, None, :]
        seed_ids: list[int | None] = [None]
    else:  # "monte_carlo" (the options are checked by validate_params)
        res = monte_carlo_sgd(
            problem, bs, lrs, int(max_steps), n_seeds=n_seeds, record_steps=steps, seed=seed,
            device=device, dtype=dtype or "float32", dataset_size=dataset_size, progress=progress,
        )
        loss = res.loss
        seed_ids = list(range(loss.shape[2]))
    loss = np.where(np.isnan(loss), np.inf, loss)  # a diverged run has infinite loss
    nb, nl, ns, nt = loss.shape
    ib, il, isd, it = (g.ravel() for g in np.meshgrid(
        np.arange(nb), np.arange(nl), np.arange(ns), np.arange(nt), indexing="ij"))
    b = bs.astype(np.int64)[ib]
    names = {
        (i, j, s): _run_name(bs[i], lrs[j], seed_ids[s])
        for i in range(nb) for j in range(nl) for s in range(ns)
    }
    df = pd.DataFrame(
        {
            "run": [names[int(i), int(j), int(s)] for i, j, s in zip(ib, il, isd, strict=True)],
            "batch_size": b,
            "learning_rate": lrs[il],
            "step": steps[it].astype(np.int64),
            "examples": (steps[it] * b).astype(float),
            "metric": loss.ravel(),
            "seed": pd.array([seed_ids[s] for s in isd], dtype="Int64"),
            "method": method,
            "max_stable_lr": problem.max_stable_lr,
        }
    )
    return SimulatedSweep(frame=df, method=method, max_stable_lr=float(problem.max_stable_lr))
