r"""Steps to a target on `NoisyQuadratic`, exactly, and the best learning rate of a grid.

Plain SGD: the expected loss is $L_\infty + \sum_i w_i\rho_i^k$, and the first
step at or below a target is found exactly by `empirical_batch.simulate._crossing`
(runs of one learning rate solved together). Momentum or EMA: the second-moment
recursion is iterated step by step up to a limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validate import as_array, check_positive, positive_float, scalar_or_array
from ..errors import InputError
from ..result import Result
from ._crossing import (
    NEG_BIG,
    Workspace,
    first_crossing,
    first_crossing_affine,
    nonneg_rows,
)
from .dynamics import (
    CHUNK,
    affine_map,
    check_steps,
    initial_state,
    loss_index,
    lr_and_batch,
    noise_batch,
    plain_split,
)
from .problem import QuadraticProblem

__all__ = ["BestLR", "best_lr", "steps_to_target"]

GROUPED_MIN_WORK = 8000
"""Plain SGD: runs are grouped by learning rate (first_crossing_affine) when there is
more than this much work per rate, runs x dims / rates; below it one vectorised
first_crossing over all runs is faster (the grouped path costs ~1.5 ms per rate in
bookkeeping). Both are exact; timed in benchmarks/bench_simulate.py, part (a')."""


@dataclass(frozen=True)
class BestLR(Result):
    """Best learning rate from a grid, per batch size.

    ``learning_rate`` is NaN and ``steps`` is inf where no rate of the grid reaches
    the target (reported, not guessed).
    """

    batch_size: np.ndarray | float
    learning_rate: np.ndarray | float
    steps: np.ndarray | float
    target: float

    def to_dict(self) -> dict:
        return {
            "batch_size": np.asarray(self.batch_size).tolist(),
            "learning_rate": np.asarray(self.learning_rate).tolist(),
            "steps": np.asarray(self.steps).tolist(),
            "target": self.target,
        }

    def to_frame(self) -> pd.DataFrame:
        b = np.atleast_1d(self.batch_size)
        s = np.atleast_1d(self.steps)
        return pd.DataFrame(
            {
                "batch_size": b,
                "learning_rate": np.atleast_1d(self.learning_rate),
                "steps": s,
                "examples": s * b,
            }
        )


def steps_to_target(
    problem: QuadraticProblem, target, lr, batch_size, *, max_steps: int | None = None
):
    """Exact steps to a target: see `NoisyQuadratic.steps_to_target`."""
    t = check_positive(target, "target")
    a, b = lr_and_batch(lr, batch_size)
    b = noise_batch(problem, b)
    cap = None if max_steps is None else int(check_steps(max_steps, "max_steps"))
    shape = np.broadcast_shapes(t.shape, a.shape, b.shape)
    tf, af, bf = (np.broadcast_to(x, shape).ravel() for x in (t, a, b))
    if problem.is_plain:
        out = plain_steps(problem, tf, af, bf)
        if cap is not None:
            out = np.where(out > cap, np.inf, out)
    else:
        out = scan_steps(problem, tf, af, bf, 100_000 if cap is None else cap)
    return scalar_or_array(out.reshape(shape))


def plain_steps(problem: QuadraticProblem, t, a, b) -> np.ndarray:
    """Exact first crossings for plain SGD; runs grouped by learning rate.

    Runs with the same rate share decay rates rho_i and have weights
    ``aw - sw / B``, so the fast path (`first_crossing_affine`) handles them
    together; runs with weights of both signs, or that it cannot settle, go to
    `first_crossing`. Small problems (little work per rate, see
    ``GROUPED_MIN_WORK``) go to `first_crossing` at once.
    """
    out = np.full(t.size, np.inf)
    h, m0, act = problem.curvature, problem.init, problem.active
    hp, cp = problem.update_curvature, problem.update_noise
    uniq, inv = np.unique(a, return_inverse=True)
    if t.size * h.size < GROUPED_MIN_WORK * uniq.size:
        return general_steps(problem, t, a, b)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(uniq.size + 1))
    aw = np.where(act, 0.5 * h * m0, 0.0)
    work = Workspace()  # scratch arrays shared by the learning rates
    l0 = problem.initial_loss()
    for g, lr in enumerate(uniq):
        rows = order[bounds[g] : bounds[g + 1]]
        x = lr * hp
        one_minus = x * (2.0 - x)
        if np.any(act & (one_minus < 0)) or np.any(act & (one_minus == 0) & (cp > 0)):
            continue  # diverges at every batch size: inf
        if np.any(act & (one_minus == 0)):
            out[rows] = general_steps(problem, t[rows], a[rows], b[rows])
            continue
        r = 1.0 - x
        with np.errstate(divide="ignore"):
            logrho = np.maximum(2.0 * np.log(np.abs(r)), NEG_BIG)
        rho = r * r
        # L_inf * B; inactive directions (no init, no noise) may sit at x = 2
        sw = np.divide(0.5 * h * lr * cp, hp * (2.0 - x), out=np.zeros_like(h), where=act)
        inv_b = 1.0 / b[rows]
        y = t[rows] - inv_b * sw.sum()
        # weights aw - sw / B: all >= 0 for these rows (checked without forming them)
        nonneg = nonneg_rows(aw, sw, -inv_b)
        res = np.full(rows.size, np.nan)
        res[nonneg & (y < 0)] = np.inf  # L(k) >= L_inf > target for every k
        res[t[rows] >= l0] = 0.0  # L(0) is the initial loss, whatever a and B
        fast = nonneg & (y > 0) & np.isnan(res)
        if fast.any():
            res[fast] = first_crossing_affine(
                aw, sw, -inv_b[fast], y[fast], logrho, rho, work=work
            )
        todo = np.flatnonzero(np.isnan(res))
        if todo.size:
            res[todo] = general_steps(problem, t[rows][todo], a[rows][todo], b[rows][todo])
        out[rows] = res
    return out


