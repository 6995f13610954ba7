"""MLPerf Training: reference convergence points, published eval curves and MLLOG files,
in the sweep schema (see `empirical_batch.loaders`)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._io import loads_json, read_csv
from .._validate import positive_float
from ..errors import DataError, EmpiricalBatchWarning, InputError, warn
from ..provenance import Provenance
from ..result import TableResult
from ..sweeps import Sweep, load_sweep
from ._files import a_file

__all__ = [
    "MLPERF_DIRECTION",
    "MLPERF_UNITS",
    "RCPTable",
    "load_mllog",
    "load_mlperf_curves",
    "load_mlperf_rcp",
]

#: Higher is better? per MLPerf benchmark (from the training_policies targets).
MLPERF_DIRECTION: dict[str, bool] = {
    "bert": True, "resnet": True, "ssd": True, "retinanet": True, "maskrcnn": True,
    "dlrm": True, "dlrm_dcnv2": True, "gnn": True, "rgat": True,
    "gpt3": False, "llama2_70b_lora": False, "llama31_8b": False, "llama31_405b": False,
    "flux1": False, "rnnt": False,
}

#: Examples per unit of MLPerf progress: ``("samples", 1)`` means the logged number is
#: already examples; ``("epochs", N)`` means epochs of an N-example training set;
#: ``("tokens", L)`` means tokens of sequences of length L.
MLPERF_UNITS: dict[str, tuple[str, float]] = {
    "bert": ("samples", 1.0),  # training sequences (seq len 512)
    "gpt3": ("tokens", 2048.0),  # tokens of 2048-token sequences
    "resnet": ("epochs", 1_281_167.0),  # ImageNet-1k train
    "maskrcnn": ("epochs", 117_266.0),  # COCO-2017 train (as used by MLPerf)
    "llama2_70b_lora": ("samples", 1.0),
    "llama31_8b": ("samples", 1.0),
    "llama31_405b": ("samples", 1.0),
    "flux1": ("samples", 1.0),
}

_SAMPLES_COUNT = {"llama2_70b_lora", "llama31_8b", "llama31_405b", "flux1", "stable_diffusion"}


def _examples_per_unit(benchmark: str, examples_per_epoch: float | None) -> float:
    if examples_per_epoch is not None:
        if not examples_per_epoch > 0:
            raise InputError(f"examples_per_epoch must be > 0, got {examples_per_epoch!r}")
        return float(examples_per_epoch)
    unit = MLPERF_UNITS.get(benchmark)
    if unit is None:
        raise InputError(
            f"the unit of MLPerf progress for benchmark {benchmark!r} is epochs of a data "
            "set whose size is not recorded here; pass examples_per_epoch=N"
        )
    kind, factor = unit
    return 1.0 / factor if kind == "tokens" else factor


# --------------------------------------------------------------------------- MLPerf RCPs


def _rcp_unit(benchmark: str, ruleset: str) -> tuple[str, float | None]:
    """(unit, examples per unit or None) of an RCP value (see mlperf_rcp/SOURCE.md)."""
    samples = {"llama2_70b_lora", "llama31_8b", "llama31_405b", "gpt_oss_20b",
               "deepseekv3_671b", "qwen35_397b_grpo", "flux1", "openfold", "stable_diffusion"}
    version = tuple(int(v) for v in re.findall(r"\d+", ruleset)[:2]) if ruleset else (0, 0)
    if benchmark == "bert":
        return "train_samples", 1.0
    if benchmark in samples:
        return "samples", 1.0
    if benchmark in ("gpt3", "resnet", "maskrcnn"):
        return MLPERF_UNITS[benchmark][0], _examples_per_unit(benchmark, None)
    if benchmark == "sd":
        return ("steps", None) if ruleset.startswith("training_3.1") else ("epochs", None)
    if benchmark == "unet3d":
        if ruleset.startswith("training") and version >= (3, 1):
            return "samples", 1.0
        return "epochs", 168.0
    if benchmark == "ssd" and version[0] == 1 and ruleset.startswith("training"):
        return "epochs", MLPERF_UNITS["maskrcnn"][1]  # COCO-2017 train, as for maskrcnn
    return "epochs", None


def _positive(value: object, f: object, name: str, key: str) -> float:
    """A finite number > 0 from an RCP entry, or a ValueError naming file, entry and key."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{f}: entry {name!r}: {key} must be a number, got {value!r:.60}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise InputError(f"{f}: entry {name!r}: {key} must be finite and > 0, got {value!r}")
    return v


