r"""The critical batch measured directly, next to the fitted one and the noise scales.

At ``BranchSpec.n_checkpoints`` snapshots of each reference run (batch $B$, learning
rate $\eta$, weights and optimizer state; `empirical_batch.harness.noise`), the harness
branches the run with `empirical_batch.branched_critical_batch` (Merrill et al. 2025,
arXiv 2505.23971): branches at $kB$ with the rate $k\eta$ (SGD's linear rule) or
$\sqrt k\,\eta$ (Adam's square-root rule, Malladi et al. 2022), continuing from the
checkpoint's optimizer state, train on the same
$\Delta = $ ``steps_at_base`` $\times B$ examples, with paired seeds; the bracket
$[k^\ast B, k_{next}B)$ of the largest batch that keeps up is reported with
$B_{simple}$ and $B_{noise}$ measured at the checkpoint (the reference run's table).
(The validation study, `empirical_batch.validation`, puts $B_{crit}$ fitted from the
sweeps at the checkpoint's loss beside it.)

**Tolerance.** The paper's $B_{crit} = E_{min}/S_{min}$ is the batch at which a run
needs twice the minimum number of examples, i.e. makes half the progress per example
that a small batch makes (eq. 2.11). The branched analogue used here: a branch keeps up
while its loss decrease over the window is at least half that of the reference branch,
so the tolerance is $\tau = \tfrac12(L_0 - \bar L_1)$ with $L_0$ the loss at the
checkpoint and $\bar L_1$ the smoothed loss of the $k = 1$ branch (seed 0, run once
first). Against the model's per-example progress $1/(B + B_{noise})$ this bracket sits
near $2B + B_{noise}$; the comparison, not an assumed agreement, is what the report shows.
A branch that diverges with its scaled rate falls behind (``diverged_from``).
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict

import numpy as np
import pandas as pd
import torch

from ..branched import branched_critical_batch
from ..errors import InputError
from ..rules import default_lr_rule
from .config import BranchSpec
from .noise import ReferenceRun, evenly_spaced
from .resume import cached, task_identity
from .tasks.base import Task
from .trainer import ADAM_BETAS, ADAM_EPS

__all__ = ["BranchSpec", "run_branched"]

#: learning-rate rule of each optimizer's branches: k for SGD (Goyal et al. 2017),
#: sqrt(k) for Adam (Malladi et al. 2022)
_RULES = {opt: default_lr_rule(opt) for opt in ("sgd", "adam")}  # from empirical_batch.rules


def _train_steps(task: Task, optimizer: str):
    """``train_steps(state, batch_size, lr, n_steps, seed)`` for one task: from
    ``state = (weights, optimizer state)``, SGD or Adam (the trainer's settings) at rate
    ``lr``, batches drawn from the task with a generator of ``seed`` (so the branches of
    one seed share their data order), the training loss of every step (NaN from the step
    where it stops being finite)."""

    def train_steps(state, batch_size, lr, n_steps, seed=0):
        weights, opt_state = state
        model = task.init_model(0)
        model.load_state_dict(weights)
        opt: torch.optim.Optimizer
        if optimizer == "sgd":
            opt = torch.optim.SGD(model.parameters(), lr=lr)
        else:
            opt = torch.optim.Adam(model.parameters(), lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS,
                                   foreach=False)
        if opt_state:
            opt.load_state_dict(opt_state)
            for group in opt.param_groups:
                group["lr"] = lr
        gen = task.generator(10_000 + seed, batch_size)
        losses: list[float] = []
        for _ in range(n_steps):
            x, y = task.sample(gen, batch_size)
            loss = task.loss_fn(model(x), y)
            value = float(loss.detach())
            if not math.isfinite(value):  # diverged: the branch falls behind
                losses += [math.nan] * (n_steps - len(losses))
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(value)
        return (model.state_dict(), opt.state_dict()), losses

    return train_steps


def _copy(state):
    weights, opt_state = state
    return {k: v.clone() for k, v in weights.items()}, copy.deepcopy(opt_state)


def run_branched(task: Task, spec: BranchSpec, ref: ReferenceRun) -> pd.DataFrame:
    """One row per checkpoint: the branched bracket and the noise scales there (see the
    module notes).

    ``ref`` is a reference run (its snapshots and noise-scale table). Kept per task and
    optimizer inside an `empirical_batch.harness.resume.stage_cache` block.
    """
    ident = (task_identity(task), asdict(spec), ref.member.to_dict(),
             ref.scales.to_numpy().tolist())
    return cached(task.name, "branched", ref.member.optimizer, ident,
                  lambda: _run_branched(task, spec, ref))


def _run_branched(task: Task, spec: BranchSpec, ref: ReferenceRun) -> pd.DataFrame:
    opt = ref.member.optimizer
    if opt not in _RULES:
        raise InputError(f"no learning-rate rule for optimizer {opt!r}; known: {list(_RULES)}")
    steps = [s for s in sorted(ref.snapshots) if s > 0]
    if not steps:
        raise InputError("the reference run has no snapshot after step 0")
    train_steps = _train_steps(task, opt)
    base, lr = ref.member.batch_size, ref.member.learning_rate
    examples = spec.steps_at_base * base
    scales = ref.scales.set_index("step")
    rows = []
    for step in evenly_spaced(steps, spec.n_checkpoints):
        state = (ref.snapshots[step], ref.optimizer_snapshots.get(step, {}))
        start = float(scales.loc[step, "eval_loss"])
        _, ref_losses = train_steps(_copy(state), base, lr, spec.steps_at_base, seed=0)
        n_tail = max(1, math.ceil(spec.tail * len(ref_losses)))
        decrease = start - float(np.mean(ref_losses[-n_tail:]))
        tolerance = 0.5 * decrease if decrease > 0 else 0.0
        res = branched_critical_batch(
            train_steps, state, base, examples=examples, lr=lr, factors=spec.factors,
            lr_rule=_RULES[opt], seeds=spec.seeds, tail=spec.tail, level=spec.level,
            tolerance=tolerance, copy_state=_copy)
        rows.append({
            "task": task.name, "optimizer": opt, "step": int(step),
            "eval_loss": start, "base_batch": base, "learning_rate": lr,
            "examples": examples, "tolerance": tolerance,
            "b_branched_low": res.b_crit_interval.low,
            "b_branched_high": res.b_crit_interval.high,
            "branched_status": res.status,
            "diverged_from": next((k * base for k, d in zip(res.factors, res.diverged,
                                                            strict=True) if d), np.nan),
            "b_simple": float(scales.loc[step, "b_simple_collector"]),
            "b_noise": float(scales.loc[step, "b_noise_pop"]),
        })
    return pd.DataFrame(rows)
