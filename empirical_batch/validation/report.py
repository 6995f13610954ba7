"""The harness report: B_crit from sweeps next to the noise scales, and the one-step test.

For each task and optimizer:

1. Targets (fixed rule, decided before looking at any fit). Let L_0 be the median
   evaluation loss at step 0, and for each batch size let its best loss be the lowest
   loss that *every* seed of one learning rate reaches (min over learning rates of the
   worst seed's minimum). With n batch sizes, K = min(n, max(``TARGET_MIN_REACH``,
   ⌈n/2⌉)) (K = 5 of 8 for the ``cpu`` preset, 6 of 11 for ``full``, all 3 for
   ``tiny``) and L_K the K-th lowest best loss, the hardest target is

       L_hard = (1 + m) L_K,   m = ``TARGET_MARGIN`` (2 %),

   so at least K batch sizes reach it with a relative margin m to spare, and
   target_f = L_hard + f (L_0 − L_hard) for each f of ``HarnessConfig.target_fractions``
   (by default 1/2, 1/4, 1/8, 1/16, 0). A target is never at one configuration's best
   value: any target within a relative ``TARGET_CLEARANCE`` (10⁻³) of the best loss of
   some (batch size, learning rate) — the loss where that configuration stops reaching
   it — is moved up to (1 + 2·10⁻³) times that loss (repeated until clear). The earlier
   rule (L_hard = the median over batch sizes of the best loss) put the hardest target
   exactly at one batch size's best value: reached only by equality, so moving it by
   10⁻⁹ changed B_crit by up to 43 % (``tests/test_harness_targets.py`` checks that no
   committed B_crit moves by 5 % when its target moves by 10⁻⁶ relative). A target
   fewer than 3 batch sizes reach is reported, not fitted.
2. B_crit(target) with its interval: `empirical_batch.critical_batch_curve`.
3. B_simple and B_noise at the same losses: `empirical_batch.harness.noise`; the report
   uses the population estimates (B_simple from the collector path, B_noise
   Bessel/bias-corrected, see that module) and lists the sample values beside them.
4. Table-1-style summary: B_crit at the loosest ("start") and hardest ("averaged":
   in the model B_crit is B_noise averaged over the run) fitted target, and at the
   task's common target, the easiest of its optimizers' hardest targets (for comparing
   optimizers at one loss: `common_target_fits`); B_simple and
   B_noise at the first measured step where they are defined (step 0 unless a value
   there is not positive-finite; the step is listed) as "start", and averaged along the
   reference run until it reaches the hardest fitted target, weighted by progress
   ds = dt / (1 + B_noise/B) (the paper's App. D average, `averaged_scale`; the
   step-weighted mean is listed beside it). The growth of B_crit over training,
   B_crit(hardest) / B_crit(loosest), and the exponent k of B_crit ∝ L^k over the
   fitted targets carry intervals: from a bootstrap of the sweep's seeds
   (`empirical_batch.harness.uncertainty`: keeps that the targets share runs, but
   not the scatter of B_crit about a power law that seeds do not explain); for the
   growth, [lo_hard/hi_loose, hi_hard/lo_loose] of the two per-target intervals (joint
   level ≥ 1 − 2 × 5 % = 90 % whatever their correlation); for k, the regression
   interval of `empirical_batch.fit_power_law` (keeps the scatter, ignores the shared
   runs). The reported interval (``*_lo``/``*_hi``) is the hull of the two; each
   method's ends are listed too.
5. One-step experiment on the SGD reference run (`empirical_batch.harness.one_step`).
6. Where the plan asks for it, the critical batch measured directly by branched training
   at checkpoints of the reference runs (`empirical_batch.harness.branched`).
6. The claims table (`empirical_batch.harness.claims`), from the tables above.

Everything lands in ``OUT/results/*.csv``, ``OUT/figures/*.png`` and ``OUT/report.md``.
`reanalyze` redoes steps 1–2, 4 and 6 from the sweeps and the measured tables already
in ``OUT/results`` (no training, no Hessian-vector products: no GPU needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._io import atomic_path, atomic_write_text
from ..errors import InputError
from . import library
from .b_crit_law import law_table, render_law
from .branched import run_branched
from .claims import claims_table
from .config import HarnessConfig
from .markdown import md_table
from .noise import averaged_scale, run_reference, scales_at_losses, start_value
from .one_step import run_one_step
from .sweep import sweep_files
from .uncertainty import N_BOOT, growth_and_exponent

#: relative margin of the hardest target above the K-th lowest best loss (module doc)
TARGET_MARGIN = 0.02
#: K, the number of batch sizes that must reach the hardest target with that margin,
#: is at least this (all batch sizes when there are fewer) and at least half of them
TARGET_MIN_REACH = 5
#: no target lies within this relative distance of a configuration's best loss
TARGET_CLEARANCE = 1e-3


def best_losses(frame: pd.DataFrame) -> tuple[float, pd.Series, pd.Series]:
    """L_0 and the best losses of the module doc: per batch size and per configuration.

    Returns ``(l0, per_batch_size, per_config)``: the median loss at step 0, the best
    loss every seed of one learning rate reaches at each batch size (min over learning
    rates of the worst seed's minimum), and that worst-seed minimum per (batch size,
    learning rate): seeds are averaged, so a configuration reaches a target only if
    every seed does.
    """
    finite = frame[np.isfinite(frame["metric"])]
    if finite.empty:
        raise InputError("every logged loss is NaN/inf: no targets can be chosen")
    l0 = float(finite.loc[finite.step == 0, "metric"].median())
    keys = ["batch_size", "learning_rate"] if "learning_rate" in finite else ["batch_size"]
    seed = ["seed"] if "seed" in finite else []
    per_run = finite.groupby([*keys, *seed])["metric"].min()
    per_config = per_run.groupby(level=keys).max() if seed else per_run
    best = per_config.groupby(level="batch_size").min()
    return l0, best, per_config


def reach_count(n_batch_sizes: int, min_reach: int = TARGET_MIN_REACH) -> int:
    """K = min(n, max(min_reach, ⌈n/2⌉)): batch sizes that must reach the hardest target."""
    return int(min(n_batch_sizes, max(min_reach, -(-n_batch_sizes // 2))))


def clear_of(target: float, losses, clearance: float = TARGET_CLEARANCE) -> float:
    """``target`` moved up past every loss in ``losses`` within relative ``clearance``.

    Each loss ``b`` with |target − b| ≤ clearance·|b| moves the target to
    b + 2·clearance·|b|; repeated until no loss is that close (it only moves up, past
    finitely many losses, so it ends).
    """
    vals = np.sort(np.asarray(losses, float)[np.isfinite(np.asarray(losses, float))])
    t = float(target)
    for b in vals:  # ascending: a move past b can only bring later (larger) losses near
        if abs(t - b) <= clearance * abs(b):
            t = b + 2 * clearance * abs(b)
    return t


def choose_targets(frame: pd.DataFrame, fractions, *, margin: float = TARGET_MARGIN,
                   min_reach: int = TARGET_MIN_REACH,
                   clearance: float = TARGET_CLEARANCE) -> np.ndarray:
    """Targets by the rule of the module docstring (descending, distinct).

    L_hard = (1 + ``margin``) × the K-th lowest per-batch-size best loss
    (K = `reach_count`), target_f = L_hard + f (L_0 − L_hard), each moved clear of
    every configuration's best loss (`clear_of`). The best loss "reached at a batch
    size" is that of its best learning rate *for every seed* (the worst seed's best
    loss), since seeds are averaged and a mean needs every seed to reach the target.
    """
    if not margin > 0 or not clearance > 0 or 2 * clearance >= margin:
        raise InputError(f"need margin > 2 × clearance > 0, got margin={margin}, "
                         f"clearance={clearance}")
    l0, best, per_config = best_losses(frame)
    k = reach_count(len(best), min_reach)
    l_k = float(np.sort(best.to_numpy(float))[k - 1])
    if not l_k > 0:
        raise InputError(f"a relative target margin needs positive losses; the {k}-th lowest "
                         f"best loss over batch sizes is {l_k:.4g}")
    l_hard = (1 + margin) * l_k
    if not l_hard < l0:
        raise InputError(f"no training progress: {1 + margin:g} × the {k}-th lowest best "
                         f"loss over batch sizes, {l_hard:.4g}, is >= initial loss {l0:.4g}")
    targets = [clear_of(l_hard + f * (l0 - l_hard), per_config.to_numpy(float), clearance)
               for f in fractions]
    return np.unique(targets)[::-1]


def _lr_edges(table: pd.DataFrame, grid: tuple[float, ...]) -> str:
    reached = table[table["reached"]]
    lo, hi = min(grid), max(grid)
    edge = reached[np.isclose(reached["learning_rate"], lo) | np.isclose(reached["learning_rate"],
                                                                          hi)]
    return ",".join(str(int(b)) for b in edge["batch_size"])


def _ratio(a, b):
    return a / b if (np.isfinite(a) and np.isfinite(b) and b > 0) else np.nan


@dataclass
class AnalysisResults:
    """The tables of one analysis (what `write_results`, `draw_figures` and
    `render_markdown` turn into files); ``curves`` maps (task, optimizer) to the
    `CriticalBatchCurve` and the reference run's noise scales."""

    crit: pd.DataFrame
    table1: pd.DataFrame
    noise: pd.DataFrame
    steps: pd.DataFrame
    refs: pd.DataFrame
    one_step: pd.DataFrame
    one_step_summary: pd.DataFrame
    curves: dict
    claims: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: branched critical batch next to B_crit and the noise scales (`harness.branched`)
    branched: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: B_crit(L) = B*/L^(1/α_B) per task and optimizer (`harness.b_crit_law`)
    law: pd.DataFrame = field(default_factory=pd.DataFrame)


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
    """Steps 1, 2 and 4 of the module doc for one task and optimizer.

    ``sub`` is the sweep of that optimizer, ``scales`` the noise scales measured along
    its reference run (a ``noise_along_reference.csv`` slice), ``grid`` its
    learning-rate grid.
    """
    targets = choose_targets(sub.to_frame(), fractions)
    curve = library.b_crit_curve(sub, targets)
    at = scales_at_losses(scales, targets)
    rows, steps_tabs = [], []
    for i, row in curve.frame.iterrows():
        rec = {"task": task, "optimizer": optimizer, **row.to_dict()}
        rec.update({
            "b_simple": at.loc[i, "b_simple_collector"],
            "b_noise": at.loc[i, "b_noise_pop"],
            "b_simple_sample": at.loc[i, "b_simple"],
            "b_noise_sample": at.loc[i, "b_noise"],
            "ref_reached": at.loc[i, "reached"],
        })
        rec["b_crit_over_b_simple"] = _ratio(rec["b_crit"], rec["b_simple"])
        rec["b_crit_over_b_noise"] = _ratio(rec["b_crit"], rec["b_noise"])
        st = library.steps_table(sub, row["target"])
        rec["lr_at_grid_edge"] = _lr_edges(st, grid)
        rows.append(rec)
        steps_tabs.append(st.drop(columns=[c for c in ("seed_steps", "seed_examples")
                                           if c in st]).assign(
            task=task, optimizer=optimizer, target=row["target"]))
    t1 = _table1_row(task, optimizer, curve, scales, sub.to_frame(), n_boot_growth)
    return TargetFits(rows, steps_tabs, t1, curve)


