"""The validation study of a harness run: fits, claims, tables, figures and report.

The study uses the harness engine (`empirical_batch.harness`: sweeps, reference runs
with their noise scales, the one-step experiment, branched training) and the fit layer
(`empirical_batch.fit`) through their public functions, as any user would:

1. per task and optimizer, targets, B_crit and the noise scales averaged up to each
   target and local at it, and a Table-1-style row
   (`empirical_batch.validation.fits`);
2. the one-step experiment on the SGD reference run
   (`empirical_batch.harness.one_step`);
3. where the plan asks for it, branched training at checkpoints of the reference runs
   (`empirical_batch.harness.branched`), next to B_crit + 2 B_ref
   (`empirical_batch.validation.fits.branched_vs_fit`);
4. Kaplan et al.'s B_crit(L) law per task and optimizer
   (`empirical_batch.validation.b_crit_law`);
5. the claims table (`empirical_batch.validation.claims`).

Everything lands in ``OUT/results/*.csv``, ``OUT/figures/*.png`` and ``OUT/report.md``
(`empirical_batch.validation.markdown`). `compute_results` measures and fits (the
``analyze`` stage); `reanalyze` redoes what depends on the targets from the sweeps and
the measured tables already in ``OUT/results`` (the ``report`` stage: no training, no
Hessian-vector products, no GPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .._io import atomic_path, atomic_write_text
from ..errors import InputError
from ..harness.branched import run_branched
from ..harness.config import HarnessConfig
from ..harness.noise import run_reference
from ..harness.one_step import run_one_step
from ..harness.sweep import load_sweeps, sweep_files
from .b_crit_law import law_table, render_law
from .claims import claims_table
from .curves import select
from .fits import branched_vs_fit, common_target_fits, fit_targets
from .markdown import render_markdown

__all__ = ["RESULT_FILES", "AnalysisResults", "analyze", "compute_results", "reanalyze",
           "report", "write_all"]


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
    #: branched critical batch next to B_crit (+ 2 B_ref) and the noise scales
    #: (`empirical_batch.harness.branched`, `fits.branched_vs_fit`)
    branched: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: B_crit(L) = B*/L^(1/α_B) per task and optimizer (`validation.b_crit_law`)
    law: pd.DataFrame = field(default_factory=pd.DataFrame)


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
        sweep = load_sweeps(sweep_files(out, plan.task))
        frame = sweep.to_frame()
        for opt in plan.sweep.optimizers:
            if bar is not None:
                bar.set_postfix_str(f"{plan.task}/{opt}")
            t0 = time.perf_counter()
            sub = select(sweep, optimizer=opt)
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
                branched_tabs.append(run_branched(task, plan.branched, ref))
                timings[f"branched/{plan.task}/{opt}"] = round(time.perf_counter() - t0, 2)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    crit, t1 = pd.DataFrame(crit_rows), common_target_fits(pd.DataFrame(table1), subs)
    one = pd.concat(os_tabs, ignore_index=True) if os_tabs else pd.DataFrame()
    one_sum = pd.DataFrame(os_sums)
    branched = branched_vs_fit(pd.concat(branched_tabs, ignore_index=True) if branched_tabs
                               else pd.DataFrame(), subs)
    return AnalysisResults(
        crit=crit, table1=t1, noise=pd.concat(noise_tabs, ignore_index=True),
        steps=pd.concat(steps_tabs, ignore_index=True), refs=pd.DataFrame(refs),
        one_step=one, one_step_summary=one_sum, curves=curves,
        claims=claims_table(crit, t1, one, branched), branched=branched,
        law=law_table(config, curves),
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
        sweep = load_sweeps(sweep_files(out, plan.task))
        for opt in plan.sweep.optimizers:
            scales = read["noise"][(read["noise"]["task"] == plan.task)
                                   & (read["noise"]["optimizer"] == opt)]
            if scales.empty:
                raise InputError(f"{res / RESULT_FILES['noise']} has no rows for "
                                 f"{plan.task}/{opt}: run the analyze stage for it first")
            sub = select(sweep, optimizer=opt)
            fits = fit_targets(plan.task, opt, sub, scales.reset_index(drop=True),
                               plan.sweep.learning_rates[opt], config.target_fractions)
            crit_rows += fits.crit_rows
            steps_tabs += fits.steps
            table1.append(fits.table1_row)
            subs[(plan.task, opt)] = sub
            curves[(plan.task, opt)] = (fits.curve, scales)
    crit, t1 = pd.DataFrame(crit_rows), common_target_fits(pd.DataFrame(table1), subs)
    branched = branched_vs_fit(read["branched"], subs)
    return AnalysisResults(
        crit=crit, table1=t1, noise=read["noise"],
        steps=pd.concat(steps_tabs, ignore_index=True), refs=read["refs"],
        one_step=read["one_step"], one_step_summary=read["one_step_summary"], curves=curves,
        claims=claims_table(crit, t1, read["one_step"], branched), branched=branched,
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
