r"""Batch-size schedules: designed from the critical batch along training, with the
learning-rate changes that go with them and the saving the model predicts.

Under the model of McCandlish et al. (2018, App. D) a schedule $B(s)$ over
progress $s$ (infinite-batch steps) needs

$$
S = \int_0^{s_{end}} \Big(1 + \frac{\mathcal B(s)}{B(s)}\Big)\,ds, \qquad
E = \int_0^{s_{end}} \big(B(s) + \mathcal B(s)\big)\,ds
$$

steps and examples; a fixed batch $B$ needs $S = s_{end} + I/B$ and
$E = B s_{end} + I$ with $I = \int\mathcal B\,ds$. The *predicted saving* is
against the fixed batch that takes the same number of steps (examples saved) and the one
that uses the same examples (steps saved). Policies:

``"app_d"``
    $B(s) = \sqrt{r\mathcal B(s)}$, the optimum of App. D for exchange rate
    $r$ (default $E_s[\mathcal B]$, which puts the comparison at the
    critical batch), held piecewise constant on powers of two times the base batch.
``"doubling"``
    Merrill et al. (2025): start at the base batch and double it when the critical
    batch passes twice the current one. The threshold is not hand-picked: the batch
    doubles when the *lower confidence bound* of the measured critical batch (a
    branched-training bracket's lower end, or a collector's interval) reaches twice the
    current batch; without a bound, when the estimate does (stated in ``notes``).
``"seesaw"``
    Meterez et al. (2025): where a learning-rate schedule (step, cosine or WSD) would
    multiply the rate by $\alpha$ (taken at each halving, $\alpha = 1/2$),
    multiply it by $\sqrt\alpha$ and the batch by $1/\alpha$ instead.

Batch sizes are multiples of ``granularity`` (devices × micro-batch) and at most
``max_batch``. The learning rate follows the batch by ``sqrt`` (Adam-like, Malladi et
al. 2022) or ``linear`` (SGD, Goyal et al. 2017) scaling, or Seesaw's rule.

References
----------
S. McCandlish, J. Kaplan, D. Amodei. "An Empirical Model of Large-Batch Training."
arXiv:1812.06162 (2018), App. D.

W. Merrill, S. Arora, D. Groeneveld, H. Hajishirzi. "Critical Batch Size Revisited."
arXiv:2505.23971 (2025).

A. Meterez, D. Morwani, J. Wu, C.-A. Oncescu, C. Pehlevan, S. Kakade. "Seesaw:
Accelerating Training by Balancing Learning Rate and Batch Size Scheduling."
arXiv:2510.14717 (2025).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from .._numeric import trapezoid
from .._validate import as_float, check_count
from ..errors import InputError
from ..params import Domain, instance_of, validate_params
from ..result import Result
from ..rules import RULES, default_lr_rule, ratio_rules
from .trajectory import NoiseTrajectory

__all__ = ["BatchSchedule", "design_schedule", "seesaw_schedule"]

Policy = Literal["app_d", "doubling"]
"""The policies `design_schedule` designs (``"seesaw"`` converts a learning-rate
schedule: `seesaw_schedule`)."""
Optimizer = Literal["adam", "sgd"]
"""The optimizer that sets the learning-rate rule: ``sqrt`` for Adam, ``linear`` for SGD."""
LrSchedule = Literal["step", "cosine", "wsd"]
"""The learning-rate schedules `seesaw_schedule` converts."""

POLICIES = (*get_args(Policy), "seesaw")
LR_RULES = tuple(sorted(ratio_rules(), reverse=True))  # ("sqrt", "linear"), from rules


@dataclass(frozen=True, repr=False)
class BatchSchedule(Result):
    """A piecewise-constant batch schedule with its learning-rate factors.

    ``stages`` is a DataFrame with one row per stage: ``start_progress`` (infinite-batch
    steps; NaN for a Seesaw schedule designed without a trajectory),
    ``start_examples``, ``start_step``, ``batch_size`` and ``lr_factor`` (relative to
    the first stage's rate). ``predicted`` holds the model's steps, examples and savings
    (empty without a trajectory).
    """

    policy: str
    lr_rule: str
    stages: pd.DataFrame = field(repr=False)
    predicted: dict[str, float] = field(repr=False)
    notes: tuple[str, ...] = ()

    @property
    def batch_sizes(self) -> np.ndarray:
        return self.stages["batch_size"].to_numpy()

    def batch_at_progress(self, s: float) -> float:
        """The batch size in use at progress ``s``."""
        start = self.stages["start_progress"].to_numpy(dtype=float)
        i = int(np.searchsorted(start, s, side="right")) - 1
        return float(self.batch_sizes[max(i, 0)])

    def batch_at_examples(self, examples: float) -> float:
        """The batch size in use after ``examples`` examples."""
        start = self.stages["start_examples"].to_numpy(dtype=float)
        i = int(np.searchsorted(start, examples, side="right")) - 1
        return float(self.batch_sizes[max(i, 0)])

    def lr_factor_at_examples(self, examples: float) -> float:
        start = self.stages["start_examples"].to_numpy(dtype=float)
        i = int(np.searchsorted(start, examples, side="right")) - 1
        return float(self.stages["lr_factor"].to_numpy()[max(i, 0)])

    def __repr__(self) -> str:
        b = self.batch_sizes
        p = self.predicted
        save = (f", predicted saving {p['examples_saving']:.1%} of examples at equal steps"
                if p else "")
        return (f"BatchSchedule({self.policy}, {len(b)} stages, batch {b[0]:g}..{b[-1]:g}, "
                f"lr {self.lr_rule}{save})")

    def summary(self) -> str:
        lines = [repr(self), self.stages.to_string(index=False)]
        lines += [f"{k}: {v:.6g}" for k, v in self.predicted.items()]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_frame(self) -> pd.DataFrame:
        return self.stages.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "lr_rule": self.lr_rule,
                "stages": self.stages.to_dict(orient="records"),
                "predicted": dict(self.predicted), "notes": list(self.notes)}


def _levels(base: int, granularity: int, max_batch: float) -> np.ndarray:
    """Allowed batch sizes: base * 2^k, rounded to multiples of granularity, capped."""
    out: list[int] = []
    b = float(base)
    while True:
        v = max(granularity, round(b / granularity) * granularity)
        if v > max_batch:
            break
        if not out or v > out[-1]:
            out.append(v)
        b *= 2
        if b > 1e15:
            break
    if not out:
        raise InputError(f"no batch size is a multiple of granularity={granularity} and at "
                         f"most max_batch={max_batch:g}")
    return np.array(out, dtype=float)


def _lr_factor(rule: str, b: np.ndarray, b0: float) -> np.ndarray:
    return np.asarray(RULES[rule].factor(b / b0), dtype=float)


def _grid(traj: NoiseTrajectory, n: int = 4001) -> np.ndarray:
    return np.union1d(np.linspace(0.0, traj.total, n), traj.progress)


def _integrals(traj: NoiseTrajectory, starts: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """Per stage: (progress, steps, examples) used, integrating S and E of the module
    docstring on a fine grid (trapezoid)."""
    ends = np.r_[starts[1:], traj.total]
    rows = []
    for s0, s1, b in zip(starts, ends, batches, strict=True):
        if s1 <= s0:
            rows.append((0.0, 0.0, 0.0))
            continue
        g = np.union1d(np.linspace(s0, s1, 401), traj.progress[(traj.progress > s0)
                                                               & (traj.progress < s1)])
        bn = traj(g)
        steps = trapezoid(1.0 + bn / b, g)
        ex = trapezoid(b + bn, g)
        rows.append((s1 - s0, float(steps), float(ex)))
    return np.array(rows)


def _predict(traj: NoiseTrajectory, starts: np.ndarray, batches: np.ndarray
             ) -> tuple[dict[str, float], np.ndarray]:
    per = _integrals(traj, starts, batches)
    steps, examples = float(per[:, 1].sum()), float(per[:, 2].sum())
    g = _grid(traj)
    i_b = float(trapezoid(traj(g), g))
    s_end = traj.total
    out = {"steps": steps, "examples": examples}
    if steps > s_end:
        b_eq = i_b / (steps - s_end)  # the fixed batch with the same steps
        e_fixed = b_eq * s_end + i_b
        out.update(fixed_batch_same_steps=b_eq, fixed_examples=e_fixed,
                   examples_saving=1.0 - examples / e_fixed)
    if examples > i_b:
        b_eq2 = (examples - i_b) / s_end  # the fixed batch with the same examples
        s_fixed = s_end + i_b / b_eq2
        out.update(fixed_batch_same_examples=b_eq2, fixed_steps=s_fixed,
                   steps_saving=1.0 - steps / s_fixed)
    cum = np.vstack([np.zeros((1, 2)), np.cumsum(per[:, 1:], axis=0)])
    return out, cum[:-1]


def _check_common(base_batch: object, granularity: object, max_batch: float | None
                  ) -> tuple[int, int, float]:
    base_batch = check_count(base_batch, "base_batch", 1)
    granularity = check_count(granularity, "granularity", 1)
    if base_batch % granularity:
        raise InputError(f"base_batch={base_batch} is not a multiple of "
                         f"granularity={granularity} (devices x micro-batch)")
    mb = math.inf if max_batch is None else float(max_batch)
    if not mb >= base_batch:
        raise InputError(f"max_batch must be >= base_batch={base_batch}, got {max_batch!r}")
    return base_batch, granularity, mb


@validate_params(trajectory=instance_of(NoiseTrajectory), policy=Policy, optimizer=Optimizer,
                 exchange_rate=Domain(0.0, meaning="examples per step exchanged"))
def design_schedule(
    trajectory: NoiseTrajectory,
    policy: Policy = "doubling",
    *,
    base_batch: int,
    optimizer: Optimizer = "adam",
    granularity: int = 1,
    max_batch: int | None = None,
    exchange_rate: float | None = None,
) -> BatchSchedule:
    """A batch schedule for the critical-batch trajectory ``trajectory``.

    Parameters
    ----------
    trajectory : NoiseTrajectory
        $\\mathcal B(s)$ (see `NoiseTrajectory.from_log`, ``from_power_law``,
        ``from_branched``).
    policy : {"doubling", "app_d"}
        See the module docstring (``"seesaw"`` converts a learning-rate schedule:
        `seesaw_schedule`).
    base_batch : int
        The first stage's batch size (always: where the critical batch at the start
        calls for a larger one, the first stage is one grid step long and a note says
        so).
    optimizer : {"adam", "sgd"}
        Sets the learning-rate rule: ``sqrt`` for Adam-like optimizers, ``linear``
        for SGD.
    granularity, max_batch
        Batch sizes are multiples of ``granularity`` and at most ``max_batch``.
    exchange_rate : float, optional
        ``"app_d"`` only: $r$ (default $E_s[\\mathcal B]$).
    """
    lr_rule = default_lr_rule(optimizer)  # sqrt for Adam, linear for SGD
    base_batch, granularity, mb = _check_common(base_batch, granularity, max_batch)
    levels = _levels(base_batch, granularity, mb)
    g = _grid(trajectory)
    notes = []
    if policy == "app_d":
        r = exchange_rate
        if r is None:
            r = float(trapezoid(trajectory(g), g) / trajectory.total)
        else:
            r = as_float(r, "exchange_rate")
        want = np.sqrt(r * trajectory(g))
        idx = np.abs(np.log(want)[:, None] - np.log(levels)[None, :]).argmin(axis=1)
        idx = np.maximum.accumulate(idx)  # never shrink the batch
        notes.append(f"B(s) = sqrt(r B_noise(s)) with r = {r:.4g}, on powers of two")
    else:
        has_bound = trajectory.lower is not None
        low = trajectory.lower_at(g)
        idx = np.zeros(g.size, dtype=int)
        k = 0
        for j, lo in enumerate(low):
            while k + 1 < levels.size and lo >= 2.0 * levels[k]:
                k += 1
            idx[j] = k
        notes.append("doubles when the critical batch's lower confidence bound reaches "
                     "twice the batch" if has_bound else
                     "no confidence bound in the trajectory: doubles when the estimate "
                     "reaches twice the batch")
    if idx[0] > 0:  # the run starts at base_batch, as asked; the ramp follows at once
        notes.append(f"the critical batch at the start already calls for batch "
                     f"{levels[idx[0]]:g}: the first stage at base_batch={base_batch} "
                     f"lasts one grid step of progress ({g[1]:.4g}); a larger base_batch "
                     "would suit this run")
        idx[0] = 0
    change = np.flatnonzero(np.r_[True, np.diff(idx) != 0])
    starts = g[change]
    batches = levels[idx[change]]
    pred, cum = _predict(trajectory, starts, batches)
    stages = pd.DataFrame({
        "start_progress": starts, "start_steps": cum[:, 0], "start_examples": cum[:, 1],
        "batch_size": batches.astype(np.int64),
        "lr_factor": _lr_factor(lr_rule, batches, float(batches[0])),
    }).rename(columns={"start_steps": "start_step"})
    return BatchSchedule(policy, lr_rule, stages, pred, tuple(notes))


SHAPES = dict(zip(get_args(LrSchedule), (("milestones", "gamma"), (), ("decay_fraction",)),
                  strict=True))
"""Each learning-rate schedule's parameters."""
_SHAPE_DOMAINS = {
    "gamma": Domain(0.0, 1.0, True, False, meaning="the step schedule's decay factor"),
    "decay_fraction": Domain(0.0, 1.0, True, False,
                             meaning="the share of training spent decaying"),
}