def compute_results(config: HarnessConfig, out: str | Path, *, device="cpu", progress=False,
                    timings: dict | None = None) -> AnalysisResults:
    """Noise scales, one-step experiment and fits for every task of ``config`` on the
    sweeps under ``out`` (computation only: nothing is written)."""
    import time

    out = Path(out)
    timings = {} if timings is None else timings
    crit_rows, table1, noise_tabs, steps_tabs, os_tabs, os_sums, refs = [], [], [], [], [], [], []
    branched_tabs: list[pd.DataFrame] = []
    curves: dict = {}
    subs: dict = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(len(p.sweep.optimizers) for p in config.plans), unit="task·opt",
                   desc="noise scales, one-step, fits", leave=False)
    for plan in config.plans:
        task = plan.make_task().to(device)
        sweep = library.load_sweeps(sweep_files(out, plan.task))
        frame = sweep.to_frame()
        for opt in plan.sweep.optimizers:
            if bar is not None:
                bar.set_postfix_str(f"{plan.task}/{opt}")
            t0 = time.perf_counter()
            sub = library.select(sweep, optimizer=opt)
            ref = run_reference(task, plan, frame, opt)
            refs.append({"task": plan.task, **ref.to_dict()})
            noise_tabs.append(ref.scales)
            fits = fit_targets(plan.task, opt, sub, ref.scales, plan.sweep.learning_rates[opt],
                               config.target_fractions)
            crit_rows += fits.crit_rows
            steps_tabs += fits.steps
            table1.append(fits.table1_row)
            subs[(plan.task, opt)] = sub
            curves[(plan.task, opt)] = (fits.curve, ref.scales)
            timings[f"noise+fit/{plan.task}/{opt}"] = round(time.perf_counter() - t0, 2)
            if opt == "sgd":
                t0 = time.perf_counter()
                res = run_one_step(task, plan.one_step, ref)
                os_tabs.append(res.table)
                os_sums += res.summary["checkpoints"]
                timings[f"one_step/{plan.task}"] = round(time.perf_counter() - t0, 2)
            if plan.branched is not None:
                t0 = time.perf_counter()
                branched_tabs.append(run_branched(task, plan.branched, ref, sub))
                timings[f"branched/{plan.task}/{opt}"] = round(time.perf_counter() - t0, 2)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    crit, t1 = pd.DataFrame(crit_rows), common_target_fits(pd.DataFrame(table1), subs)
    one = pd.concat(os_tabs, ignore_index=True) if os_tabs else pd.DataFrame()
    one_sum = pd.DataFrame(os_sums)
    return AnalysisResults(
        crit=crit, table1=t1, noise=pd.concat(noise_tabs, ignore_index=True),
        steps=pd.concat(steps_tabs, ignore_index=True), refs=pd.DataFrame(refs),
        one_step=one, one_step_summary=one_sum, curves=curves,
        claims=claims_table(crit, t1, one),
        branched=pd.concat(branched_tabs, ignore_index=True) if branched_tabs else
        pd.DataFrame(), law=law_table(config, curves),
    )


