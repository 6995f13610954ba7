r"""The critical batch measured directly, next to the fitted one and the noise scales.

At ``BranchSpec.n_checkpoints`` snapshots of each reference run (batch $B$, learning
rate $\eta$, weights and optimizer state; `empirical_batch.validation.experiments.noise`),
the study branches the run with `empirical_batch.branched_critical_batch` (Merrill et al. 2025,
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
checkpoint and $\bar L_1$ the smoothed loss of the $k = 1$ branch of seed 0.
Against the model's per-example progress $1/(B + B_{noise})$ this bracket sits
near $2B + B_{noise}$; the comparison, not an assumed agreement, is what the report shows.
A branch that diverges with its scaled rate falls behind (``diverged_from``).

**Batched.** The branches of one factor, from every checkpoint and seed, share a batch
size, so they are trained together as one vmapped program from the checkpoints' states
(`branch_losses`, the sweep's `empirical_batch.harness.group_step.GroupStep`, a CUDA
graph on CUDA); the tests hold it to the plain ``torch.optim`` loop (`_plain_branch`).
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict

import numpy as np
import pandas as pd

from ...branched import branched_critical_batch
from ...errors import InputError, UsageError
from ...harness.config import BranchSpec
from ...harness.group_step import GroupStep, State, run_group, torch_optimizer, use_graphs
from ...harness.resume import cached, task_identity
from ...harness.tasks.base import Task
from ...harness.trainer import Member, prefer_batched
from ...rules import RULES, default_lr_rule
from .noise import ReferenceRun, evenly_spaced

__all__ = ["BranchSpec", "branch_losses", "run_branched"]

#: learning-rate rule of each optimizer's branches: k for SGD (Goyal et al. 2017),
#: sqrt(k) for Adam (Malladi et al. 2022)
_RULES = {opt: default_lr_rule(opt) for opt in ("sgd", "adam")}  # from empirical_batch.rules


#: the data streams of the branches: seed ``s`` draws ``task.generator(BRANCH_SEED + s, kB)``
BRANCH_SEED = 10_000
#: most examples (runs × batch size) in one vmapped program of branches; the full
#: preset's largest sweep program is 12 runs × 4,096 windows = 49,152
BRANCH_GROUP_EXAMPLES = 2**16


def _plain_branch(task: Task, optimizer: str, state: State, batch_size: int, lr: float,
                  n_steps: int, seed: int) -> np.ndarray:
    """One branch with ``torch.optim`` (the reference the batched branches are held to):
    from ``state = (weights, optimizer state)``, SGD or Adam (the trainer's settings) at
    rate ``lr`` on the stream of ``seed``; the training loss of every step."""
    weights, opt_state = state
    model = task.init_model(0)
    model.load_state_dict(weights)
    opt = torch_optimizer(optimizer, model.parameters(), lr)
    if opt_state:
        opt.load_state_dict(copy.deepcopy(opt_state))
        for group in opt.param_groups:
            group["lr"] = lr
    gen = task.generator(BRANCH_SEED + seed, batch_size)
    losses = np.full(n_steps, np.nan)
    for i in range(n_steps):
        x, y = task.sample(gen, batch_size)
        loss = task.loss_fn(model(x), y)
        value = float(loss.detach())
        if not math.isfinite(value):  # diverged: the branch falls behind
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses[i] = value
    return losses


def branch_losses(task: Task, optimizer: str, starts: dict[int, State], base: int, lr: float,
                  spec: BranchSpec, *, batched: bool | None = None,
                  cuda_graphs: bool | None = None) -> dict[tuple[int, int, int], np.ndarray]:
    """The training losses of every branch from every start: ``{(checkpoint, k, seed):
    losses}`` for each factor ``k`` of ``spec`` (batch ``kB``, rate ``f(k)·lr`` by the
    optimizer's rule, ``steps_at_base // k`` steps) and seed of ``spec`` (and the ``k =
    1``, seed 0 branch that sets the tolerance).

    The branches of one factor, from all checkpoints and seeds, share a batch size and
    are trained as vmapped programs (`GroupStep` from the checkpoints' states, captured
    in a CUDA graph on CUDA; at most `BRANCH_GROUP_EXAMPLES` examples per program), or
    one by one with ``torch.optim`` with ``batched=False`` (None: the sweep's rule,
    `prefer_batched`). From a branch's first non-finite loss on, its losses are NaN.
    """
    factor = RULES[_RULES[optimizer]].factor
    out: dict[tuple[int, int, int], np.ndarray] = {}
    for k in spec.factors:
        seeds = spec.seeds if k != 1 or 0 in spec.seeds else (0, *spec.seeds)
        runs = [(c, s) for c in sorted(starts) for s in seeds]
        rate, n_steps = float(lr * factor(k)), spec.steps_at_base // k
        members = [Member(optimizer, k * base, rate, BRANCH_SEED + s) for _, s in runs]
        use_group = prefer_batched(task, members) if batched is None else batched
        if not use_group:
            for c, s in runs:
                out[c, k, s] = _plain_branch(task, optimizer, starts[c], k * base, rate,
                                             n_steps, s)
            continue
        size = max(1, BRANCH_GROUP_EXAMPLES // (k * base))
        for i in range(0, len(runs), size):
            chunk = runs[i:i + size]
            group = GroupStep(task, members[i:i + size], start=[starts[c] for c, _ in chunk],
                              record_loss=True)
            losses = run_group(group, n_steps, graphed=use_graphs(task, cuda_graphs))
            assert losses is not None
            table = losses.T.cpu().numpy().astype(float)  # runs in the group's order
            for j, row in enumerate(table):
                c, s = chunk[group.order[j]]
                bad = np.flatnonzero(~np.isfinite(row))
                if bad.size:  # as the plain loop: NaN from the first non-finite loss on
                    row[bad[0]:] = np.nan
                out[c, k, s] = row
    return out


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
    base, lr = ref.member.batch_size, ref.member.learning_rate
    examples = spec.steps_at_base * base
    scales = ref.scales.set_index("step")
    checkpoints = [int(s) for s in evenly_spaced(steps, spec.n_checkpoints)]
    starts = {c: (ref.snapshots[c], ref.optimizer_snapshots.get(c, {})) for c in checkpoints}
    table = branch_losses(task, opt, starts, base, lr, spec)
    rows = []
    for step in checkpoints:
        def train_steps(state, batch_size, rate, n_steps, seed=0, _c=step):
            """The branch trained above (`branch_losses`), looked up."""
            losses = table[_c, batch_size // base, seed]
            if len(losses) != n_steps or batch_size % base:
                raise UsageError(f"branch {batch_size} x {n_steps} steps was not trained")
            return state, losses

        start = float(scales["eval_loss"].loc[step])
        ref_losses = table[step, 1, 0]
        n_tail = max(1, math.ceil(spec.tail * len(ref_losses)))
        decrease = start - float(np.mean(ref_losses[-n_tail:]))
        tolerance = 0.5 * decrease if decrease > 0 else 0.0
        res = branched_critical_batch(
            train_steps, None, base, examples=examples, lr=lr, factors=spec.factors,
            lr_rule=_RULES[opt], seeds=spec.seeds, tail=spec.tail, level=spec.level,
            tolerance=tolerance, copy_state=lambda s: s)
        rows.append({
            "task": task.name, "optimizer": opt, "step": int(step),
            "eval_loss": start, "base_batch": base, "learning_rate": lr,
            "examples": examples, "tolerance": tolerance,
            "b_branched_low": res.b_crit_interval.low,
            "b_branched_high": res.b_crit_interval.high,
            "branched_status": res.status,
            "diverged_from": next((k * base for k, d in zip(res.factors, res.diverged,
                                                            strict=True) if d), np.nan),
            "b_simple": float(scales["b_simple_collector"].loc[step]),
            "b_noise": float(scales["b_noise_pop"].loc[step]),
        })
    return pd.DataFrame(rows)