@dataclass(frozen=True, repr=False, eq=False)
class RCPTable(TableResult):
    """Per-seed steps to the benchmark target from MLPerf reference convergence points
    (the result of `load_mlperf_rcp`); `empirical_batch.fit.fit_tradeoff` takes it as
    it is.

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per seed (columns documented in `load_mlperf_rcp`).
    provenance : Provenance or None
        Where the files come from, when they are the published ones
        (`empirical_batch.datasets.mlperf_rcp`).
    benchmarks : tuple of str
        The benchmarks in the table, sorted (read from ``frame``, as the counts below).
    n_entries : int
        RCP entries (one batch size and its hyperparameters each).
    n_rows : int
        Rows of ``frame`` (seeds over all entries).
    """

    provenance: Provenance | None = dataclasses.field(default=None, compare=False)
    derived = ("benchmarks", "n_entries", "n_rows")

    @property
    def benchmarks(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.frame["benchmark"])))

    @property
    def n_entries(self) -> int:
        return int(self.frame[["ruleset", "rcp_name"]].drop_duplicates().shape[0])

    @property
    def n_rows(self) -> int:
        return len(self.frame)


def load_mlperf_rcp(source: Any, *, benchmark: str | None = None,
                    examples_per_epoch: float | None = None) -> RCPTable:
    """Per-seed steps to the benchmark target from MLPerf ``rcps_*.json`` files.

    Parameters
    ----------
    source : path
        One ``rcps_<benchmark>.json`` file, or a directory searched recursively (the
        ``mlperf_logging/rcp_checker`` tree: ``<ruleset>/rcps_*.json``).
    benchmark : str, optional
        Keep only this benchmark (the JSON's ``Benchmark`` field).
    examples_per_epoch : float, optional
        The training set's size (samples per epoch) for the entries whose value counts
        epochs of a data set whose size is not recorded here (e.g. ``ssd`` of later
        rulesets): their ``examples`` and ``steps`` are then known. One that contradicts
        a recorded size (ImageNet's 1,281,167 for ``resnet``), or given where no entry
        counts epochs, is refused.

    Returns
    -------
    RCPTable
        Its ``frame`` has one row per seed: ``ruleset``, ``benchmark``, ``rcp_name``,
        ``batch_size``,
        ``learning_rate``, ``run``, ``seed`` (index within the entry), ``value`` and
        ``value_unit`` (as published), ``examples`` and ``steps = examples /
        batch_size`` where the unit converts to examples (else NaN), and
        ``steps_rel = value / batch_size``: steps in units of an unknown
        examples-per-unit constant. $B_{crit}$ does not depend on that
        constant (it scales $S_{min}$ and $E_{min}$ alike), so
        ``steps_rel`` can be fitted for $B_{crit}$ when ``steps`` is NaN.
    """
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"RCP source not found: {path}")
    per_epoch = (None if examples_per_epoch is None
                 else positive_float(examples_per_epoch, "examples_per_epoch"))
    epochs_seen = False
    files = sorted(path.rglob("rcps_*.json")) if path.is_dir() else [path]
    if not files:
        raise InputError(f"{path}: no rcps_*.json files found")
    rows = []
    for f in files:
        a_file(f, "RCP file")
        try:
            entries = loads_json(f.read_text(), str(f))
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DataError(f"{f}: not valid JSON: {type(exc).__name__}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise DataError(f"{f}: not UTF-8 text ({exc.reason})") from None
        if not isinstance(entries, dict):
            raise InputError(f"{f}: expected a JSON object of RCP entries at the top level, "
                             f"got a {type(entries).__name__}")
        ruleset = f.parent.name
        for name, e in entries.items():
            if not isinstance(e, dict):
                raise InputError(f"{f}: entry {name!r} must be an object, got "
                                 f"{type(e).__name__}")
            bench = e.get("Benchmark")
            if not isinstance(bench, str):
                raise InputError(f"{f}: entry {name!r} lacks a 'Benchmark' name")
            if benchmark is not None and bench != benchmark:
                continue
            values = e.get("Epochs to converge", e.get("samples to converge"))
            if values is None or "BS" not in e:
                raise InputError(f"{f}: entry {name!r} lacks 'BS' or 'Epochs to converge'")
            bs = _positive(e["BS"], f, name, "BS")
            if not isinstance(values, list) or not values:
                raise InputError(f"{f}: entry {name!r}: 'Epochs to converge' must be a "
                                 f"non-empty list of numbers, got {values!r:.60}")
            hp = e.get("Hyperparams", {})
            if not isinstance(hp, dict):
                raise InputError(f"{f}: entry {name!r}: 'Hyperparams' must be an object")
            lr = hp.get("opt_base_learning_rate", hp.get("opt_lr", np.nan))
            unit, per = _rcp_unit(bench, ruleset)
            if unit == "epochs":
                epochs_seen = True
                if per_epoch is not None and per is not None and per != per_epoch:
                    raise InputError(
                        f"{f}: entry {name!r} ({bench}) counts epochs of {per:,.0f} "
                        f"examples, not examples_per_epoch={per_epoch:,g}")
                per = per if per_epoch is None else per_epoch
            for i, v in enumerate(values):
                v = _positive(v, f, name, f"'Epochs to converge'[{i}]")
                if unit == "steps":
                    ex = v * bs
                else:
                    ex = v * per if per is not None else np.nan
                rows.append({
                    "ruleset": ruleset, "benchmark": bench, "rcp_name": name,
                    "batch_size": bs, "learning_rate": float(lr) if lr is not None else np.nan,
                    "run": f"{ruleset}/{name}/{i}", "seed": i, "value": v,
                    "value_unit": unit, "examples": ex, "steps": ex / bs,
                    "steps_rel": v / bs if unit != "steps" else v,
                })
    if not rows:
        raise InputError(f"{path}: no RCP entries" + (f" for benchmark {benchmark!r}"
                                                       if benchmark else ""))
    if per_epoch is not None and not epochs_seen:
        raise InputError(f"{path}: examples_per_epoch is given but no entry counts epochs "
                         "(their units are " + ", ".join(sorted({r["value_unit"] for r in rows}))
                         + ")")
    frame = pd.DataFrame(rows)
    return RCPTable(frame=frame)


# --------------------------------------------------------------------------- MLPerf curves


def _table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A CSV with the named columns, or a `DataError` naming the file and the key."""
    a_file(path, "table file")
    frame: pd.DataFrame = read_csv(path)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}")
    return frame


def _curves_examples(bench: str, epoch_num: pd.Series, samples_count: pd.Series,
                     examples_per_epoch: float | None) -> pd.Series:
    if bench in _SAMPLES_COUNT:
        return samples_count.astype(float)
    return epoch_num.astype(float) * _examples_per_unit(bench, examples_per_epoch)


def load_mlperf_curves(
    directory: str | os.PathLike[str],
    benchmark: str,
    *,
    rounds: Iterable[str] | None = None,
    division: str | None = "closed",
    metric: str | None = None,
    examples_per_epoch: float | None = None,
) -> Sweep:
    """Evaluation curves of MLPerf Training submissions as a sweep.

    Reads the ``runs.csv``/``evals.csv`` tables extracted from the MLLOG result files
    (``mlperf_training_results_curves/SOURCE.md``). One run per result file;
    ``examples`` is converted from the logged progress (see `MLPERF_UNITS`),
    ``step = examples / batch_size``. Extra columns: ``submission``
    (``round/org/system``: pass ``config="submission"`` to
    `steps_to_target` so that each submission's tuning
    counts as one configuration), ``round``, ``org``, ``system``, ``seed``, ``status``.

    Runs whose progress column is not strictly increasing (some v1.x–v2.x BERT logs
    put ``epoch_num = 1`` on every evaluation) cannot be placed on a step axis: they
    are excluded and listed in ``sweep.metadata["excluded_runs"]`` with the reason.
    """
    d = Path(directory)
    for name in ("runs.csv", "evals.csv"):
        if not (d / name).exists():
            raise FileNotFoundError(f"{d / name} not found")
    runs = _table(d / "runs.csv", ("run_id", "benchmark", "round", "division", "org",
                                    "system", "global_batch_size", "opt_base_learning_rate",
                                    "seed", "status"))
    runs = runs[runs["benchmark"] == benchmark]
    if rounds is not None:
        rounds = list(rounds)
        runs = runs[runs["round"].isin(rounds)]
    if division is not None:
        runs = runs[runs["division"] == division]
    if runs.empty:
        raise InputError(f"{d}: no runs for benchmark {benchmark!r} with the given filters")
    ev = _table(d / "evals.csv", ("run_id", "metric", "value", "epoch_num", "samples_count",
                                  "eval_index"))
    ev = ev[ev["run_id"].isin(runs["run_id"])]
    metrics = sorted(ev["metric"].unique())
    if metric is None:
        if len(metrics) != 1:
            raise InputError(
                f"benchmark {benchmark!r} logs several metrics {metrics}; pass metric="
            )
        metric = metrics[0]
    elif metric not in metrics:
        raise InputError(f"metric {metric!r} not logged for {benchmark!r}; have {metrics}")
    ev = ev[ev["metric"] == metric]
    ev = ev.merge(runs[["run_id", "round", "org", "system", "global_batch_size",
                        "opt_base_learning_rate", "seed", "status"]], on="run_id")
    ev["examples"] = _curves_examples(benchmark, ev["epoch_num"], ev["samples_count"],
                                      examples_per_epoch)
    ev = ev.sort_values(["run_id", "eval_index"])
    by_run = ev.groupby("run_id")["examples"]  # vectorised: no Python call per run
    bad_nan = ev["examples"].isna().groupby(ev["run_id"]).any()
    rises = by_run.diff().gt(0) | by_run.cumcount().eq(0)  # vs the previous eval of the run
    inc = rises.groupby(ev["run_id"]).all()
    excluded = {r: "progress not logged" for r in bad_nan.index[bad_nan]}
    excluded.update({r: "progress not strictly increasing" for r in inc.index[~inc]
                     if r not in excluded})
    ev = ev[~ev["run_id"].isin(excluded)]
    if ev.empty:
        raise InputError(f"no usable curves for {benchmark!r}: {len(excluded)} runs excluded")
    ev["step"] = ev["examples"] / ev["global_batch_size"]
    ev["submission"] = ev["round"] + "/" + ev["org"] + "/" + ev["system"]
    lr = ev["opt_base_learning_rate"].where(ev["opt_base_learning_rate"] > 0)
    table = pd.DataFrame({
        "run": ev["run_id"], "batch_size": ev["global_batch_size"].astype(float),
        "learning_rate": lr, "step": ev["step"], "examples": ev["examples"],
        "metric": ev["value"], "submission": ev["submission"], "round": ev["round"],
        "org": ev["org"], "system": ev["system"], "seed": ev["seed"],
        "status": ev["status"],
    })
    hib = MLPERF_DIRECTION.get(benchmark, "FID" not in metric)
    sweep = load_sweep(table, metric_name=metric, higher_is_better=hib)
    sweep = sweep.with_metadata(benchmark=benchmark, excluded_runs=excluded)
    return sweep.with_source(str(d))


# --------------------------------------------------------------------------- MLLOG


_MLLOG = re.compile(r":::MLL(?:OG)?\s+(.*?)\s*$")


def _parse_mllog(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"evals": [], "params": {}}
    with open(path, errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            m = _MLLOG.search(line)
            if not m:
                continue
            try:
                rec = json.loads(m.group(1))
            except (json.JSONDecodeError, RecursionError):
                raise InputError(f"{path}, line {lineno}: malformed MLLOG record") from None
            if not isinstance(rec, dict):
                raise InputError(f"{path}, line {lineno}: an MLLOG record must be a JSON "
                                 f"object with 'key' and 'value', got a "
                                 f"{type(rec).__name__}")
            key, meta = rec.get("key"), rec.get("metadata") or {}
            if not isinstance(meta, dict):
                raise InputError(f"{path}, line {lineno}: the record's 'metadata' must be a "
                                 f"JSON object, got a {type(meta).__name__}")
            if key == "run_stop":
                out["params"]["status"] = meta.get("status")
            elif isinstance(key, str) and key.startswith("eval_accuracy"):
                out["evals"].append((key, rec.get("value"), meta.get("epoch_num"),
                                     meta.get("samples_count")))
            elif key is not None and not isinstance(rec.get("value"), dict | list):
                out["params"].setdefault(key, rec.get("value"))
    return out


def load_mllog(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    benchmark: str | None = None,
    metric: str = "eval_accuracy",
    examples_per_epoch: float | None = None,
    higher_is_better: bool | None = None,
) -> Sweep:
    """MLPerf MLLOG result files (``:::MLLOG {json}`` lines) as a sweep.

    Each file is one run; the batch size comes from ``global_batch_size``, the
    learning rate from ``opt_base_learning_rate``, the benchmark from
    ``submission_benchmark`` (or ``benchmark=``), the curve from the ``metric``
    evaluation records with their ``epoch_num``/``samples_count`` metadata (units as
    in `load_mlperf_curves`). A run whose progress goes backwards (a restarted
    log appended to an old one) is excluded with a warning naming it, and listed in
    ``sweep.metadata["excluded_runs"]``, as `load_mlperf_curves` does.

    Parameters
    ----------
    paths : path or iterable of paths
        Files, or a directory searched recursively for ``result_*.txt``.
    """
    if isinstance(paths, str | os.PathLike):
        p = Path(paths)
        if not p.exists():
            raise FileNotFoundError(f"MLLOG source not found: {p}")
        files = sorted(p.rglob("result_*.txt")) if p.is_dir() else [p]
    else:
        files = [Path(x) for x in paths]
    if not files:
        raise InputError(f"no MLLOG files in {paths}")
    frames = []
    bench_seen = set()
    excluded: dict[str, str] = {}
    for f in files:
        a_file(f, "MLLOG file")
        rec = _parse_mllog(f)
        params = rec["params"]
        bench = benchmark or params.get("submission_benchmark")
        if bench is None:
            raise InputError(f"{f}: no submission_benchmark record; pass benchmark=")
        bench_seen.add(bench)
        if "global_batch_size" not in params:
            raise InputError(f"{f}: no global_batch_size record")
        ev = [e for e in rec["evals"] if e[0] == metric]
        if not ev:
            raise InputError(f"{f}: no {metric!r} evaluation records")
        _, vals, epoch_list, sample_list = zip(*ev, strict=True)
        epochs = pd.Series(epoch_list, dtype=float)
        samples = pd.Series(sample_list, dtype=float)
        examples = _curves_examples(bench, epochs, samples, examples_per_epoch)
        try:
            bs = float(params["global_batch_size"])
        except (TypeError, ValueError):
            raise InputError(f"{f}: global_batch_size is not a number: "
                             f"{params['global_batch_size']!r}") from None
        if not (math.isfinite(bs) and bs > 0):
            raise InputError(f"{f}: global_batch_size must be > 0, got {bs!r}")
        if np.any(np.diff(examples.to_numpy(dtype=float)) <= 0):
            excluded[str(f)] = "progress (epoch_num/samples_count) does not increase"
            continue
        frames.append(pd.DataFrame({
            "run": str(f), "batch_size": bs,
            "learning_rate": params.get("opt_base_learning_rate", np.nan),
            "step": examples / bs, "examples": examples, "metric": pd.Series(vals, dtype=float),
            "benchmark": bench, "seed": params.get("seed"), "status": params.get("status"),
        }))
    if excluded:
        warn(f"load_mllog excluded {len(excluded)} run(s) whose progress goes "
                      f"backwards: {sorted(excluded)[:3]}", EmpiricalBatchWarning)
    if not frames:
        raise InputError(f"no usable MLLOG run in {paths}: {excluded}")
    if higher_is_better is None:
        if len(bench_seen) != 1 or next(iter(bench_seen)) not in MLPERF_DIRECTION:
            raise InputError(f"direction of {metric!r} unknown for {sorted(bench_seen)}; "
                             "pass higher_is_better=")
        higher_is_better = MLPERF_DIRECTION[next(iter(bench_seen))]
    sweep = load_sweep(pd.concat(frames, ignore_index=True), metric_name=metric,
                       higher_is_better=higher_is_better)
    sweep = sweep.with_metadata(excluded_runs=excluded)
    return sweep.with_source(str(paths) if isinstance(paths, str | os.PathLike)
                             else f"{len(files)} MLLOG files")


# --------------------------------------------------------------------------- W&B