def reanalyze(config: HarnessConfig, out: str | Path) -> AnalysisResults:
    """The target-dependent analysis again, from what ``out`` already holds (no GPU).

    Reads the sweeps and the measured tables of an earlier analysis
    (``results/noise_along_reference.csv``, ``reference_runs.csv``, ``one_step.csv``,
    ``one_step_summary.csv``: the reference runs, Hessian-vector products and one-step
    experiment, which do not depend on the targets), chooses the targets, fits B_crit
    and rebuilds ``b_crit_vs_noise``, ``steps_to_target``, ``table1`` and the claims.
    """
    res = Path(out) / "results"
    need = ("noise", "refs", "one_step", "one_step_summary")
    missing = [RESULT_FILES[k] for k in need if not (res / RESULT_FILES[k]).is_file()]
    if missing:
        raise FileNotFoundError(f"{res} lacks {missing}: run the analyze stage first (it "
                                "measures the noise scales and the one-step experiment)")
    read = {k: pd.read_csv(res / RESULT_FILES[k]) for k in need}
    branched_file = res / RESULT_FILES["branched"]  # measured, kept as it is
    read["branched"] = pd.read_csv(branched_file) if branched_file.is_file() else \
        pd.DataFrame()
    tasks = set(config.tasks)
    read = {k: (v[v["task"].isin(tasks)].reset_index(drop=True) if "task" in v else v)
            for k, v in read.items()}
    crit_rows, table1, steps_tabs = [], [], []
    curves: dict = {}
    subs: dict = {}
    for plan in config.plans:
        sweep = library.load_sweeps(sweep_files(out, plan.task))
        for opt in plan.sweep.optimizers:
            scales = read["noise"][(read["noise"]["task"] == plan.task)
                                   & (read["noise"]["optimizer"] == opt)]
            if scales.empty:
                raise InputError(f"{res / RESULT_FILES['noise']} has no rows for "
                                 f"{plan.task}/{opt}: run the analyze stage for it first")
            sub = library.select(sweep, optimizer=opt)
            fits = fit_targets(plan.task, opt, sub, scales.reset_index(drop=True),
                               plan.sweep.learning_rates[opt], config.target_fractions)
            crit_rows += fits.crit_rows
            steps_tabs += fits.steps
            table1.append(fits.table1_row)
            subs[(plan.task, opt)] = sub
            curves[(plan.task, opt)] = (fits.curve, scales)
    crit, t1 = pd.DataFrame(crit_rows), common_target_fits(pd.DataFrame(table1), subs)
    return AnalysisResults(
        crit=crit, table1=t1, noise=read["noise"],
        steps=pd.concat(steps_tabs, ignore_index=True), refs=read["refs"],
        one_step=read["one_step"], one_step_summary=read["one_step_summary"], curves=curves,
        claims=claims_table(crit, t1, read["one_step"]), branched=read["branched"],
        law=law_table(config, curves),
    )


