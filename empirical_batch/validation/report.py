"""The validation study of a harness run: fits, claims, tables, figures and report.

The study uses the harness engine (`empirical_batch.harness`: sweeps, reference runs
with their noise scales, the one-step experiment, branched training) and the fit layer
(`empirical_batch.fit`) through their public functions, as any user would:

1. per task and optimizer, targets, B_crit and the noise scales averaged up to each
   target and local at it, and a Table-1-style row
   (`empirical_batch.validation.fits`);
2. the one-step experiment on the SGD reference run
   (`empirical_batch.validation.experiments.one_step`);
3. where the plan asks for it, branched training at checkpoints of the reference runs
   (`empirical_batch.validation.experiments.branched`), next to B_crit + 2 B_ref
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

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .._io import atomic_path, atomic_write_text
from ..errors import InputError
from ..harness.config import HarnessConfig
from ..harness.device import resolve_device
from ..harness.resume import cached
from ..harness.sweep import load_sweeps, sweep_files
from .b_crit_law import law_table, render_law
from .claims import claims_table
from .curves import FIT_OPTIONS, select
from .experiments.branched import run_branched
from .experiments.noise import run_reference, with_population
from .experiments.one_step import run_one_step
from .fits import branched_vs_fit, common_target_fits, fit_targets
from .markdown import render_markdown
from .uncertainty import N_BOOT

__all__ = ["RESULT_FILES", "AnalysisResults", "analyze", "compute_results", "planned_files",
           "reanalyze", "report", "write_all"]


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
    #: (`empirical_batch.validation.experiments.branched`, `fits.branched_vs_fit`)
    branched: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: B_crit(L) = B*/L^(1/α_B) per task and optimizer (`validation.b_crit_law`)
    law: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass
class TaskFits:
    """Everything the study fits for one task (all its optimizers): what
    `task_fits` computes and the analysis cache keeps."""

    crit_rows: list
    steps: list
    #: the task's Table-1 rows, B_crit at the common target included
    table1: pd.DataFrame
    #: (task, optimizer) -> (CriticalBatchCurve, noise scales along the reference run)
    curves: dict
    branched: pd.DataFrame
    law: pd.DataFrame


def task_fits(config: HarnessConfig, plan, sweep, scales: dict,
              branched: pd.DataFrame) -> TaskFits:
    """The fits of one task: targets and B_crit per optimizer (`fit_targets`), B_crit at
    the common target (`common_target_fits`), the branched brackets beside B_crit
    (`branched_vs_fit`) and the B_crit(L) law (`law_table`). ``scales`` maps each
    optimizer to the noise scales along its reference run, ``branched`` holds the
    task's measured branched rows (may be empty)."""
    crit_rows, table1, steps = [], [], []
    curves: dict = {}
    subs: dict = {}
    for opt in plan.sweep.optimizers:
        sub = select(sweep, optimizer=opt)
        fits = fit_targets(plan.task, opt, sub, scales[opt], plan.sweep.learning_rates[opt],
                           config.target_fractions)
        crit_rows += fits.crit_rows
        steps += fits.steps
        table1.append(fits.table1_row)
        subs[(plan.task, opt)] = sub
        curves[(plan.task, opt)] = (fits.curve, scales[opt])
    return TaskFits(
        crit_rows=crit_rows, steps=steps,
        table1=common_target_fits(pd.DataFrame(table1), subs), curves=curves,
        branched=branched_vs_fit(branched, subs),
        law=law_table(dataclasses.replace(config, plans=(plan,)), curves))


def _frame_hash(frame: pd.DataFrame) -> str:
    """A hash of a table's columns and values (row order included)."""
    h = hashlib.sha256(json.dumps([str(c) for c in frame.columns]).encode())
    if len(frame):
        h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return h.hexdigest()[:16]


