"""Noise scales along reference runs, at the losses of the sweep's targets.

For each optimizer, the reference run is the sweep member at batch size
``NoiseSpec.batch_size``, seed 0, with the learning rate that reached the lowest
evaluation loss there. It is retrained by the program the sweep used for it (one
vmapped group, `train_batched`, or the plain loop, `train_plain`, as
`empirical_batch.harness.trainer.prefer_batched` decides; its evaluation curve must
reproduce the sweep's, which is checked and recorded),
and at ``n_checkpoints`` of its logged steps (log-spaced, step 0 included) the
library measures, on a fixed sample of ``n_examples`` of the task's objective data
(the batches' population):

- ``b_noise``, ``b_simple`` and the four scalars |G|², GᵀHG, tr Σ, tr(HΣ) with
  `empirical_batch.measure.hessian_noise_scale` (per-example gradients and
  Hessian-vector products; the sample is treated as the data set);
- ``b_simple_collector`` with `empirical_batch.measure.per_example_sq_norms`
  and the two-batch estimator `empirical_batch.gns_two_batch` (App. A.1).

The Hessian path treats the sample as the data set: its |G|² is the squared norm of
the sample-mean gradient, which carries tr Σ / n of sampling noise when the sample
stands for a larger population (and GᵀHG carries tr(HΣ)/n). So its B_simple and
B_noise saturate near n when the true values approach n. The population values
used in the report (``b_noise_pop``, ``b_simple_pop``, from
`empirical_batch.measure.HessianNoiseScale.unbiased`) remove these terms the
way App. A.1 does for |G|² (numerator and denominator each unbiased,
Bessel-corrected traces):

$$
B_{noise,pop} = \frac{\tfrac{n}{n-1}\\operatorname{tr}(H\\Sigma)}
{G^THG - \tfrac{1}{n-1}\\operatorname{tr}(H\\Sigma)},
$$

and the same for B_simple, which is then algebraically the two-batch estimate of
the collector path (``b_simple_collector``): the two library paths must agree, and
the report checks that they do.
For Adam reference runs the noise scales are those of the raw gradient (the
paper's Table 1 does the same); the preconditioned ones are not measured here.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import torch

from ..._numeric import progress_mean
from ...errors import InputError
from ...harness.config import TaskPlan, spec_key
from ...harness.resume import cached, task_identity
from ...harness.tasks.base import Task
from ...harness.trainer import Member, log_steps, prefer_batched, train_batched, train_plain
from ...quadratic_model import QuadraticModel
from ...theory import dl_opt
from .scales import collector_b_simple, hessian_scales


@dataclass(frozen=True)
class ReferenceRun:
    member: Member
    steps: int
    #: rows: step, eval_loss, b_noise, b_simple, g2, ghg, ..., b_simple_collector
    scales: pd.DataFrame
    #: parameters (state dicts, on the CPU) at the measured steps
    snapshots: dict
    #: max |eval loss of the retrained run − the sweep's| over logged steps
    replay_error: float
    #: the optimizer's ``state_dict`` at the same steps (for branched training)
    optimizer_snapshots: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {**self.member.to_dict(), "run": self.member.run, "steps": self.steps,
                "replay_error": self.replay_error}


def reference_member(sweep_frame: pd.DataFrame, optimizer: str, batch_size: int,
                     seed: int = 0) -> Member:
    """The learning rate at ``batch_size`` (seed ``seed``) with the lowest evaluation loss."""
    rows = sweep_frame[(sweep_frame.optimizer == optimizer)
                       & (sweep_frame.batch_size == batch_size) & (sweep_frame.seed == seed)]
    if rows.empty:
        raise InputError(
            f"the sweep has no {optimizer} runs at batch size {batch_size} with seed {seed}: "
            "NoiseSpec.batch_size must be one of the sweep's batch sizes"
        )
    best = rows.groupby("learning_rate")["metric"].min()
    best = best[np.isfinite(best)]
    if best.empty:
        raise InputError(f"every {optimizer} run at batch size {batch_size} diverged")
    return Member(optimizer, int(batch_size), float(best.idxmin()), int(seed))


def evenly_spaced(items, n: int) -> list:
    """At most ``n`` of ``items``, evenly spaced by index, first and last included."""
    idx = np.unique(np.round(np.linspace(0, len(items) - 1, n)).astype(int))
    return [items[int(i)] for i in idx]


def objective_sample(task: Task, n: int):
    x, y = task.objective_data()
    if n >= x.shape[0]:
        return x, y
    gen = torch.Generator().manual_seed(1234)
    idx = torch.randperm(x.shape[0], generator=gen)[:n].to(x.device)
    return x[idx], y[idx]


def measure_scales(task: Task, model, n_examples: int, *, hvp_probes: int | None = None,
                   seed: int = 0) -> dict:
    """Both noise-scale measurements at the model's current weights (see module doc),
    the population values for the task's sampling design (`Task.population_size`,
    recorded as ``population_size``). ``hvp_probes``, ``seed``: the Hessian path's
    subsampled probes (`NoiseSpec.hvp_probes`)."""
    x, y = objective_sample(task, n_examples)
    pop = float(task.population_size)
    out = hessian_scales(model, task.loss_fn, x, y, population_size=pop,
                         n_probes=hvp_probes, seed=seed)
    out.update(collector_b_simple(model, task.loss_fn, x, y, population_size=pop))
    out["population_size"] = pop
    with torch.no_grad():
        out["objective_loss"] = float(task.loss_fn(model(x), y))
    return out


def run_reference(task: Task, plan: TaskPlan, sweep_frame: pd.DataFrame, optimizer: str,
                  *, progress: bool = False) -> ReferenceRun:
    """Retrain the reference run of ``optimizer`` and measure the noise scales along it.

    Inside an `empirical_batch.harness.resume.stage_cache` block the result is kept per
    task and optimizer (keyed by the task, the plan's noise spec and step budget, the
    reference member and its swept curve) and a rerun reads it instead of retraining.
    """
    member = reference_member(sweep_frame, optimizer, plan.noise.batch_size)
    swept = sweep_frame[sweep_frame.run == member.run][["step", "metric"]]
    key = (task_identity(task), spec_key(plan.noise), asdict(plan.sweep.budget),
           member.to_dict(), swept.to_numpy().tolist())
    return cached(task.name, "reference", optimizer, key,
                  lambda: _run_reference(task, plan, sweep_frame, member))


def _run_reference(task: Task, plan: TaskPlan, sweep_frame: pd.DataFrame,
                   member: Member) -> ReferenceRun:
    spec = plan.noise
    optimizer = member.optimizer
    steps = plan.sweep.budget.steps(member.batch_size)
    logged = log_steps(steps, plan.sweep.budget.n_log)
    measured = set(int(s) for s in evenly_spaced(logged, spec.n_checkpoints))
    rows, snaps, opt_snaps = [], {}, {}

    def record(step, model, loss, state):
        rec = {"step": step, "examples": step * member.batch_size, "eval_loss": loss}
        rec.update(measure_scales(task, model, spec.n_examples,
                                  hvp_probes=spec.hvp_probes, seed=step))
        rows.append(rec)
        snaps[step], opt_snaps[step] = state

    if prefer_batched(task, [member]):  # the program the sweep trained it with
        def batched_callback(step, group, evals):
            if step in measured:
                record(step, group.member_model(0), float(evals[0]),
                       group.member_state(0, step))

        curve = pd.DataFrame(train_batched(task, [member], steps, logged,
                                           callback=batched_callback))
    else:
        def plain_callback(step, model, loss, opt):
            if step in measured:
                weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
                record(step, model, loss, (weights, copy.deepcopy(opt.state_dict())))

        curve = pd.DataFrame(train_plain(task, member, steps, logged, callback=plain_callback,
                                         with_optimizer=True))
    swept = sweep_frame[sweep_frame.run == member.run].set_index("step")["metric"]
    replay = curve.set_index("step")["metric"]
    both = pd.concat([replay, swept], axis=1, keys=["replay", "sweep"]).dropna()
    replay_error = float((both["replay"] - both["sweep"]).abs().max()) if len(both) else np.nan
    scales = pd.DataFrame(rows)
    scales.insert(0, "task", task.name)
    scales.insert(1, "optimizer", optimizer)
    scales.insert(2, "batch_size", member.batch_size)
    scales.insert(3, "learning_rate", member.learning_rate)
    scales["eps_max"] = scales["g2"] / scales["ghg"]
    scales["dl_max"] = 0.5 * scales["g2"] ** 2 / scales["ghg"]
    return ReferenceRun(member, steps, scales, snaps, replay_error, opt_snaps)


def with_population(scales: pd.DataFrame, population_size: float) -> pd.DataFrame:
    """A noise table written before the sampling design was recorded, with its population
    values (``b_noise_pop``, ``b_simple_pop``, ``b_simple_collector`` and the collector's
    ``g2_collector``/``trace_sigma_collector``) for a population of ``population_size``
    (`Task.population_size`; inf: unchanged) and the column ``population_size``.

    Those tables hold the unbounded-population values; both paths are recomputed from
    the recorded scalars: the Hessian path by `HessianNoiseScale.unbiased`, the
    collector path from its two estimates (|G|²_∞ = |ḡ|² − tr s/n and tr s, so
    |G_D|² = |G|²_∞ + tr s/D and tr Σ_D = (D − 1)/D tr s, the correction of
    `collector_b_simple`). A table that already has ``population_size`` is returned as
    it is.
    """
    from ...measure import HessianNoiseScale
    from ...theory import noise_scales_from_scalars

    if "population_size" in scales.columns:
        return scales
    out = scales.copy()
    out["population_size"] = float(population_size)
    if not np.isfinite(population_size):
        return out
    d = float(population_size)
    for i, r in out.iterrows():
        h = HessianNoiseScale(
            b_noise=r["b_noise"], b_simple=r["b_simple"], g2=r["g2"], ghg=r["ghg"],
            trace_sigma=r["trace_sigma"], trace_h_sigma=r["trace_h_sigma"],
            n_examples=int(r["n_examples"]), ddof=int(r["ddof"])).unbiased(d)
        out.loc[i, ["b_noise_pop", "b_simple_pop"]] = [h.b_noise, h.b_simple]
        if "trace_sigma_collector" in out.columns:
            trs = float(r["trace_sigma_collector"])
            g2 = float(r["g2_collector"]) + trs / d
            trs_d = trs * (d - 1.0) / d
            bs = noise_scales_from_scalars(g2, 1.0, trs_d, 0.0)["b_simple"]
            out.loc[i, ["g2_collector", "trace_sigma_collector", "b_simple_collector"]] = [
                g2, trs_d, bs if g2 > 0 else np.nan]
    return out


def scales_at_losses(scales: pd.DataFrame, losses,
                     columns=("b_simple", "b_noise", "b_simple_collector", "b_noise_pop")):
    """Noise scales interpolated to where the reference run's eval loss first reaches each loss.

    Between the two measured checkpoints that bracket the first crossing, log(scale)
    is interpolated linearly in the evaluation loss. A loss the run never reaches
    gives NaN (and ``reached = False``); a negative or NaN scale at a bracketing
    checkpoint (possible for B_noise where GᵀHG < 0) gives NaN.
    """
    s = scales.sort_values("step").reset_index(drop=True)
    loss = s["eval_loss"].to_numpy(float)
    out = []
    for target in np.atleast_1d(np.asarray(losses, float)):
        row = {"target": float(target), "reached": False}
        hit = np.flatnonzero(loss <= target)
        if hit.size:
            k = int(hit[0])
            row["reached"] = True
            row["ref_step"] = int(s["step"].to_numpy()[s.index.get_loc(k)])
            for col in columns:
                v = s[col].to_numpy(float)
                if k == 0:
                    row[col] = v[0]
                    continue
                lo, hi = v[k - 1], v[k]
                if not (lo > 0 and hi > 0):
                    row[col] = np.nan
                    continue
                w = (loss[k - 1] - target) / (loss[k - 1] - loss[k])
                row[col] = float(np.exp((1 - w) * np.log(lo) + w * np.log(hi)))
        else:
            for col in columns:
                row[col] = np.nan
        out.append(row)
    return pd.DataFrame(out)


def crossing_step(steps, losses, target: float) -> float:
    """The step where a logged loss curve first reaches ``target``, interpolated.

    The first logged point at or below ``target`` and the one before it bracket the
    crossing; between them the loss is taken as linear in log(step) (linear in step
    when the earlier step is 0), the rule `empirical_batch.fit.steps_to_target` uses
    for the sweeps. The first point when it already meets the target; NaN when the
    curve never reaches it (non-finite losses never do).
    """
    steps = np.asarray(steps, float)
    losses = np.asarray(losses, float)
    order = np.argsort(steps, kind="stable")
    steps, losses = steps[order], losses[order]
    hit = np.flatnonzero(losses <= target)  # NaN compares False
    if not hit.size:
        return float("nan")
    k = int(hit[0])
    if k == 0:
        return float(steps[0])
    l0, l1, t0, t1 = losses[k - 1], losses[k], steps[k - 1], steps[k]
    frac = float(np.clip((l0 - target) / (l0 - l1), 0.0, 1.0)) if l0 != l1 else 1.0
    if t0 > 0 and t1 > 0:
        return float(np.exp(np.log(t0) + frac * (np.log(t1) - np.log(t0))))
    return float(t0 + frac * (t1 - t0))


def _window(s: pd.DataFrame, until_loss: float, curve) -> tuple[np.ndarray, int, float]:
    """Checkpoint steps, how many of them lie before the window's end, and the end step.

    The end is where the loss curve (``curve`` = (steps, losses) of the run's logged
    evaluation loss; default the checkpoints' own ``eval_loss``) first reaches
    ``until_loss`` (`crossing_step`), or the last checkpoint when it never does.
    """
    steps = s["step"].to_numpy(float)
    if curve is None:
        curve = (steps, s["eval_loss"].to_numpy(float))
    end = crossing_step(curve[0], curve[1], until_loss)
    if not np.isfinite(end) or end > steps[-1]:
        end = float(steps[-1])
    return steps, int(np.searchsorted(steps, end, side="left")), end


def _cut(steps: np.ndarray, vals: np.ndarray, n_before: int, end: float):
    """The checkpoints before ``end`` and the value at ``end`` (linear in step between
    the two checkpoints that bracket it): the points of the trapezoid rule on [0, end]."""
    t = np.append(steps[:n_before], end)
    if n_before < len(steps) and steps[n_before] == end:
        v_end = vals[n_before]
    elif n_before == 0:  # the window ends before the first checkpoint
        v_end = vals[0]
    else:  # 0 < n_before < len(steps): a checkpoint on each side of end
        t0, t1 = steps[n_before - 1], steps[n_before]
        v0, v1 = vals[n_before - 1], vals[n_before]
        v_end = v0 + (end - t0) / (t1 - t0) * (v1 - v0)
    return t, np.append(vals[:n_before], v_end)


def window_values(scales: pd.DataFrame, column: str, until_loss: float, *,
                  curve=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The steps of the averaging window up to ``until_loss`` (module doc of
    `averaged_scale`), ``column`` there, and the checkpoint values the window uses
    (those inside it and the one after its end, which the value at the end needs)."""
    s = scales.sort_values("step")
    steps, n_before, end = _window(s, until_loss, curve)
    vals = s[column].to_numpy(float)
    t, v = _cut(steps, vals, n_before, end)
    used = vals[: min(n_before + 1, len(vals))]
    return t, v, used


#: the weights `averaged_scale` takes
WEIGHTS = ("steps", "progress", "rate", "loss")


def rate_progress(scales: pd.DataFrame, *, learning_rate: float | None = None,
                  batch_size: float | None = None) -> np.ndarray:
    r"""Per checkpoint (in the order of ``scales``), the one-step model's expected loss
    decrease of one SGD step at the rate the run uses (eq. 2.5),
    $\Delta L(\eta) = \eta|G|^2 - \tfrac12\eta^2(G^THG + \operatorname{tr}(H\Sigma)/B)$,
    from the scalars measured there (``g2``, ``ghg``, ``trace_sigma``,
    ``trace_h_sigma``) through `empirical_batch.QuadraticModel.from_scalars` and its
    ``expected_improvement``. ``learning_rate``/``batch_size`` default to the scales'
    one-valued columns. Negative where the model says a step at that rate raises the
    loss ($\eta > 2\epsilon_{opt}(B)$); NaN where the model is undefined ($|G|^2 \le 0$,
    $G^THG \le 0$ or $\operatorname{tr}(H\Sigma) < 0$ in the estimate).
    """
    eta = _one_value(scales, "learning_rate", learning_rate)
    b = _one_value(scales, "batch_size", batch_size)
    out = np.full(len(scales), np.nan)
    for i, (g2, ghg, tr_s, tr_hs) in enumerate(
            scales[["g2", "ghg", "trace_sigma", "trace_h_sigma"]].to_numpy(float)):
        try:
            model = QuadraticModel.from_scalars(g2=g2, ghg=ghg, trace_sigma=tr_s,
                                                trace_h_sigma=tr_hs)
        except InputError:
            continue
        out[i] = model.expected_improvement(eta, b)
    return out


def _one_value(scales: pd.DataFrame, column: str, given: float | None) -> float:
    """``given``, else the one value of ``column`` in ``scales`` (checked > 0)."""
    if given is None:
        if column not in scales.columns or scales[column].nunique() != 1:
            raise InputError(f"give {column}= or one value in the scales' {column} column")
        given = float(scales[column].iloc[0])
    if not given > 0:
        raise InputError(f"{column} must be > 0, got {given}")
    return float(given)


def _loss_curve(scales: pd.DataFrame, until_loss: float, curve, end: float):
    """The logged loss curve on the window [0, end]: its points before ``end`` and the
    loss at ``end`` (``until_loss`` where the curve crosses it there, else the curve
    interpolated linearly in step)."""
    s = scales.sort_values("step")
    if curve is None:
        curve = (s["step"].to_numpy(float), s["eval_loss"].to_numpy(float))
    ct, cl = (np.asarray(v, float) for v in curve)
    order = np.argsort(ct, kind="stable")
    ct, cl = ct[order], cl[order]
    keep = ct < end
    crossed = crossing_step(ct, cl, until_loss)
    l_end = until_loss if crossed == end else float(np.interp(end, ct, cl))
    return np.append(ct[keep], end), np.append(cl[keep], l_end)


def negative_progress(scales: pd.DataFrame, until_loss: float, weight: str, *,
                      learning_rate: float | None = None, batch_size: float | None = None,
                      curve=None) -> np.ndarray:
    """Where the progress ``weight`` (`averaged_scale`) is negative on the window up to
    ``until_loss``: for ``"rate"`` the checkpoints the window uses where the one-step
    model predicts a loss increase at the run's rate (`rate_progress`; they weigh 0), for
    ``"loss"`` the logged steps at which the loss is higher than at the logged step
    before (those intervals count negatively). Empty for the other weights."""
    s = scales.sort_values("step").reset_index(drop=True)
    steps, n_before, end = _window(s, until_loss, curve)
    if weight == "rate":
        w = rate_progress(s, learning_rate=learning_rate, batch_size=batch_size)
        used = slice(0, min(n_before + 1, len(steps)))
        return steps[used][w[used] < 0]
    if weight == "loss":
        t, loss = _loss_curve(s, until_loss, curve, end)
        return t[1:][np.diff(loss) > 0]
    return np.array([])


def averaged_scale(scales: pd.DataFrame, column: str, until_loss: float, *,
                   weight: str = "steps", noise_column: str = "b_noise_pop",
                   batch_size: float | None = None, curve=None,
                   learning_rate: float | None = None) -> float:
    r"""Mean of ``column`` along the reference run until it reaches ``until_loss``.

    ``weight="steps"``: the trapezoid rule over the measured checkpoints in steps,
    $\int \mathcal B\,dt / \int dt$. The other weights are App. D's progress average
    $E_s[\mathcal B] = \int \mathcal B\,ds / \int ds$ with three measures of the
    progress $ds$ of a step (every weight's mean is `empirical_batch._numeric.progress_mean`
    over the window's points):

    - ``"progress"`` (App. D): $ds = dt/(1 + B_{noise}(t)/B)$ per step, the progress of
      a step at $\epsilon_{opt}(B)$ as a fraction of that of an infinitely large batch
      (eq. 2.7), ``B_noise`` from ``noise_column`` and ``B`` the run's batch size
      (``batch_size``, default the ``batch_size`` column); both integrals by the
      trapezoid rule over the checkpoints. The same weighting as
      `empirical_batch.simulate.traces.noise_scales_along_run` with
      ``average="progress"``. For an Adam run the raw-gradient B_noise stands in for the
      preconditioned one in the weight (the harness measures only the former).
    - ``"rate"``: $ds = \Delta L(\eta)\,dt$, the one-step model's progress of a step at
      the rate $\eta$ the run actually uses (`rate_progress`: eq. 2.5 with the scalars
      measured at each checkpoint; ``learning_rate`` default the ``learning_rate``
      column). Where the model predicts a loss increase the weight is set to 0 (such a
      step makes no progress towards the target; `negative_progress` lists those
      checkpoints, and the report says so). NaN where the model is undefined at a
      checkpoint the window uses, or every weight is 0. A model of SGD steps: for an
      Adam run it does not describe the run's steps.
    - ``"loss"``: $ds = -dL$, the run's own loss decrease along its logged curve
      (``curve``, default the checkpoints' ``eval_loss``):
      $\sum_j \tfrac12(\mathcal B_j + \mathcal B_{j+1})(L_j - L_{j+1})$ over the logged
      points up to the crossing, divided by $L_0 - L$, with $\mathcal B$ interpolated
      linearly in step between checkpoints. An interval where the loss rose counts
      negatively (net progress; `negative_progress` lists them); NaN when the loss at
      the window's end is not below its start.

    The window is $[0, t_L]$ with $t_L$ the step where the run's loss curve first
    reaches ``until_loss``, interpolated between logged points (`crossing_step`):
    ``curve`` = (steps, losses) of the run's logged evaluation loss (denser than the
    checkpoints where the noise scales are measured), default the checkpoints'
    ``eval_loss``. The integrands at $t_L$ are interpolated linearly in step between
    the checkpoints that bracket it, so the window ends at the crossing, not at the
    next checkpoint. At $t_L = 0$ the mean is the value at step 0 (the limit). The
    range is the whole run when the loss is never reached. NaN when any checkpoint
    value the window uses (or, for ``"progress"``, any weight's B_noise) is not
    positive-finite.
    """
    if weight not in WEIGHTS:
        raise InputError(f"weight must be one of {', '.join(WEIGHTS)}, got {weight!r}")
    t, vals, used = window_values(scales, column, until_loss, curve=curve)
    if not np.all(np.isfinite(used) & (used > 0)):
        return float("nan")
    if t[-1] == t[0]:
        return float(vals[0])
    if weight == "steps":
        return progress_mean(vals, at=t)
    s = scales.sort_values("step").reset_index(drop=True)
    if weight == "loss":
        steps, n_before, end = _window(s, until_loss, curve)
        lt, loss = _loss_curve(s, until_loss, curve, end)
        n_used = min(n_before + 1, len(steps))
        v = np.interp(lt, steps[:n_used], s[column].to_numpy(float)[:n_used])
        if not loss[0] - loss[-1] > 0:
            return float("nan")
        return progress_mean(v, at=-loss)  # ds = -dL
    if weight == "rate":
        w_col = s.assign(_progress=rate_progress(s, learning_rate=learning_rate,
                                                 batch_size=batch_size))
        _, w, w_used = window_values(w_col, "_progress", until_loss, curve=curve)
        if not np.all(np.isfinite(w_used)):
            return float("nan")
        w = np.clip(w, 0.0, None)  # a step that raises the loss makes no progress
        return progress_mean(vals, at=t, rate=w)  # NaN where every weight is 0
    batch_size = _one_value(s, "batch_size", batch_size)
    _, bn, bn_used = window_values(scales, noise_column, until_loss, curve=curve)
    if not np.all(np.isfinite(bn_used) & (bn_used > 0)):
        return float("nan")
    w = dl_opt(float(batch_size), 1.0, bn)  # ds/dt = ΔL_opt/ΔL_max (eq. 2.7)
    return progress_mean(vals, at=t, rate=w)


def start_value(scales: pd.DataFrame, column: str) -> tuple[float, int]:
    """``column`` at the first measured step where it is positive-finite, and that step.

    The start value of Table 1 is measured at step 0 (no interpolation between
    checkpoints); only where it is undefined there (e.g. B_noise with GᵀHG ≤ 0) is
    the next checkpoint used. ``(nan, -1)`` when no checkpoint has a defined value.
    """
    s = scales.sort_values("step")
    v = s[column].to_numpy(float)
    ok = np.flatnonzero(np.isfinite(v) & (v > 0))
    if not ok.size:
        return float("nan"), -1
    return float(v[ok[0]]), int(s["step"].to_numpy()[ok[0]])