RESULT_FILES = {
    "crit": "b_crit_vs_noise.csv", "table1": "table1.csv",
    "noise": "noise_along_reference.csv", "steps": "steps_to_target.csv",
    "refs": "reference_runs.csv", "one_step": "one_step.csv",
    "one_step_summary": "one_step_summary.csv", "claims": "claims.csv",
    "branched": "branched.csv", "law": "b_crit_law.csv",
}


def write_results(results: AnalysisResults, out: str | Path) -> list[Path]:
    """The tables as ``OUT/results/*.csv`` (each written atomically)."""
    res_dir = Path(out) / "results"
    res_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for attr, name in RESULT_FILES.items():
        if attr == "branched" and results.branched.empty:
            continue  # no plan asked for branched training
        path = res_dir / name
        with atomic_path(path) as tmp:
            getattr(results, attr).to_csv(tmp, index=False, float_format="%.6g")
        files.append(path)
    return files


def draw_figures(results: AnalysisResults, config: HarnessConfig, out: str | Path) -> list[Path]:
    """The per-task figures as ``OUT/figures/*.png``."""
    from . import figures

    fig_dir = Path(out) / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    for plan in config.plans:
        files += figures.task_figures(plan.task, results.curves, results.crit,
                                      results.one_step, results.one_step_summary, fig_dir)
    return files


