r"""Adaptive batch size on the noisy quadratic (McCandlish et al. 2018, App. D).

With a noise scale $\mathcal B(s)$ that changes during training the paper
writes $S = \int (1 + \mathcal B/B)\,ds$ and $E = \int(\mathcal B + B)\,ds$
(D.1). Trading examples for steps at exchange rate $r$, the best schedule is
$B = \sqrt{r\mathcal B}$ and the tradeoff becomes
$(S/S_{min} - 1)(E/E_{min} - 1) = \gamma$,
$\gamma = (E_s[\sqrt{\mathcal B}])^2 / E_s[\mathcal B] \le 1$ (D.4–D.5).

`simulate_adaptive` checks this on the exact expected dynamics: it iterates
$m_i(t+1) = (1 - a_t\hat h_i)^2 m_i(t) + a_t^2\hat c_i / B_t$ with a batch
$B_t = \sqrt{r\,B_{noise}(t)}$ recomputed every step from the current
$m(t)$, and compares with fixed batch sizes run the same way. Both use the
greedy learning rate of the model, $a_t = \epsilon_{opt}(B_t) =
\epsilon_{max}(t)/(1 + B_{noise}(t)/B_t)$ (eq. 2.6), which for this problem is
exactly the rate that minimises the next expected loss. Batch sizes are real
numbers (not rounded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._numeric import progress_mean
from .._validate import as_array, as_float, check_count, check_positive, positive_float
from ..errors import InputError
from ..result import Result
from ..theory import noise_scales_from_scalars
from .quadratic import NoisyQuadratic

__all__ = ["AdaptiveResult", "greedy_run", "simulate_adaptive"]


@dataclass(frozen=True)
class AdaptiveResult(Result):
    r"""Adaptive schedule against fixed batch sizes at one exchange rate.

    ``s_min``, ``e_min`` come from a least-squares fit of
    $S = S_{min} + E_{min}/B$ to the fixed-batch runs. ``product`` is
    $(S/S_{min} - 1)(E/E_{min} - 1)$ of the adaptive run (the theory says
    ``gamma``); ``fixed_product`` the same for the best fixed batch (theory: 1).
    ``gamma`` is measured on the adaptive run's own trajectory, weighting step
    $t$ by its progress $ds_t = 1/(1 + B_{noise}(t)/B_t)$.
    """

    exchange_rate: float
    target: float
    steps: float
    examples: float
    fixed_batch_size: float
    fixed_steps: float
    fixed_examples: float
    s_min: float
    e_min: float
    product: float
    fixed_product: float
    gamma: float
    batch_schedule: np.ndarray = field(repr=False)
    fixed: dict = field(repr=False)

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("batch_schedule", "fixed")}
        d["batch_schedule"] = np.asarray(self.batch_schedule).tolist()
        d["fixed"] = {k: np.asarray(v).tolist() for k, v in self.fixed.items()}
        return d


def greedy_run(problem: NoisyQuadratic, target: float, batch, *, max_steps: int = 1_000_000):
    r"""Iterate the exact expected dynamics with the greedy rate $\epsilon_{opt}(B_t)$.

    ``batch`` is an array of fixed batch sizes (``np.inf`` for the noise-free limit)
    or a callable ``batch(b_noise) -> B_t`` or ``batch(b_noise, progress, examples) ->
    B_t`` (one run; ``progress`` is $\sum ds$ so far in infinite-batch steps,
    ``examples`` the examples used so far: a schedule). Returns a dict with ``steps``
    (first step whose expected loss is <= target, inf if not within ``max_steps``),
    ``examples`` (sum of the batch sizes used), ``steps_interp``/``examples_interp`` (the
    crossing interpolated within the last step: the expected loss taken as linear in
    the step between the two iterates around the target, and the examples of that step
    counted by the same fraction; whole-step counts overstate a short run's steps by up
    to one) and, for a callable, the per-step ``batch_sizes``, ``b_noise`` and
    ``progress`` $ds_t$.
    """
    if not isinstance(problem, NoisyQuadratic) or not problem.is_plain:
        raise InputError("greedy_run needs a NoisyQuadratic without momentum or EMA")
    t = positive_float(target, "target")
    h, hp, cp = problem.curvature, problem.update_curvature, problem.update_noise
    adaptive = callable(batch)
    three = False
    if adaptive:
        import inspect

        try:
            three = len(inspect.signature(batch).parameters) >= 3
        except (TypeError, ValueError):  # builtins without a signature
            three = False
        m = problem.init[None, :].copy()
        n = 1
    else:
        vals = np.atleast_1d(np.asarray(batch, dtype=object)).tolist()
        # real numbers each (inf allowed: the noise-free limit)
        bs = np.array([math.inf if isinstance(v, float) and v == math.inf
                       else as_float(v, "batch") for v in vals], dtype=float)
        if bs.ndim != 1 or bs.size == 0 or np.any(np.isnan(bs)) or np.any(bs <= 0):
            raise InputError(f"batch sizes must be > 0 (inf allowed), got {bs.tolist()}")
        n = bs.size
        m = np.repeat(problem.init[None, :], n, axis=0)
    steps = np.full(n, np.inf)
    examples = np.zeros(n)
    steps_i = np.full(n, np.inf)
    examples_i = np.full(n, np.inf)
    prev_loss = np.full(n, np.nan)  # the live runs' loss one step back
    last_b = np.zeros(n)  # the live runs' last batch size
    live = np.arange(n)  # runs still above the target; m holds their moments only
    trace_b, trace_bn, trace_ds = [], [], []
    progress = 0.0
    for k in range(check_count(max_steps, "max_steps", 0) + 1):
        loss = 0.5 * (m @ h)
        hit = loss <= t
        steps[live[hit]] = k
        if k == 0:
            steps_i[live[hit]] = 0.0
            examples_i[live[hit]] = 0.0
        else:
            idx = live[hit]
            p0, p1 = prev_loss[idx], loss[hit]
            with np.errstate(divide="ignore", invalid="ignore"):
                frac = np.where(p0 > p1, np.clip((p0 - t) / (p0 - p1), 0.0, 1.0), 1.0)
            steps_i[idx] = k - 1 + frac
            # an infinite batch has used infinitely many examples, wherever it crossed
            lb = last_b[idx]
            back = np.where(np.isinf(lb), 0.0, lb * (1.0 - frac))
            examples_i[idx] = examples[idx] - back
        prev_loss[live] = loss
        live, m = live[~hit], m[~hit]
        if live.size == 0 or k == max_steps:
            break
        g2, ghg, trs, trhs = problem.noise_scalars(m)
        bn = np.atleast_1d(noise_scales_from_scalars(g2, ghg, trs, trhs)["b_noise"])
        if adaptive:
            if three:
                b_t = np.array([float(batch(float(bn[0]), progress, float(examples[0])))])
            else:
                b_t = np.array([float(batch(float(bn[0])))])
            if not b_t[0] > 0:
                raise InputError(f"the schedule returned a batch size {b_t[0]!r} <= 0")
            trace_b.append(b_t[0])
            trace_bn.append(bn[0])
            trace_ds.append(1.0 / (1.0 + bn[0] / b_t[0]))
            progress += trace_ds[-1]
        else:
            b_t = bs[live]
        inv_b = np.where(np.isinf(b_t), 0.0, 1.0 / b_t)
        if problem.dataset_size is not None:  # sampling without replacement: 1/B - 1/D
            inv_b = np.maximum(inv_b - 1.0 / problem.dataset_size, 0.0)
        a = g2 / (ghg + trhs * inv_b)  # eps_opt(B_t), eq. 2.6
        examples[live] += b_t
        last_b[live] = b_t
        m = (1.0 - a[:, None] * hp) ** 2 * m + (a * a * inv_b)[:, None] * cp
    reached_examples = np.where(np.isfinite(steps), examples, np.inf)
    out: dict[str, Any] = {"steps": steps if not adaptive else float(steps[0]),
                           "examples": reached_examples, "steps_interp": steps_i,
                           "examples_interp": examples_i}
    if adaptive:
        out["examples"] = float(reached_examples[0])
        out["steps_interp"] = float(steps_i[0])
        out["examples_interp"] = float(examples_i[0])
        out["batch_sizes"] = np.array(trace_b)
        out["b_noise"] = np.array(trace_bn)
        out["progress"] = np.array(trace_ds)
    return out


def _fit_hyperbola(bs, steps):
    """Least squares of S = S_min + E_min / B with relative weights (1/S)."""
    ok = np.isfinite(steps) & np.isfinite(bs)
    if ok.sum() < 2:
        raise InputError("need at least two fixed batch sizes that reach the target")
    x = np.column_stack([np.ones(ok.sum()), 1.0 / bs[ok]]) / steps[ok, None]
    coef, *_ = np.linalg.lstsq(x, np.ones(ok.sum()), rcond=None)
    return float(coef[0]), float(coef[1])


def simulate_adaptive(
    problem: NoisyQuadratic,
    target: float,
    exchange_rate: float,
    *,
    fixed_batch_sizes=None,
    max_steps: int = 1_000_000,
) -> AdaptiveResult:
    r"""Adaptive $B_t = \sqrt{r B_{noise}(t)}$ against fixed batches (App. D).

    Parameters
    ----------
    problem : NoisyQuadratic
        Plain (optionally preconditioned) SGD.
    target : float
        Expected-loss target.
    exchange_rate : float
        $r$, examples one step is worth; the best fixed batch minimises
        $rS + E$, the same cost the adaptive schedule optimises.
    fixed_batch_sizes : array, optional
        Fixed batches to compare with (default $2^0 \dots 2^{20}$).

    Examples
    --------
    >>> nq = NoisyQuadratic.zhang(50)
    >>> res = simulate_adaptive(nq, target=0.05, exchange_rate=100.0)
    >>> bool(res.product < res.fixed_product)
    True
    """
    r = positive_float(exchange_rate, "exchange_rate")
    if fixed_batch_sizes is None:
        fixed_batch_sizes = 2.0 ** np.arange(21)
    fb = check_positive(as_array(fixed_batch_sizes, "fixed_batch_sizes", ndim=1),
                        "fixed_batch_sizes")
    l0 = problem.initial_loss()
    if not as_float(target, "target") < l0:
        raise InputError(f"target must be below the initial loss {l0:.6g} (it is reached "
                         f"in 0 steps at every batch size), got {target!r}")
    fixed = greedy_run(problem, target, fb, max_steps=max_steps)
    s_fix, e_fix = fixed["steps"], fixed["examples"]
    s_min, e_min = _fit_hyperbola(fb, s_fix)
    if s_min <= 0 or e_min <= 0:
        raise InputError(
            f"the fixed-batch runs do not follow S = S_min + E_min/B here "
            f"(fit S_min={s_min:.3g}, E_min={e_min:.3g}); widen fixed_batch_sizes"
        )
    with np.errstate(over="ignore"):
        cost = r * s_fix + e_fix
    if not np.isfinite(cost).any():
        raise InputError(f"exchange_rate={r!r}: no fixed batch size reaches the target at a "
                         "cost below the largest float")
    j = int(np.argmin(np.where(np.isfinite(cost), cost, np.inf)))
    root_r = math.sqrt(r)  # sqrt(r B_noise) without the product, which can overflow
    ad = greedy_run(problem, target, lambda bn: root_r * np.sqrt(bn), max_steps=max_steps)
    ds = ad["progress"]
    bn = ad["b_noise"]
    # γ = E_s[√B_noise]² / E_s[B_noise], progress means (App. D, eqs. D.4–D.5)
    gamma = progress_mean(np.sqrt(bn), increments=ds) ** 2 / progress_mean(bn, increments=ds)
    return AdaptiveResult(
        exchange_rate=r,
        target=float(target),
        steps=ad["steps"],
        examples=ad["examples"],
        fixed_batch_size=float(fb[j]),
        fixed_steps=float(s_fix[j]),
        fixed_examples=float(e_fix[j]),
        s_min=s_min,
        e_min=e_min,
        product=float((ad["steps"] / s_min - 1) * (ad["examples"] / e_min - 1)),
        fixed_product=float((s_fix[j] / s_min - 1) * (e_fix[j] / e_min - 1)),
        gamma=gamma,
        batch_schedule=ad["batch_sizes"],
        fixed={"batch_size": fb, "steps": s_fix, "examples": e_fix},
    )
