r"""B_crit of each task and optimizer of a harness sweep, next to the measured noise scales.

For one task and optimizer (`fit_targets`):

1. Targets by the fixed rule of `empirical_batch.fit.targets` (`choose_targets`),
   decided from the losses before any fit.
2. B_crit at each target with its interval: `empirical_batch.critical_batch_curve`
   (``FIT_OPTIONS``; a target that cannot be fitted is reported, not raised).
3. The noise scales along the reference run (`empirical_batch.validation.experiments.noise`),
   population estimates (B_simple from the collector path, B_noise bias-corrected;
   the sample values beside them), in these forms:

   - **averaged** (what the model compares B_crit with): for a run at fixed batch $B$
     the model gives $S = \int (1 + \mathcal B/B)\,ds$ and $E = \int (\mathcal B + B)\,ds$
     (App. D, eq. D.1), so $B_{crit}(L) = E_{min}/S_{min} = \int \mathcal B\,ds/\int ds$,
     the progress-weighted mean of the noise scale up to $L$, with progress
     $ds = dt/(1 + B_{noise}/B)$ per step (eq. 2.7; `docs/concepts.md`). Columns
     ``b_simple_avg``/``b_noise_avg`` and the ratios ``b_crit_over_*_avg``: the mean
     along the reference run (batch $B_{ref}$) from step 0 to the step where its logged
     loss curve first crosses $L$, interpolated between logged points
     (``ref_crossing_step``; `empirical_batch.validation.experiments.noise.averaged_scale` and
     `crossing_step`; the values at that step interpolated between the two checkpoints
     around it), NaN where the reference run does not reach $L$ or a B_noise up to it
     is not positive
     (an estimate of GᵀHG ≤ 0 early in training: the weight is then undefined; said in
     ``avg_note``);
   - **averaged, other progress weights**: the progress $ds = dt/(1 + B_{noise}/B)$
     is that of a step at $\epsilon_{opt}(B)$, while the reference run keeps one rate
     $\eta$. Beside it (``*_avg_rate``, ``*_avg_loss`` and their ratios
     ``b_crit_over_*_avg_rate``/``_loss``; `alternative_averages`): the one-step model's
     progress at $\eta$, $\Delta L(\eta) = \eta|G|^2 - \tfrac12\eta^2(G^THG +
     \operatorname{tr}(H\Sigma)/B)$ (eq. 2.5, scalars measured at each checkpoint; SGD
     runs only), and the run's own loss decrease along its logged curve. Where either
     progress is negative (the model predicts a loss increase at $\eta$: weight 0; the
     loss rose between logged steps: counted negative), ``progress_note`` says where;
   - **local**: the value where the reference run first reaches $L$ (``b_simple``,
     ``b_noise``, ``b_crit_over_b_simple``, ``b_crit_over_b_noise``;
     `empirical_batch.validation.experiments.noise.scales_at_losses`).

4. A Table-1-style row (`table1_row`): B_crit at the loosest ("start") and hardest
   ("averaged") fitted target and at the task's common target (`common_target_fits`);
   B_simple and B_noise at the first step where they are defined and averaged by
   progress until the hardest target (the step-weighted mean beside it). The growth of
   B_crit, B_crit(hardest)/B_crit(loosest), and the exponent k of B_crit ∝ L^k carry
   intervals: a seed bootstrap of the sweep (`empirical_batch.validation.uncertainty`:
   keeps that the targets share runs, not the scatter about a power law that seeds do not
   explain); for the growth, [lo_hard/hi_loose, hi_hard/lo_loose] of the two per-target
   intervals (joint level ≥ 1 − 2 × 5 % = 90 %); for k, the regression interval of
   `empirical_batch.fit_power_law` (keeps the scatter, ignores the shared runs). The
   reported interval (``*_low``/``*_high``) is the hull of the methods; each one's ends are
   listed too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..fit import common_target, fit_power_law
from ..fit.targets import best_losses, choose_targets, clear_of
from .curves import b_crit_curve
from .experiments.noise import (
    averaged_scale,
    crossing_step,
    negative_progress,
    scales_at_losses,
    start_value,
    window_values,
)
from .uncertainty import N_BOOT, growth_and_exponent

#: measured noise-scale columns: population B_simple (collector path) and B_noise
B_SIMPLE, B_NOISE = "b_simple_collector", "b_noise_pop"

def _lr_edges(table: pd.DataFrame, grid: tuple[float, ...]) -> str:
    reached = table[table["reached"]]
    lo, hi = min(grid), max(grid)
    edge = reached[np.isclose(reached["learning_rate"], lo) | np.isclose(reached["learning_rate"],
                                                                          hi)]
    return ",".join(str(int(b)) for b in edge["batch_size"])


def ratio(a, b) -> float:
    """a/b, NaN unless both are finite and b > 0."""
    return a / b if (np.isfinite(a) and np.isfinite(b) and b > 0) else np.nan


def reference_curve(frame: pd.DataFrame, scales: pd.DataFrame) -> tuple | None:
    """(steps, losses) of the reference run's logged evaluation loss in the sweep
    ``frame`` (the run at the scales' batch size and learning rate, seed 0), or None
    when the sweep does not hold it."""
    if "learning_rate" not in scales or frame.empty:
        return None
    b, lr = float(scales["batch_size"].iloc[0]), float(scales["learning_rate"].iloc[0])
    rows = frame[(frame["batch_size"] == b) & np.isclose(frame["learning_rate"], lr)]
    if "seed" in rows:
        rows = rows[rows["seed"] == 0]
    if rows.empty or rows["run"].nunique() != 1:
        return None
    rows = rows.sort_values("step")
    return rows["step"].to_numpy(float), rows["metric"].to_numpy(float)


def ref_reaches(scales: pd.DataFrame, target: float, curve=None) -> bool:
    """Whether the reference run reaches ``target``: on its logged curve when given,
    else at one of the checkpoints."""
    if curve is None:
        return bool(np.any(scales["eval_loss"].to_numpy(float) <= target))
    return bool(np.isfinite(crossing_step(curve[0], curve[1], target)))


def averaged_to(scales: pd.DataFrame, column: str, target: float, reached: bool,
                b_ref: float, curve=None) -> float:
    """``column`` averaged by progress along the reference run up to where its loss
    curve (``curve``, default the checkpoints) crosses ``target`` (module doc), NaN when
    the run does not reach it."""
    if not reached:
        return float("nan")
    return averaged_scale(scales, column, target, weight="progress", batch_size=b_ref,
                          curve=curve)


#: the alternative progress weights of the averages (`averaged_scale`): the one-step
#: model's progress at the run's rate, and the run's own loss decrease
ALT_WEIGHTS = ("rate", "loss")


def alternative_averages(scales: pd.DataFrame, target: float, reached: bool, b_ref: float,
                         optimizer: str, curve=None) -> dict:
    """The averages up to ``target`` with the ``ALT_WEIGHTS`` (columns
    ``b_simple_avg_rate``, ``b_noise_avg_rate``, ``b_simple_avg_loss``,
    ``b_noise_avg_loss``) and ``progress_note``: where each weight's progress is
    negative and what the average does there, or why the rate weight is not given
    (the one-step model describes SGD steps only)."""
    out: dict[str, Any] = {}
    notes = []
    for w in ALT_WEIGHTS:
        usable = reached and (w != "rate" or optimizer == "sgd")
        for col, name in ((B_SIMPLE, "b_simple"), (B_NOISE, "b_noise")):
            out[f"{name}_avg_{w}"] = (
                averaged_scale(scales, col, target, weight=w, batch_size=b_ref, curve=curve)
                if usable else float("nan"))
        if not usable:
            if reached:
                notes.append("rate: the one-step model describes SGD steps, not "
                             f"{optimizer}'s")
            continue
        neg = negative_progress(scales, target, w, batch_size=b_ref, curve=curve)
        if neg.size:
            at = ", ".join(f"{v:g}" for v in neg)
            notes.append(
                f"rate: the one-step model predicts a loss increase at the run's rate at "
                f"step(s) {at} (weight 0 there)" if w == "rate" else
                f"loss: the loss rose into logged step(s) {at} (counted as negative "
                "progress)")
    out["progress_note"] = "; ".join(notes)
    return out


def weight_shifts(crit: pd.DataFrame) -> pd.DataFrame:
    """How much each alternative progress weight (``ALT_WEIGHTS``) moves the averaged
    ratios B_crit/B_simple(avg) and B_crit/B_noise(avg) against App. D's ε_opt weight:
    per weight and quantity, the targets where both are finite (``n``), the factor
    ratio(weight)/ratio(App. D) there (``median``, ``min``, ``max``), and how many
    targets move by more than 25 % either way (``n_moved_25pct``)."""
    rows = []
    for w in ALT_WEIGHTS:
        for q in ("b_simple", "b_noise"):
            base, alt = f"b_crit_over_{q}_avg", f"b_crit_over_{q}_avg_{w}"
            if base not in crit or alt not in crit:
                continue
            f = (crit[alt].to_numpy(float) / crit[base].to_numpy(float))
            f = f[np.isfinite(f) & (f > 0)]
            rows.append({"weight": w, "quantity": q, "n": int(f.size),
                         "median": float(np.median(f)) if f.size else np.nan,
                         "min": float(f.min()) if f.size else np.nan,
                         "max": float(f.max()) if f.size else np.nan,
                         "n_moved_25pct": int(np.sum((f > 1.25) | (f < 1 / 1.25)))})
    return pd.DataFrame(rows)


def why_no_average(scales: pd.DataFrame, target: float, reached: bool, curve=None) -> str:
    """Why the averages up to ``target`` are NaN ("" when they need not be)."""
    if not reached:
        return "the reference run does not reach the target"
    s = scales.sort_values("step").reset_index(drop=True)
    parts = []
    for col in (B_NOISE, B_SIMPLE):
        _, _, used = window_values(s, col, target, curve=curve)
        bad = ~(np.isfinite(used) & (used > 0))
        if bad.any():
            steps = s["step"].to_numpy()[: len(used)][bad]
            parts.append(f"{col} not positive at step(s) "
                         f"{', '.join(str(int(v)) for v in steps)}")
    if not parts:
        return ""
    return ("no average: " + "; ".join(parts) + " of the reference run (the progress "
            "weight 1/(1 + B_noise/B) needs B_noise > 0 at every checkpoint the window up "
            "to the target uses)")


@dataclass
class TargetFits:
    """What `fit_targets` gives for one task and optimizer."""

    crit_rows: list
    steps: list
    table1_row: dict
    curve: object


def fit_targets(task: str, optimizer: str, sub, scales: pd.DataFrame,
                grid: tuple[float, ...], fractions, *, n_boot_growth: int = N_BOOT
                ) -> TargetFits:
    """Steps 1–4 of the module doc for one task and optimizer.

    ``sub`` is the sweep of that optimizer, ``scales`` the noise scales measured along
    its reference run (a ``noise_along_reference.csv`` slice), ``grid`` its
    learning-rate grid.
    """
    targets = choose_targets(sub.to_frame(), fractions)
    curve = b_crit_curve(sub, targets)
    at = scales_at_losses(scales, targets)
    b_ref = float(scales["batch_size"].iloc[0])
    ref = reference_curve(sub.to_frame(), scales)
    rows, steps_tabs = [], []
    for i, row in curve.frame.iterrows():
        rec = {"task": task, "optimizer": optimizer, **row.to_dict()}
        reached = ref_reaches(scales, row["target"], ref)
        end = (crossing_step(ref[0], ref[1], row["target"]) if ref is not None
               else crossing_step(scales["step"], scales["eval_loss"], row["target"]))
        rec.update({
            "b_simple": at.loc[i, B_SIMPLE], "b_noise": at.loc[i, B_NOISE],
            "b_simple_sample": at.loc[i, "b_simple"], "b_noise_sample": at.loc[i, "b_noise"],
            "ref_reached": reached, "reference_batch_size": b_ref,
            "ref_crossing_step": end,
            "b_simple_avg": averaged_to(scales, B_SIMPLE, row["target"], reached, b_ref,
                                        ref),
            "b_noise_avg": averaged_to(scales, B_NOISE, row["target"], reached, b_ref, ref),
            "avg_note": why_no_average(scales, row["target"], reached, ref),
        })
        rec.update(alternative_averages(scales, row["target"], reached, b_ref, optimizer,
                                        ref))
        for name in ("b_simple", "b_noise", "b_simple_avg", "b_noise_avg",
                     *(f"{q}_avg_{w}" for w in ALT_WEIGHTS for q in ("b_simple", "b_noise"))):
            short = name.split("_avg")[0]
            suffix = name[len(short):]
            rec[f"b_crit_over_{short}{suffix}"] = ratio(rec["b_crit"], rec[name])
        st = curve.tables[i].to_frame()  # the steps the target's fit was made from
        rec["lr_at_grid_edge"] = _lr_edges(st, grid)
        rows.append(rec)
        steps_tabs.append(st.drop(columns=[c for c in ("seed_steps", "seed_examples")
                                           if c in st]).assign(
            task=task, optimizer=optimizer, target=row["target"]))
    t1 = table1_row(task, optimizer, curve, scales, sub.to_frame(), n_boot_growth, ref)
    return TargetFits(rows, steps_tabs, t1, curve)


def common_target_fits(table1: pd.DataFrame, subs: dict) -> pd.DataFrame:
    """``table1`` with B_crit of every optimizer of a task at one common target.

    The optimizers' hardest targets differ (each is set by its own sweep), and B_crit
    grows as the loss falls, so comparing them at their own hardest targets mixes the
    optimizer with the loss. The common target is `empirical_batch.fit.common_target`
    of the task's hardest targets; columns ``target_common``, ``b_crit_common``,
    ``b_crit_common_low``/``_high``, ``b_crit_common_status``, ``n_batch_sizes_common``.
    ``subs`` maps (task, optimizer) to that optimizer's sweep.
    """
    if table1.empty or "target_averaged" not in table1:
        return table1
    out = table1.copy()
    for task in dict.fromkeys(out["task"]):
        rows = out.index[(out["task"] == task) & out["target_averaged"].notna()]
        if len(rows) < 2:
            continue
        common = common_target([subs[(task, out.at[i, "optimizer"])].to_frame() for i in rows],
                               out.loc[rows, "target_averaged"].to_numpy(float))
        for i in rows:
            f = b_crit_curve(subs[(task, out.at[i, "optimizer"])], [common]).frame.iloc[0]
            out.loc[i, ["target_common", "b_crit_common", "b_crit_common_low",
                        "b_crit_common_high", "n_batch_sizes_common"]] = [
                common, f["b_crit"], f["b_crit_low"], f["b_crit_high"], f["n_batch_sizes"]]
            out.loc[i, "b_crit_common_status"] = f["status"]
    return out


def table1_row(task: str, opt: str, curve, scales: pd.DataFrame, frame: pd.DataFrame,
               n_boot_growth: int = N_BOOT, ref_curve=None) -> dict:
    """The Table-1-style row of one task and optimizer (module doc, step 4)."""
    ok = curve.frame.dropna(subset=["b_crit"]).sort_values("target", ascending=False)
    row: dict[str, Any] = {"task": task, "optimizer": opt, "n_targets_fitted": len(ok)}
    if ok.empty:
        return row
    first, last = ok.iloc[0], ok.iloc[-1]
    b_ref = float(scales["batch_size"].iloc[0])
    bs0, bs0_step = start_value(scales, B_SIMPLE)
    bn0, bn0_step = start_value(scales, B_NOISE)
    row.update({
        "target_start": first["target"], "b_crit_start": first["b_crit"],
        "b_crit_start_low": first["b_crit_low"], "b_crit_start_high": first["b_crit_high"],
        "target_averaged": last["target"], "b_crit_averaged": last["b_crit"],
        "b_crit_averaged_low": last["b_crit_low"], "b_crit_averaged_high": last["b_crit_high"],
        "b_crit_averaged_status": last["status"],
        "n_batch_sizes_averaged": last["n_batch_sizes"],
        "b_simple_start": bs0, "b_simple_start_step": bs0_step,
        "b_noise_start": bn0, "b_noise_start_step": bn0_step,
        "reference_batch_size": b_ref,
        "b_simple_averaged": averaged_scale(scales, B_SIMPLE, last["target"],
                                            weight="progress", batch_size=b_ref,
                                            curve=ref_curve),
        "b_noise_averaged": averaged_scale(scales, B_NOISE, last["target"],
                                           weight="progress", batch_size=b_ref,
                                           curve=ref_curve),
        "b_simple_averaged_steps": averaged_scale(scales, B_SIMPLE, last["target"],
                                                  curve=ref_curve),
        "b_noise_averaged_steps": averaged_scale(scales, B_NOISE, last["target"],
                                                 curve=ref_curve),
        "b_crit_growth": last["b_crit"] / first["b_crit"],
        # the two per-target intervals combined: joint level >= 1 - 2 (1 - level)
        "b_crit_growth_low_pertarget": ratio(last["b_crit_low"], first["b_crit_high"]),
        "b_crit_growth_high_pertarget": (last["b_crit_high"] / first["b_crit_low"]
                                       if first["b_crit_low"] > 0 else np.inf),
    })
    if len(ok) >= 2:
        g = growth_and_exponent(frame, ok["target"].to_numpy(float),
                                ok["b_crit"].to_numpy(float), n_boot=n_boot_growth)
        row.update({"b_crit_growth_low_boot": g.growth_low,
                    "b_crit_growth_high_boot": g.growth_high,
                    "b_crit_loss_exponent": g.exponent,
                    "b_crit_loss_exponent_low_boot": g.exponent_low,
                    "b_crit_loss_exponent_high_boot": g.exponent_high,
                    "n_boot_growth": g.n_boot, "n_boot_growth_valid": g.n_valid})
    if len(ok) >= 3:
        pl = fit_power_law(ok["target"].to_numpy(float), ok["b_crit"].to_numpy(float))
        lo, hi = pl.exponent_interval
        row["b_crit_loss_exponent_low_ols"], row["b_crit_loss_exponent_high_ols"] = lo, hi
    # the reported intervals: the hull of the methods (each misses what another catches)
    for name, parts in (("b_crit_growth", ("pertarget", "boot")),
                        ("b_crit_loss_exponent", ("boot", "ols"))):
        los = [float(row.get(f"{name}_low_{p}", np.nan)) for p in parts]
        his = [float(row.get(f"{name}_high_{p}", np.nan)) for p in parts]
        los, his = [v for v in los if not np.isnan(v)], [v for v in his if not np.isnan(v)]
        row[f"{name}_low"] = min(los) if los else np.nan
        row[f"{name}_high"] = max(his) if his else np.nan
    return row


#: the keep-up rule of each optimizer's branches (`keep_up_point`)
KEEP_UP_RULE = {"sgd": "linear", "adam": "best"}


def keep_up_point(base_batch, b_noise, *, rule: str = "linear", x=None):
    r"""The largest branch batch $kB$ that keeps up with the reference branch at $B$, in
    the one-step model (McCandlish et al. 2018, eqs. 2.5–2.7).

    A step of size $\epsilon = x\,\epsilon_{max}$ at batch $B$ improves the loss by
    $\Delta L = \Delta L_{max}\,[2x - x^2(1 + \mathcal B/B)]$ (eq. 2.5 with
    $\epsilon_{max} = |G|^2/G^THG$, $\Delta L_{max} = \tfrac12|G|^4/G^THG$,
    $\mathcal B = B_{noise}$). A branch spends the same $\Delta$ examples as the reference,
    $\Delta/(kB)$ steps, and keeps up while its decrease is at least half the reference's
    (`empirical_batch.validation.experiments.branched`: tolerance
    $\tfrac12(L_0 - \bar L_1)$). With $G$, $H$, $\Sigma$ held over the window:

    - ``rule="linear"`` (SGD branches at $k\eta$, $x_k = kx$): the branch's decrease is
      $\tfrac{\Delta}{B}\Delta L_{max}[2x - x^2(k + \mathcal B/B)]$, linear in $k$, and
      keeping up, $2x - x^2(k + \mathcal B/B) \ge \tfrac12[2x - x^2(1 + \mathcal B/B)]$, is

      $$kB \le \frac{B}{x} + \frac{B}{2} - \frac{\mathcal B}{2},$$

      which at the reference's best rate, $\eta = \epsilon_{opt}(B)$, $x = 1/(1 + \mathcal
      B/B)$, is $kB \le \tfrac32 B + \tfrac12\mathcal B$. ``x`` = η/ε_max (default: that
      best rate).
    - ``rule="best"`` (every branch at its own $\epsilon_{opt}(kB)$): the decrease per
      example is $\Delta L_{max}/(kB + \mathcal B)$ (eq. 2.7), so
      $kB \le 2B + \mathcal B$. The harness's Adam branches follow the $\sqrt k$ rule in a
      preconditioned geometry the harness does not measure; this is the approximation
      used for them.

    The one-step model is exact for one step of the noisy quadratic (its expected
    improvement is eq. 2.5), so a branch of one step at $kB$ against one reference step
    per $B$ examples keeps up exactly up to this point (``tests/test_branched_keep_up.py``
    checks it on `empirical_batch.simulate.NoisyQuadratic`: $d = 1000$, $h_i = 1/i$,
    $\Sigma = H$, $B = 8$). Over the harness's windows of many steps the state moves
    while the branches train, which the one-step point does not describe: on that
    quadratic the largest factor that keeps up over such windows differs from it, so the
    report's comparison is the model's statement, not an exact identity.

    Inverting the rule gives the local $\mathcal B$ a bracket implies
    (`local_noise_from_bracket`).
    """
    b = np.asarray(base_batch, float)
    bn = np.asarray(b_noise, float)
    if rule == "best":
        return 2.0 * b + bn
    if rule != "linear":
        raise InputError(f"rule must be 'linear' or 'best', got {rule!r}")
    if x is None:  # B/x = B + B_noise at the best rate (also for B_noise = inf)
        return 1.5 * b + bn / 2.0
    return b / np.asarray(x, float) + b / 2.0 - bn / 2.0


def local_noise_from_bracket(base_batch, k_batch, *, rule: str = "linear"):
    r"""The $\mathcal B$ for which `keep_up_point` (at the best rate) equals ``k_batch``:
    $2(kB - \tfrac32 B)$ for ``"linear"``, $kB - 2B$ for ``"best"`` (monotone, so a
    bracket $[low, high)$ of $kB$ maps to one of $\mathcal B$)."""
    b, kb = np.asarray(base_batch, float), np.asarray(k_batch, float)
    if rule == "best":
        return kb - 2.0 * b
    if rule != "linear":
        raise InputError(f"rule must be 'linear' or 'best', got {rule!r}")
    return 2.0 * (kb - 1.5 * b)


def branched_vs_fit(branched: pd.DataFrame, subs: dict) -> pd.DataFrame:
    r"""The branched brackets next to B_crit fitted from the sweep at each checkpoint's loss.

    A branch at $kB$ keeps up while it makes at least half the reference branch's
    progress on the same examples (`empirical_batch.validation.experiments.branched`). With
    the model's progress per example $\propto 1/(B + \mathcal B)$ (eq. 2.7 at small steps), that is
    $(B + \mathcal B)/(kB + \mathcal B) \ge 1/2$, i.e. $kB \le 2B + \mathcal B$: the
    bracket estimates $\mathcal B + 2B_{ref}$, not $\mathcal B$ itself. So each row gets
    $B_{crit}$ at the checkpoint's loss (``b_crit``, ``b_crit_low``/``_high``,
    ``b_crit_status``; `b_crit_curve`; the loss moved clear of every configuration's best
    loss and of the reference configuration's logged losses, like the targets,
    `empirical_batch.fit.targets.clear_of`: ``b_crit_target``),
    and $B_{crit} + 2B_{ref}$ with its interval (``b_crit_plus_2b``, ``_low``/``_high``) and
    $B_{noise} + 2B_{ref}$ (``b_noise_plus_2b``); ``subs`` maps (task, optimizer) to the
    sweep. $2B + \mathcal B$ assumes every branch at its best rate; the keep-up point of
    the rule the branches follow (`keep_up_point`, `KEEP_UP_RULE`: SGD's $k\eta$ gives
    $\tfrac32 B + \tfrac12\mathcal B$ at $\eta = \epsilon_{opt}(B)$) with $B_{crit}$
    (``keep_up``, ``_low``/``_high``) and with the local $B_{noise}$ (``keep_up_noise``) is
    what claim (f) compares the bracket with; ``b_local_low``/``_high`` is the local
    $\mathcal B$ the bracket implies under that rule (`local_noise_from_bracket`).
    """
    if branched.empty:
        return branched
    out = branched.drop(columns=[c for c in branched.columns  # what this adds: idempotent
                                 if c.startswith(("b_crit", "keep_up", "b_local_"))
                                 or c == "b_noise_plus_2b"])
    fits = []
    for _, r in out.iterrows():
        sub = subs[(r["task"], r["optimizer"])]
        # the reference run is one of the sweep's runs, so a checkpoint's loss is one of its
        # logged losses (where its first-reach step jumps) and can be its best loss (where
        # B_crit jumps): moved clear of those and of every configuration's best loss
        frame = sub.to_frame()
        ref = frame[(frame["batch_size"] == r["base_batch"])
                    & np.isclose(frame["learning_rate"], r["learning_rate"])]["metric"]
        target = clear_of(float(r["eval_loss"]), np.concatenate(
            [best_losses(frame)[2].to_numpy(float), ref.to_numpy(float)]))
        f = b_crit_curve(sub, [target]).frame.iloc[0]
        fits.append({"b_crit_target": target, "b_crit": f["b_crit"],
                     "b_crit_low": f["b_crit_low"], "b_crit_high": f["b_crit_high"],
                     "b_crit_status": f["status"]})
    out = pd.concat([out.reset_index(drop=True), pd.DataFrame(fits)], axis=1)
    base = out["base_batch"].astype(float)
    two_b = 2.0 * base
    for col in ("b_crit", "b_crit_low", "b_crit_high"):
        out[col.replace("b_crit", "b_crit_plus_2b")] = out[col].astype(float) + two_b
    out["b_noise_plus_2b"] = out["b_noise"].astype(float) + two_b
    # the keep-up point of the rule the branches follow (keep_up_point), with B_crit and
    # with the local B_noise as the model's noise scale, and the local noise scale the
    # bracket implies (local_noise_from_bracket)
    rules = out["optimizer"].map(KEEP_UP_RULE).fillna("best")
    out["keep_up_rule"] = rules
    for col in ("b_crit", "b_crit_low", "b_crit_high", "b_noise"):
        if col not in out:
            continue
        vals = [float(keep_up_point(b, v, rule=r)) for b, v, r in
                zip(base, out[col].astype(float), rules, strict=True)]
        out[col.replace("b_crit", "keep_up").replace("b_noise", "keep_up_noise")] = vals
    for end in ("low", "high"):
        if f"b_branched_{end}" not in out:
            continue
        out[f"b_local_{end}"] = [
            float(local_noise_from_bracket(b, v, rule=r)) for b, v, r in
            zip(base, out[f"b_branched_{end}"].astype(float), rules, strict=True)]
    return out