def write_all(results: AnalysisResults, config: HarnessConfig, out: str | Path) -> list[Path]:
    """`write_results`, `draw_figures` and ``OUT/report.md`` (`render_markdown`)."""
    files = write_results(results, out)
    files += draw_figures(results, config, out)
    report = Path(out) / "report.md"
    atomic_write_text(report, render_markdown(
        config.name, results.crit, results.table1, results.one_step,
        results.one_step_summary, results.noise, claims=results.claims,
        branched=results.branched) + "\n" + render_law(results.law))
    files.append(report)
    return files


def analyze(config: HarnessConfig, out: str | Path, *, device="cpu", progress=False,
            timings: dict | None = None) -> list[Path]:
    """`compute_results`, then `write_all` under ``out``; returns the files written."""
    r = compute_results(config, out, device=device, progress=progress, timings=timings)
    return write_all(r, config, out)


def report(config: HarnessConfig, out: str | Path) -> list[Path]:
    """`reanalyze`, then `write_all` under ``out`` (the ``report`` stage: no GPU)."""
    return write_all(reanalyze(config, out), config, out)


def common_target(frames, hardest) -> float:
    """The easiest of the ``hardest`` targets, clear of every configuration's best loss in
    every sweep of ``frames`` (see `common_target_fits`)."""
    losses = np.concatenate([best_losses(f)[2].to_numpy(float) for f in frames])
    return clear_of(float(np.max(hardest)), losses)