def _code_hash() -> str:
    """A hash of the study's and the fit layer's source: changed code is refitted."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for folder in ("validation", "fit"):
        for f in sorted((root / folder).glob("*.py")):
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def cached_task_fits(config: HarnessConfig, plan, sweep, scales: dict,
                     branched: pd.DataFrame) -> TaskFits:
    """`task_fits`, kept per task in the engine's analysis cache
    (`empirical_batch.harness.resume.cached`, ``OUT/cache/TASK/fits-all-HASH.pt``) when
    one is active. The hash covers every input: the task's sweep rows, the noise scales
    of each optimizer, the branched rows, the learning-rate grids, the target fractions,
    the fit settings (``FIT_OPTIONS``, ``N_BOOT``) and the source of the study and of the
    fit layer; a rerun with the same inputs reads the fits instead of redoing them."""
    key = {
        "sweep": _frame_hash(sweep.to_frame()),
        "scales": {opt: _frame_hash(s) for opt, s in scales.items()},
        "branched": _frame_hash(branched),
        "learning_rates": {o: list(v) for o, v in plan.sweep.learning_rates.items()},
        "optimizers": list(plan.sweep.optimizers),
        "target_fractions": list(config.target_fractions),
        "fit_options": FIT_OPTIONS, "n_boot_growth": N_BOOT, "code": _code_hash(),
    }
    return cached(plan.task, "fits", "all", key,
                  lambda: task_fits(config, plan, sweep, scales, branched))


def _assemble(parts: list[TaskFits], **measured) -> AnalysisResults:
    crit = pd.DataFrame([r for p in parts for r in p.crit_rows])
    t1 = pd.concat([p.table1 for p in parts], ignore_index=True)
    tabs = [p.branched for p in parts if not p.branched.empty]
    branched = pd.concat(tabs, ignore_index=True) if tabs else pd.DataFrame()
    curves = {k: v for p in parts for k, v in p.curves.items()}
    return AnalysisResults(
        crit=crit, table1=t1, steps=pd.concat([s for p in parts for s in p.steps],
                                              ignore_index=True),
        curves=curves, branched=branched,
        claims=claims_table(crit, t1, measured["one_step"], branched),
        law=pd.DataFrame([r for p in parts for r in p.law.to_dict("records")],
                         columns=parts[0].law.columns if parts else None), **measured)


def compute_results(config: HarnessConfig, out: str | Path, *, device="cpu", progress=False,
                    timings: dict | None = None) -> AnalysisResults:
    """Noise scales, one-step experiment and fits for every task of ``config`` on the
    sweeps under ``out`` (computation only: nothing is written), on ``device``
    (`empirical_batch.harness.device.resolve_device`: ``auto``, ``cpu``, ``cuda[:N]``)."""
    import time

    device = resolve_device(device)
    out = Path(out)
    timings = {} if timings is None else timings
    noise_tabs, os_tabs, os_sums, refs = [], [], [], []
    parts: list[TaskFits] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(len(p.sweep.optimizers) for p in config.plans), unit="task·opt",
                   desc="noise scales, one-step, fits", leave=False)
    for plan in config.plans:
        task = plan.make_task().to(device)
        sweep = load_sweeps(sweep_files(out, plan.task))
        frame = sweep.to_frame()
        scales: dict = {}
        branched_tabs: list[pd.DataFrame] = []
        for opt in plan.sweep.optimizers:
            if bar is not None:
                bar.set_postfix_str(f"{plan.task}/{opt}")
            t0 = time.perf_counter()
            ref = run_reference(task, plan, frame, opt)
            refs.append({"task": plan.task, **ref.to_dict()})
            noise_tabs.append(ref.scales)
            scales[opt] = ref.scales
            timings[f"reference/{plan.task}/{opt}"] = round(time.perf_counter() - t0, 2)
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
        t0 = time.perf_counter()
        parts.append(cached_task_fits(
            config, plan, sweep, scales,
            pd.concat(branched_tabs, ignore_index=True) if branched_tabs else pd.DataFrame()))
        timings[f"fits/{plan.task}"] = round(time.perf_counter() - t0, 2)
    if bar is not None:
        bar.close()
    one = pd.concat(os_tabs, ignore_index=True) if os_tabs else pd.DataFrame()
    return _assemble(parts, noise=pd.concat(noise_tabs, ignore_index=True),
                     refs=pd.DataFrame(refs), one_step=one,
                     one_step_summary=pd.DataFrame(os_sums))


def reanalyze(config: HarnessConfig, out: str | Path, *,
              timings: dict | None = None) -> AnalysisResults:
    """The target-dependent analysis again, from what ``out`` already holds (no GPU).

    Reads the sweeps and the measured tables of an earlier analysis
    (``results/noise_along_reference.csv``, ``reference_runs.csv``, ``one_step.csv``,
    ``one_step_summary.csv``: the reference runs, Hessian-vector products and one-step
    experiment, which do not depend on the targets), chooses the targets, fits B_crit
    and rebuilds ``b_crit_vs_noise``, ``steps_to_target``, ``table1`` and the claims
    (per task through `cached_task_fits`; ``timings`` gets each task's seconds).
    A noise table written before the sampling design was recorded (no
    ``population_size`` column) gets the population values of the task's design
    (`empirical_batch.validation.experiments.noise.with_population`, `Task.population_size`).
    """
    import time

    timings = {} if timings is None else timings
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
    parts: list[TaskFits] = []
    noise_tabs: list[pd.DataFrame] = []
    for plan in config.plans:
        sweep = load_sweeps(sweep_files(out, plan.task))
        scales: dict = {}
        for opt in plan.sweep.optimizers:
            mine = read["noise"][(read["noise"]["task"] == plan.task)
                                 & (read["noise"]["optimizer"] == opt)]
            if mine.empty:
                raise InputError(f"{res / RESULT_FILES['noise']} has no rows for "
                                 f"{plan.task}/{opt}: run the analyze stage for it first")
            mine = mine.reset_index(drop=True)
            if "population_size" not in mine.columns:  # written before it was recorded
                mine = with_population(mine, plan.make_task().population_size)
            scales[opt] = mine
            noise_tabs.append(mine)
        branched = read["branched"]
        if not branched.empty:
            branched = branched[branched["task"] == plan.task].reset_index(drop=True)
        t0 = time.perf_counter()
        parts.append(cached_task_fits(config, plan, sweep, scales, branched))
        timings[f"fits/{plan.task}"] = round(time.perf_counter() - t0, 2)
    return _assemble(parts, noise=pd.concat(noise_tabs, ignore_index=True), refs=read["refs"],
                     one_step=read["one_step"], one_step_summary=read["one_step_summary"])


RESULT_FILES = {
    "crit": "b_crit_vs_noise.csv", "table1": "table1.csv",
    "noise": "noise_along_reference.csv", "steps": "steps_to_target.csv",
    "refs": "reference_runs.csv", "one_step": "one_step.csv",
    "one_step_summary": "one_step_summary.csv", "claims": "claims.csv",
    "branched": "branched.csv", "law": "b_crit_law.csv",
}


def planned_files(config: HarnessConfig, out: str | Path) -> list[Path]:
    """The files of fixed name the ``analyze`` and ``report`` stages write under ``out``."""
    out = Path(out)
    files = [out / "report.md"] + [out / "results" / n for n in RESULT_FILES.values()]
    files += [out / "figures" / f"{p.task}_{kind}.png" for p in config.plans
              for kind in ("tradeoff", "b_crit_vs_loss", "one_step")]
    return files


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


def report(config: HarnessConfig, out: str | Path, *,
           timings: dict | None = None) -> list[Path]:
    """`reanalyze`, then `write_all` under ``out`` (the ``report`` stage: no GPU)."""
    return write_all(reanalyze(config, out, timings=timings), config, out)
