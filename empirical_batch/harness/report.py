"""The harness report: B_crit from sweeps next to the noise scales, and the one-step test.

For each task and optimizer:

1. Targets (fixed rule, decided before looking at any fit): with L_0 the median
   evaluation loss at step 0 and L_hard the median over batch sizes of the best loss
   reached at that batch size, target_f = L_hard + f (L_0 − L_hard) for each f of
   ``HarnessConfig.target_fractions`` (by default 1/2, 1/4, 1/8, 1/16, 0). L_hard is
   reached by about half of the batch sizes, so the hardest target is fitted from
   the faster half; a target fewer than 3 batch sizes reach is reported, not fitted.
2. B_crit(target) with its interval: `empirical_batch.critical_batch_curve`.
3. B_simple and B_noise at the same losses: `empirical_batch.harness.noise`; the report
   uses the population estimates (B_simple from the collector path, B_noise
   Bessel/bias-corrected, see that module) and lists the sample values beside them.
4. Table-1-style summary: B_crit at the loosest ("start") and hardest ("averaged":
   in the model B_crit is B_noise averaged over the run) fitted target; B_simple and
   B_noise at step 0 ("start") and averaged over the reference run's steps until it
   reaches the hardest fitted target.
5. One-step experiment on the SGD reference run (`empirical_batch.harness.one_step`).

Everything lands in ``OUT/results/*.csv``, ``OUT/figures/*.png`` and ``OUT/report.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import atomic_path, atomic_write_text
from . import library
from .b_crit_law import law_table, render_law
from .config import HarnessConfig
from .noise import averaged_scale, run_reference, scales_at_losses
from .one_step import run_one_step
from .sweep import sweep_files


def choose_targets(frame: pd.DataFrame, fractions) -> np.ndarray:
    """Targets by the rule of the module docstring (descending, distinct).

    The best loss "reached at a batch size" is that of its best learning rate *for
    every seed* (the worst seed's best loss), since seeds are averaged and a mean
    needs every seed to reach the target.
    """
    finite = frame[np.isfinite(frame["metric"])]
    if finite.empty:
        raise ValueError("every logged loss is NaN/inf: no targets can be chosen")
    l0 = float(finite.loc[finite.step == 0, "metric"].median())
    keys = ["batch_size", "learning_rate"] if "learning_rate" in finite else ["batch_size"]
    seed = ["seed"] if "seed" in finite else []
    per_run = finite.groupby([*keys, *seed])["metric"].min()
    per_config = per_run.groupby(level=keys).max() if seed else per_run
    best = per_config.groupby(level="batch_size").min()
    l_hard = float(best.median())
    if not l_hard < l0:
        raise ValueError(f"no training progress: median best loss {l_hard:.4g} >= "
                         f"initial loss {l0:.4g}")
    targets = np.array([l_hard + f * (l0 - l_hard) for f in fractions])
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
    law: pd.DataFrame = field(default_factory=pd.DataFrame)  # B_crit(L) fits (b_crit_law)


def compute_results(config: HarnessConfig, out: str | Path, *, device="cpu", progress=False,
                    timings: dict | None = None) -> AnalysisResults:
    """Noise scales, one-step experiment and fits for every task of ``config`` on the
    sweeps under ``out`` (computation only: nothing is written)."""
    import time

    out = Path(out)
    timings = {} if timings is None else timings
    crit_rows, table1, noise_tabs, steps_tabs, os_tabs, os_sums, refs = [], [], [], [], [], [], []
    curves: dict = {}
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
            targets = choose_targets(sub.to_frame(), config.target_fractions)
            curve = library.b_crit_curve(sub, targets)
            ref = run_reference(task, plan, frame, opt)
            refs.append({"task": plan.task, **ref.to_dict()})
            noise_tabs.append(ref.scales)
            at = scales_at_losses(ref.scales, targets)
            grid = plan.sweep.learning_rates[opt]
            for i, row in curve.frame.iterrows():
                rec = {"task": plan.task, "optimizer": opt, **row.to_dict()}
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
                crit_rows.append(rec)
                steps_tabs.append(st.drop(columns=[c for c in ("seed_steps", "seed_examples")
                                                   if c in st]).assign(
                    task=plan.task, optimizer=opt, target=row["target"]))
            curves[(plan.task, opt)] = (curve, ref.scales)
            table1.append(_table1_row(plan.task, opt, curve, ref.scales))
            timings[f"noise+fit/{plan.task}/{opt}"] = round(time.perf_counter() - t0, 2)
            if opt == "sgd":
                t0 = time.perf_counter()
                res = run_one_step(task, plan.one_step, ref)
                os_tabs.append(res.table)
                os_sums += res.summary["checkpoints"]
                timings[f"one_step/{plan.task}"] = round(time.perf_counter() - t0, 2)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return AnalysisResults(
        crit=pd.DataFrame(crit_rows), table1=pd.DataFrame(table1),
        noise=pd.concat(noise_tabs, ignore_index=True),
        steps=pd.concat(steps_tabs, ignore_index=True), refs=pd.DataFrame(refs),
        one_step=pd.concat(os_tabs, ignore_index=True) if os_tabs else pd.DataFrame(),
        one_step_summary=pd.DataFrame(os_sums), curves=curves,
        law=law_table(config, curves),
    )


RESULT_FILES = {
    "crit": "b_crit_vs_noise.csv", "table1": "table1.csv",
    "noise": "noise_along_reference.csv", "steps": "steps_to_target.csv",
    "refs": "reference_runs.csv", "one_step": "one_step.csv",
    "one_step_summary": "one_step_summary.csv", "law": "b_crit_law.csv",
}


def write_results(results: AnalysisResults, out: str | Path) -> list[Path]:
    """The tables as ``OUT/results/*.csv`` (each written atomically)."""
    res_dir = Path(out) / "results"
    res_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for attr, name in RESULT_FILES.items():
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


def analyze(config: HarnessConfig, out: str | Path, *, device="cpu", progress=False,
            timings: dict | None = None) -> list[Path]:
    """`compute_results`, then `write_results`, `draw_figures` and the report
    (`render_markdown`) under ``out``; returns the files written."""
    r = compute_results(config, out, device=device, progress=progress, timings=timings)
    files = write_results(r, out)
    files += draw_figures(r, config, out)
    report = Path(out) / "report.md"
    atomic_write_text(report, render_markdown(config.name, r.crit, r.table1, r.one_step,
                                              r.one_step_summary, r.noise)
                      + "\n" + render_law(r.law))
    files.append(report)
    return files


def _table1_row(task: str, opt: str, curve, scales: pd.DataFrame) -> dict:
    ok = curve.frame.dropna(subset=["b_crit"]).sort_values("target", ascending=False)
    row = {"task": task, "optimizer": opt, "n_targets_fitted": len(ok)}
    if ok.empty:
        return row
    first, last = ok.iloc[0], ok.iloc[-1]
    s0 = scales.sort_values("step").iloc[0]
    row.update({
        "target_start": first["target"], "b_crit_start": first["b_crit"],
        "target_averaged": last["target"], "b_crit_averaged": last["b_crit"],
        "b_crit_averaged_lo": last["b_crit_lo"], "b_crit_averaged_hi": last["b_crit_hi"],
        "n_batch_sizes_averaged": last["n_batch_sizes"],
        "b_simple_start": s0["b_simple_collector"], "b_noise_start": s0["b_noise_pop"],
        "b_simple_averaged": averaged_scale(scales, "b_simple_collector", last["target"]),
        "b_noise_averaged": averaged_scale(scales, "b_noise_pop", last["target"]),
        "b_crit_growth": last["b_crit"] / first["b_crit"],
    })
    if len(ok) >= 3:
        pl = library.power_law(ok["target"].to_numpy(float), ok["b_crit"].to_numpy(float))
        row["b_crit_loss_exponent"] = pl.exponent
        lo, hi = pl.interval
        row["b_crit_loss_exponent_lo"], row["b_crit_loss_exponent_hi"] = lo, hi
    return row


def _fmt(x, digits=3):
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    if isinstance(x, bool | np.bool_):
        return "yes" if x else "no"
    return f"{x:.{digits}g}"


def _md(frame: pd.DataFrame, cols: dict) -> str:
    head = "| " + " | ".join(cols.values()) + " |\n|" + "---|" * len(cols) + "\n"
    body = "".join("| " + " | ".join(_fmt(r[c]) for c in cols) + " |\n"
                   for _, r in frame.iterrows())
    return head + body


def render_markdown(name, crit, t1, os_table, os_sum, noise) -> str:
    """The report as Markdown tables (the docs page quotes these)."""
    parts = [f"# Harness report (`{name}` configuration)\n"]
    parts.append("## B_crit against the noise scales at the same loss\n")
    parts.append(_md(crit, {
        "task": "task", "optimizer": "opt", "target": "target loss", "b_crit": "B_crit",
        "b_crit_lo": "lo", "b_crit_hi": "hi", "n_batch_sizes": "n_B",
        "b_simple": "B_simple", "b_noise": "B_noise",
        "b_crit_over_b_simple": "B_crit/B_simple", "b_crit_over_b_noise": "B_crit/B_noise",
        "extrapolation": "extrap.", "lr_at_grid_edge": "lr at grid edge (B)", "note": "note"}))
    parts.append("\n## Table-1-style summary (start / averaged)\n")
    parts.append(_md(t1, {
        "task": "task", "optimizer": "opt", "b_crit_start": "B_crit start",
        "b_crit_averaged": "B_crit averaged", "b_crit_averaged_lo": "lo",
        "b_crit_averaged_hi": "hi", "n_batch_sizes_averaged": "n_B",
        "b_simple_start": "B_simple start",
        "b_simple_averaged": "B_simple averaged", "b_noise_start": "B_noise start",
        "b_noise_averaged": "B_noise averaged", "b_crit_growth": "B_crit growth",
        "b_crit_loss_exponent": "B_crit ∝ L^k: k"}))
    if len(os_sum):
        parts.append("\n## One-step experiment: fitted constants per checkpoint\n")
        parts.append(_md(os_sum, {
            "task": "task", "step": "step", "loss": "loss", "b_noise_fit": "B_noise fit",
            "b_noise_fit_lo": "lo", "b_noise_fit_hi": "hi", "b_noise_hvp": "B_noise HVP",
            "eps_max_fit": "ε_max fit", "eps_max_hvp": "ε_max HVP", "g2_fit": "|G|² fit",
            "g2_hvp": "|G|² HVP"}))
        parts.append("\n## One-step experiment: measured vs predicted per batch size\n")
        parts.append(_md(os_table, {
            "task": "task", "step": "step", "batch_size": "B", "eps_opt": "ε_opt meas.",
            "eps_opt_lo": "lo", "eps_opt_hi": "hi", "eps_opt_pred_fit": "pred. (fit)",
            "eps_opt_pred_hvp": "pred. (HVP)", "dl_opt": "ΔL_opt meas.", "dl_opt_lo": "lo",
            "dl_opt_hi": "hi", "dl_opt_pred_fit": "pred. (fit)",
            "dl_opt_pred_hvp": "pred. (HVP)"}))
    return "\n".join(parts)