def common_target_fits(table1: pd.DataFrame, subs: dict) -> pd.DataFrame:
    """``table1`` with B_crit of every optimizer of a task at one common target.

    The optimizers' hardest targets differ (each is set by its own sweep), and B_crit
    grows as the loss falls, so comparing them at their own hardest targets mixes the
    optimizer with the loss. The common target is the easiest of the task's hardest
    targets (every optimizer reaches it with at least the margin of the module doc),
    moved clear of every configuration's best loss of every optimizer (`clear_of`);
    columns ``target_common``, ``b_crit_common``, ``b_crit_common_lo``/``_hi``,
    ``b_crit_common_status``, ``n_batch_sizes_common``. ``subs`` maps (task,
    optimizer) to that optimizer's sweep.
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
            f = library.b_crit_curve(subs[(task, out.at[i, "optimizer"])], [common]).frame.iloc[0]
            out.loc[i, ["target_common", "b_crit_common", "b_crit_common_lo",
                        "b_crit_common_hi", "n_batch_sizes_common"]] = [
                common, f["b_crit"], f["b_crit_lo"], f["b_crit_hi"], f["n_batch_sizes"]]
            out.loc[i, "b_crit_common_status"] = f["status"]
    return out


def _table1_row(task: str, opt: str, curve, scales: pd.DataFrame, frame: pd.DataFrame,
                n_boot_growth: int = N_BOOT) -> dict:
    ok = curve.frame.dropna(subset=["b_crit"]).sort_values("target", ascending=False)
    row: dict[str, Any] = {"task": task, "optimizer": opt, "n_targets_fitted": len(ok)}
    if ok.empty:
        return row
    first, last = ok.iloc[0], ok.iloc[-1]
    b_ref = float(scales["batch_size"].iloc[0])
    bs0, bs0_step = start_value(scales, "b_simple_collector")
    bn0, bn0_step = start_value(scales, "b_noise_pop")
    row.update({
        "target_start": first["target"], "b_crit_start": first["b_crit"],
        "b_crit_start_lo": first["b_crit_lo"], "b_crit_start_hi": first["b_crit_hi"],
        "target_averaged": last["target"], "b_crit_averaged": last["b_crit"],
        "b_crit_averaged_lo": last["b_crit_lo"], "b_crit_averaged_hi": last["b_crit_hi"],
        "b_crit_averaged_status": last["status"],
        "n_batch_sizes_averaged": last["n_batch_sizes"],
        "b_simple_start": bs0, "b_simple_start_step": bs0_step,
        "b_noise_start": bn0, "b_noise_start_step": bn0_step,
        "reference_batch_size": b_ref,
        "b_simple_averaged": averaged_scale(scales, "b_simple_collector", last["target"],
                                            weight="progress", batch_size=b_ref),
        "b_noise_averaged": averaged_scale(scales, "b_noise_pop", last["target"],
                                           weight="progress", batch_size=b_ref),
        "b_simple_averaged_steps": averaged_scale(scales, "b_simple_collector",
                                                  last["target"]),
        "b_noise_averaged_steps": averaged_scale(scales, "b_noise_pop", last["target"]),
        "b_crit_growth": last["b_crit"] / first["b_crit"],
        # the two per-target intervals combined: joint level >= 1 - 2 (1 - level)
        "b_crit_growth_lo_pertarget": _ratio(last["b_crit_lo"], first["b_crit_hi"]),
        "b_crit_growth_hi_pertarget": (last["b_crit_hi"] / first["b_crit_lo"]
                                       if first["b_crit_lo"] > 0 else np.inf),
    })
    if len(ok) >= 2:
        g = growth_and_exponent(frame, ok["target"].to_numpy(float),
                                ok["b_crit"].to_numpy(float), n_boot=n_boot_growth)
        row.update({"b_crit_growth_lo_boot": g.growth_lo, "b_crit_growth_hi_boot": g.growth_hi,
                    "b_crit_loss_exponent": g.exponent,
                    "b_crit_loss_exponent_lo_boot": g.exponent_lo,
                    "b_crit_loss_exponent_hi_boot": g.exponent_hi,
                    "n_boot_growth": g.n_boot, "n_boot_growth_valid": g.n_valid})
    if len(ok) >= 3:
        pl = library.power_law(ok["target"].to_numpy(float), ok["b_crit"].to_numpy(float))
        lo, hi = pl.interval
        row["b_crit_loss_exponent_lo_ols"], row["b_crit_loss_exponent_hi_ols"] = lo, hi
    # the reported intervals: the hull of the methods (each misses what another catches)
    for name, parts in (("b_crit_growth", ("pertarget", "boot")),
                        ("b_crit_loss_exponent", ("boot", "ols"))):
        los = [float(row.get(f"{name}_lo_{p}", np.nan)) for p in parts]
        his = [float(row.get(f"{name}_hi_{p}", np.nan)) for p in parts]
        los, his = [v for v in los if not np.isnan(v)], [v for v in his if not np.isnan(v)]
        row[f"{name}_lo"] = min(los) if los else np.nan
        row[f"{name}_hi"] = max(his) if his else np.nan
    return row


def render_markdown(name, crit, t1, os_table, os_sum, noise, claims=None,
                    branched=None) -> str:
    """The report as Markdown tables (the docs page quotes these)."""
    parts = [f"# Harness report (`{name}` configuration)\n"]
    if claims is not None and len(claims):
        parts.append("## Claims of the paper, checked (generated from the tables below)\n")
        parts.append("Rules: `empirical_batch/harness/claims.py`. A claim holds only where its "
                     "interval supports it. value/lo/hi: (a) B_crit/B_simple farthest from 1, "
                     "(b) growth with the per-target interval, (c) the smaller binomial tail "
                     "probability of the misses, (d) B_crit ratio Adam/SGD, (e) targets where "
                     "B_noise / B_simple is closer, of hi compared.\n")
        parts.append(md_table(claims, {
            "task": "task", "optimizer": "opt", "claim": "claim", "statement": "statement",
            "verdict": "verdict", "value": "value", "lo": "lo", "hi": "hi",
            "evidence": "numbers behind it"}))
    parts.append("\n## B_crit against the noise scales at the same loss\n")
    parts.append("Targets: the hardest is 2 % above the best loss that at least K batch sizes "
                 "reach (K = max(5, half of them)); rule in "
                 "`empirical_batch/harness/report.py`.\n")
    parts.append(md_table(crit, {
        "task": "task", "optimizer": "opt", "target": "target loss", "b_crit": "B_crit",
        "b_crit_lo": "lo", "b_crit_hi": "hi", "n_batch_sizes": "n_B",
        "b_simple": "B_simple", "b_noise": "B_noise",
        "b_crit_over_b_simple": "B_crit/B_simple", "b_crit_over_b_noise": "B_crit/B_noise",
        "extrapolation": "extrap.", "lr_at_grid_edge": "lr at grid edge (B)", "note": "note"}))
    parts.append("\n## Table-1-style summary (start / averaged)\n")
    parts.append("Start: B_simple and B_noise measured at the step listed (0 where defined). "
                 "Averaged: along the reference run until the hardest target, weighted by "
                 "progress ds = dt/(1 + B_noise/B) (App. D); the step-weighted mean beside it. "
                 "Common target: the easiest of the task's optimizers' hardest targets, where "
                 "the optimizers are compared.\n")
    parts.append(md_table(t1, {
        "task": "task", "optimizer": "opt", "b_crit_start": "B_crit start",
        "b_crit_averaged": "B_crit averaged", "b_crit_averaged_lo": "lo",
        "b_crit_averaged_hi": "hi", "n_batch_sizes_averaged": "n_B",
        "b_simple_start": "B_simple start", "b_simple_start_step": "at step",
        "b_simple_averaged": "B_simple averaged (progress)",
        "b_simple_averaged_steps": "(steps)", "b_noise_start": "B_noise start",
        "b_noise_start_step": "at step", "b_noise_averaged": "B_noise averaged (progress)",
        "b_noise_averaged_steps": "(steps)", "target_common": "common target",
        "b_crit_common": "B_crit there", "b_crit_common_lo": "lo", "b_crit_common_hi": "hi"}))
    parts.append("\n## Growth of B_crit and B_crit ∝ L^k, with intervals\n")
    parts.append("Growth = B_crit(hardest)/B_crit(loosest target); k: B_crit ∝ L^k over the "
                 "fitted targets. lo/hi: the hull of the methods listed after them — a seed "
                 "bootstrap of the sweep (95 %, percentile; keeps the shared runs, misses "
                 "scatter that seeds do not explain), for the growth the two per-target 95 % "
                 "intervals combined (joint ≥ 90 %), for k the regression interval (keeps the "
                 "scatter, ignores the shared runs).\n")
    parts.append(md_table(t1, {
        "task": "task", "optimizer": "opt", "b_crit_growth": "growth",
        "b_crit_growth_lo": "lo", "b_crit_growth_hi": "hi",
        "b_crit_growth_lo_pertarget": "lo (per-target)",
        "b_crit_growth_hi_pertarget": "hi (per-target)",
        "b_crit_growth_lo_boot": "lo (boot)", "b_crit_growth_hi_boot": "hi (boot)",
        "b_crit_loss_exponent": "k", "b_crit_loss_exponent_lo": "lo",
        "b_crit_loss_exponent_hi": "hi", "b_crit_loss_exponent_lo_boot": "lo (boot)",
        "b_crit_loss_exponent_hi_boot": "hi (boot)", "b_crit_loss_exponent_lo_ols": "lo (OLS)",
        "b_crit_loss_exponent_hi_ols": "hi (OLS)", "n_boot_growth_valid": "draws"}))
    if branched is not None and len(branched):
        parts.append("\n## The critical batch measured directly (branched training)\n")
        parts.append("At checkpoints of each reference run, branches at k·B with the rate "
                     "k·η (SGD) or √k·η (Adam), from the checkpoint's weights and optimizer "
                     "state, train on the same examples (paired seeds); a branch keeps up while "
                     "its loss decrease is at least half the reference branch's (the 2×-"
                     "examples point that defines B_crit). The bracket [low, high) is the "
                     "largest batch that keeps up and the next one; B_crit is fitted from "
                     "the sweep at the checkpoint's loss; rules in "
                     "`empirical_batch/harness/branched.py`.\n")
        parts.append(md_table(branched, {
            "task": "task", "optimizer": "opt", "step": "step", "eval_loss": "loss",
            "base_batch": "B",
            "learning_rate": "η", "b_branched_low": "branched low",
            "b_branched_high": "branched high", "branched_status": "status",
            "diverged_from": "diverged from",
            "b_crit": "B_crit (sweep)", "b_crit_lo": "lo", "b_crit_hi": "hi",
            "b_crit_status": "fit status", "b_simple": "B_simple", "b_noise": "B_noise"}))
    if len(os_sum):
        parts.append("\n## One-step experiment: fitted constants per checkpoint\n")
        parts.append(md_table(os_sum, {
            "task": "task", "step": "step", "loss": "loss", "b_noise_fit": "B_noise fit",
            "b_noise_fit_lo": "lo", "b_noise_fit_hi": "hi", "b_noise_hvp": "B_noise HVP",
            "eps_max_fit": "ε_max fit", "eps_max_hvp": "ε_max HVP", "g2_fit": "|G|² fit",
            "g2_hvp": "|G|² HVP"}))
        parts.append("\n## One-step experiment: measured vs predicted per batch size\n")
        parts.append(md_table(os_table, {
            "task": "task", "step": "step", "batch_size": "B", "eps_opt": "ε_opt meas.",
            "eps_opt_lo": "lo", "eps_opt_hi": "hi", "eps_opt_pred_fit": "pred. (fit)",
            "eps_opt_pred_hvp": "pred. (HVP)", "dl_opt": "ΔL_opt meas.", "dl_opt_lo": "lo",
            "dl_opt_hi": "hi", "dl_opt_pred_fit": "pred. (fit)",
            "dl_opt_pred_hvp": "pred. (HVP)"}))
    return "\n".join(parts)