def general_steps(problem: QuadraticProblem, t, a, b) -> np.ndarray:
    l_inf, w, logrho, conv = plain_split(problem, a[:, None], b[:, None])
    k = np.full(t.size, np.inf)
    if conv.any():
        k[conv] = first_crossing(l_inf[conv], w[conv], logrho[conv], t[conv])
    # L(0) is the initial loss itself (l_inf + sum(w) may round above it)
    k[conv & (t >= problem.initial_loss())] = 0.0
    return k


def scan_steps(problem: QuadraticProblem, t, a, b, limit):
    """Iterate the second-moment recursion; first k with loss <= t (or inf)."""
    n_runs = t.size
    out = np.full(n_runs, np.inf)
    rows = max(1, (CHUNK // 8) // problem.dims)
    idx = loss_index(problem)
    h = problem.curvature
    for s in range(0, n_runs, rows):
        sl = slice(s, s + rows)
        M, n = affine_map(problem, a[sl, None], b[sl, None])
        K, q = M[..., : n * n, : n * n], M[..., : n * n, n * n]
        v = np.broadcast_to(initial_state(problem, n)[:, : n * n], q.shape).copy()
        tt = t[sl]
        res = np.full(tt.size, np.inf)
        open_ = np.ones(tt.size, bool)
        with np.errstate(over="ignore", invalid="ignore"):
            for k in range(limit + 1):
                loss = 0.5 * (v[..., idx] @ h)
                hit = open_ & (loss <= tt)
                res[hit] = k
                open_ &= ~hit & np.isfinite(loss) & (loss < 1e300)
                if not open_.any() or k == limit:
                    break
                v = np.einsum("rdij,rdj->rdi", K, v) + q
        out[sl] = res
    return out


def best_lr(
    problem: QuadraticProblem, target, batch_size, lrs, *, max_steps: int | None = None
) -> BestLR:
    """Best rate of a grid per batch size: see `NoisyQuadratic.best_lr`."""
    t = positive_float(target, "target")
    b = check_positive(batch_size, "batch_size")
    grid = np.sort(check_positive(as_array(lrs, "lrs", ndim=1), "lrs"))
    if grid.size == 0:
        raise InputError("lrs must not be empty")
    bb = np.atleast_1d(b)
    steps = np.asarray(
        steps_to_target(problem, t, grid[None, :], bb[:, None], max_steps=max_steps)
    ).reshape(bb.size, grid.size)
    j = np.argmin(steps, axis=1)
    best = steps[np.arange(bb.size), j]
    lr = np.where(np.isfinite(best), grid[j], np.nan)
    if b.ndim == 0:
        return BestLR(float(b), float(lr[0]), float(best[0]), t)
    return BestLR(b, lr, best, t)