def _check_shape(kind: str, shape: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the base learning-rate schedule's parameters; return them with defaults.

    ``milestones``: fractions of training, strictly increasing, each in (0, 1);
    ``gamma``: the step factor, in (0, 1]; ``decay_fraction``: in (0, 1].
    """
    wrong = sorted(set(shape) - set(SHAPES[kind]))
    if wrong:
        allowed = ", ".join(SHAPES[kind]) or "none"
        raise InputError(f"{', '.join(wrong)} do(es) not apply to lr_schedule={kind!r} "
                         f"(its parameters: {allowed})")
    out: dict[str, Any] = {}
    if kind == "step":
        raw = shape.get("milestones", (0.5, 0.75))
        try:
            m = np.asarray(raw, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise InputError(f"milestones must be numbers, got {raw!r}") from None
        if m.size == 0 or not np.all(np.isfinite(m)):
            raise InputError(f"milestones must be finite numbers, got {raw!r}")
        if np.any(m <= 0) or np.any(m >= 1):
            hint = (" (they look like steps: divide by total_steps)" if np.any(m >= 1)
                    else "")
            raise InputError(f"milestones are fractions of training, each in (0, 1), got "
                             f"{m.tolist()}{hint}")
        if np.any(np.diff(m) <= 0):
            raise InputError(f"milestones must be strictly increasing, got {m.tolist()}")
        gamma = as_float(shape.get("gamma", 0.1), "gamma")
        _SHAPE_DOMAINS["gamma"].check(gamma, "gamma")
        out = {"milestones": m, "gamma": gamma}
    elif kind == "wsd":
        d = as_float(shape.get("decay_fraction", 0.2), "decay_fraction")
        _SHAPE_DOMAINS["decay_fraction"].check(d, "decay_fraction")
        out = {"decay_fraction": d}
    return out


def _lr_shape(kind: str, frac: np.ndarray, **shape: Any) -> np.ndarray:
    """The base learning-rate schedule (factor of the peak) at fractions of training
    (parameters checked by `_check_shape`)."""
    if kind == "step":
        return np.asarray(shape["gamma"] ** np.searchsorted(shape["milestones"], frac,
                                                            side="right"), dtype=float)
    if kind == "cosine":
        return 0.5 * (1 + np.cos(np.pi * frac))
    start = 1.0 - shape["decay_fraction"]
    return np.where(frac < start, 1.0,
                    np.maximum(1.0 - (frac - start) / shape["decay_fraction"], 0.0))


@validate_params(lr_schedule=LrSchedule)
def seesaw_schedule(
    lr_schedule: LrSchedule,
    *,
    total_steps: int,
    base_batch: int,
    granularity: int = 1,
    max_batch: int | None = None,
    trajectory: NoiseTrajectory | None = None,
    **shape: Any,
) -> BatchSchedule:
    r"""Seesaw (Meterez et al. 2025): turn a learning-rate decay into a batch ramp.

    The base run takes ``total_steps`` at ``base_batch`` with the rate following
    ``lr_schedule`` (``"step"``: ``milestones``, strictly increasing fractions of
    training in (0, 1), default (0.5, 0.75), and factor ``gamma`` in (0, 1], default
    0.1; ``"cosine"``; ``"wsd"``: constant, then linear decay to zero over the last
    ``decay_fraction`` in (0, 1], default 0.2). Other parameters are refused.
    Each time the base rate has halved since the last change ($\alpha = 1/2$),
    the batch doubles and the rate is multiplied by $\sqrt{1/2}$ instead; the
    examples budget is the base run's. The rate's further decay within a stage and the
    decay beyond ``max_batch`` stay as in the base schedule (``lr_factor`` is the
    stage's factor at its start). With a ``trajectory`` (whose progress must cover the
    base run) the saving is predicted as for `design_schedule`. Without ``max_batch``
    the ramp stops at 32 times the base batch (a schedule decaying to zero would double
    it without end).
    """
    total_steps = check_count(total_steps, "total_steps", 2)
    shape = _check_shape(lr_schedule, shape)
    capped = max_batch is None
    if capped:  # a decay to zero would double the batch without end
        max_batch = 32 * base_batch
    base_batch, granularity, mb = _check_common(base_batch, granularity, max_batch)
    levels = _levels(base_batch, granularity, mb)
    frac = np.linspace(0.0, 1.0, 20001)
    lr = _lr_shape(lr_schedule, frac, **shape)
    examples_budget = float(total_steps) * base_batch
    rows, k, ref = [], 0, 1.0
    rows.append((0.0, levels[0], 1.0))
    for f, v in zip(frac, lr, strict=True):
        while v <= ref / 2.0 and v > 0 and k + 1 < levels.size:
            k += 1
            ref /= 2.0
            rows.append((f * examples_budget, levels[k], float(ref) ** 0.5))
    st = pd.DataFrame(rows, columns=["start_examples", "batch_size", "lr_factor"])
    st = st.drop_duplicates("start_examples", keep="last").reset_index(drop=True)
    e0 = st["start_examples"].to_numpy()
    b = st["batch_size"].to_numpy(dtype=float)
    steps_per = np.diff(np.r_[e0, examples_budget]) / b
    st.insert(1, "start_step", np.r_[0.0, np.cumsum(steps_per)[:-1]])
    st["batch_size"] = st["batch_size"].astype(np.int64)
    notes = [f"{lr_schedule} schedule over {total_steps} steps at batch {base_batch}: "
             f"{len(st)} stages, {float(np.sum(steps_per)):.6g} steps instead of "
             f"{total_steps}"]
    if capped:
        notes.append(f"no max_batch given: the ramp stops at 32 x base_batch = {mb:g}; "
                     "beyond it the rate decays as in the base schedule")
    pred: dict[str, float] = {}
    if trajectory is not None:
        # the base run's progress at each stage start, from ds/de = 1/(B_base + B_noise)
        s_grid = _grid(trajectory)
        de = (base_batch + trajectory(s_grid))
        e_of_s = np.concatenate([[0.0], np.cumsum(0.5 * (de[1:] + de[:-1]) * np.diff(s_grid))])
        if e_of_s[-1] < examples_budget * (1 - 1e-9):
            raise InputError("the trajectory ends before the base run's examples budget")
        starts = np.interp(e0, e_of_s, s_grid)
        pred, _ = _predict(trajectory, starts, b)
        st.insert(0, "start_progress", starts)
    else:
        st.insert(0, "start_progress", np.nan)
    return BatchSchedule("seesaw", "seesaw", st, pred, tuple(notes))
