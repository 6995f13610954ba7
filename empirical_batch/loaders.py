"""Loaders for published sweep formats, each landing in the sweep schema.

================================  ==========================================  ==================
loader                            source                                      returns
================================  ==========================================  ==================
`load_mlperf_curves`        ``runs.csv`` + ``evals.csv`` (MLLOG evals   `Sweep`
                                  of MLPerf Training submissions, extracted)
`load_mllog`                MLPerf MLLOG ``result_N.txt`` files         `Sweep`
`load_wandb`                W&B CSV exports (long history, or a panel   `Sweep`
                                  export joined with a runs-table export)
`load_tensorboard`          TensorBoard event files (via ``tbparse``)   `Sweep`
`load_mlperf_rcp`           MLPerf reference convergence points         steps-to-target
                                  (``rcps_*.json``, mlcommons/logging)        table (per seed)
================================  ==========================================  ==================

MLPerf RCPs are not curves but the amount of training each seed needed to reach
the benchmark target, so `load_mlperf_rcp` returns a per-seed
steps-to-target table (``batch_size``, ``steps``/``examples``, ``run``, ``seed``)
that `empirical_batch.fit.fit_tradeoff` takes directly.

Units: MLPerf logs progress in the benchmark's own unit (``epoch_num`` is epochs,
training samples or tokens depending on benchmark and round; ``samples_count``
for newer LLM benchmarks). `MLPERF_UNITS` records what is known (from the
MLCommons rules and the SOURCE.md of the published data); a unit that cannot be
converted to examples is refused unless ``examples_per_epoch`` is given.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .sweeps import Sweep, load_sweep

__all__ = [
    "MLPERF_DIRECTION",
    "MLPERF_UNITS",
    "load_mllog",
    "load_mlperf_curves",
    "load_mlperf_rcp",
    "load_tensorboard",
    "load_wandb",
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
            raise ValueError(f"examples_per_epoch must be > 0, got {examples_per_epoch!r}")
        return float(examples_per_epoch)
    unit = MLPERF_UNITS.get(benchmark)
    if unit is None:
        raise ValueError(
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


def _positive(value, f, name, key) -> float:
    """A finite number > 0 from an RCP entry, or a ValueError naming file, entry and key."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{f}: entry {name!r}: {key} must be a number, got {value!r:.60}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{f}: entry {name!r}: {key} must be finite and > 0, got {value!r}")
    return v


def load_mlperf_rcp(source, *, benchmark: str | None = None) -> pd.DataFrame:
    """Per-seed steps to the benchmark target from MLPerf ``rcps_*.json`` files.

    Parameters
    ----------
    source : path
        One ``rcps_<benchmark>.json`` file, or a directory searched recursively (the
        ``mlperf_logging/rcp_checker`` tree: ``<ruleset>/rcps_*.json``).
    benchmark : str, optional
        Keep only this benchmark (the JSON's ``Benchmark`` field).

    Returns
    -------
    pandas.DataFrame
        One row per seed: ``ruleset``, ``benchmark``, ``rcp_name``, ``batch_size``,
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
    files = sorted(path.rglob("rcps_*.json")) if path.is_dir() else [path]
    if not files:
        raise ValueError(f"{path}: no rcps_*.json files found")
    rows = []
    for f in files:
        try:
            entries = json.loads(f.read_text())
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"{f}: not valid JSON: {type(exc).__name__}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{f}: not UTF-8 text ({exc.reason})") from None
        if not isinstance(entries, dict):
            raise ValueError(f"{f}: expected a JSON object of RCP entries at the top level, "
                             f"got a {type(entries).__name__}")
        ruleset = f.parent.name
        for name, e in entries.items():
            if not isinstance(e, dict):
                raise ValueError(f"{f}: entry {name!r} must be an object, got "
                                 f"{type(e).__name__}")
            bench = e.get("Benchmark")
            if not isinstance(bench, str):
                raise ValueError(f"{f}: entry {name!r} lacks a 'Benchmark' name")
            if benchmark is not None and bench != benchmark:
                continue
            values = e.get("Epochs to converge", e.get("samples to converge"))
            if values is None or "BS" not in e:
                raise ValueError(f"{f}: entry {name!r} lacks 'BS' or 'Epochs to converge'")
            bs = _positive(e["BS"], f, name, "BS")
            if not isinstance(values, list) or not values:
                raise ValueError(f"{f}: entry {name!r}: 'Epochs to converge' must be a "
                                 f"non-empty list of numbers, got {values!r:.60}")
            hp = e.get("Hyperparams", {})
            if not isinstance(hp, dict):
                raise ValueError(f"{f}: entry {name!r}: 'Hyperparams' must be an object")
            lr = hp.get("opt_base_learning_rate", hp.get("opt_lr", np.nan))
            unit, per = _rcp_unit(bench, ruleset)
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
        raise ValueError(f"{path}: no RCP entries" + (f" for benchmark {benchmark!r}"
                                                       if benchmark else ""))
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- MLPerf curves


def _table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A CSV with the named columns, or a ValueError naming the file and the key."""
    try:
        frame = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable table ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())})") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}")
    return frame


def _curves_examples(bench, epoch_num, samples_count, examples_per_epoch):
    if bench in _SAMPLES_COUNT:
        return samples_count.astype(float)
    return epoch_num.astype(float) * _examples_per_unit(bench, examples_per_epoch)


def load_mlperf_curves(
    directory,
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
        raise ValueError(f"{d}: no runs for benchmark {benchmark!r} with the given filters")
    ev = _table(d / "evals.csv", ("run_id", "metric", "value", "epoch_num", "samples_count",
                                  "eval_index"))
    ev = ev[ev["run_id"].isin(runs["run_id"])]
    metrics = sorted(ev["metric"].unique())
    if metric is None:
        if len(metrics) != 1:
            raise ValueError(
                f"benchmark {benchmark!r} logs several metrics {metrics}; pass metric="
            )
        metric = metrics[0]
    elif metric not in metrics:
        raise ValueError(f"metric {metric!r} not logged for {benchmark!r}; have {metrics}")
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
        raise ValueError(f"no usable curves for {benchmark!r}: {len(excluded)} runs excluded")
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


def _parse_mllog(path: Path) -> dict:
    out: dict[str, Any] = {"evals": [], "params": {}}
    with open(path, errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            m = _MLLOG.search(line)
            if not m:
                continue
            try:
                rec = json.loads(m.group(1))
            except json.JSONDecodeError:
                raise ValueError(f"{path}, line {lineno}: malformed MLLOG record") from None
            key, meta = rec.get("key"), rec.get("metadata") or {}
            if key == "run_stop":
                out["params"]["status"] = meta.get("status")
            elif isinstance(key, str) and key.startswith("eval_accuracy"):
                out["evals"].append((key, rec.get("value"), meta.get("epoch_num"),
                                     meta.get("samples_count")))
            elif key is not None and not isinstance(rec.get("value"), dict | list):
                out["params"].setdefault(key, rec.get("value"))
    return out


def load_mllog(
    paths,
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
        raise ValueError(f"no MLLOG files in {paths}")
    frames = []
    bench_seen = set()
    excluded: dict[str, str] = {}
    for f in files:
        if not f.exists():
            raise FileNotFoundError(f"MLLOG file not found: {f}")
        rec = _parse_mllog(f)
        params = rec["params"]
        bench = benchmark or params.get("submission_benchmark")
        if bench is None:
            raise ValueError(f"{f}: no submission_benchmark record; pass benchmark=")
        bench_seen.add(bench)
        if "global_batch_size" not in params:
            raise ValueError(f"{f}: no global_batch_size record")
        ev = [e for e in rec["evals"] if e[0] == metric]
        if not ev:
            raise ValueError(f"{f}: no {metric!r} evaluation records")
        _, vals, epoch_list, sample_list = zip(*ev, strict=True)
        epochs = pd.Series(epoch_list, dtype=float)
        samples = pd.Series(sample_list, dtype=float)
        examples = _curves_examples(bench, epochs, samples, examples_per_epoch)
        try:
            bs = float(params["global_batch_size"])
        except (TypeError, ValueError):
            raise ValueError(f"{f}: global_batch_size is not a number: "
                             f"{params['global_batch_size']!r}") from None
        if not (math.isfinite(bs) and bs > 0):
            raise ValueError(f"{f}: global_batch_size must be > 0, got {bs!r}")
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
        import warnings

        warnings.warn(f"load_mllog excluded {len(excluded)} run(s) whose progress goes "
                      f"backwards: {sorted(excluded)[:3]}", stacklevel=2)
    if not frames:
        raise ValueError(f"no usable MLLOG run in {paths}: {excluded}")
    if higher_is_better is None:
        if len(bench_seen) != 1 or next(iter(bench_seen)) not in MLPERF_DIRECTION:
            raise ValueError(f"direction of {metric!r} unknown for {sorted(bench_seen)}; "
                             "pass higher_is_better=")
        higher_is_better = MLPERF_DIRECTION[next(iter(bench_seen))]
    sweep = load_sweep(pd.concat(frames, ignore_index=True), metric_name=metric,
                       higher_is_better=higher_is_better)
    sweep = sweep.with_metadata(excluded_runs=excluded)
    return sweep.with_source(str(paths) if isinstance(paths, str | os.PathLike)
                             else f"{len(files)} MLLOG files")


# --------------------------------------------------------------------------- W&B


def load_wandb(
    history,
    runs: str | os.PathLike | pd.DataFrame | None = None,
    *,
    metric: str | None = None,
    higher_is_better: bool | None = None,
    **column_map: str,
) -> Sweep:
    """A W&B export as a sweep.

    Two layouts are recognised:

    * **long history** (``run.history()`` of each run concatenated, or the CSV of
      ``wandb.Api().runs(...)`` histories): one row per logged step with a run
      column (``name``/``run_id``…), ``_step`` and config columns (``config.lr``,
      ``batch_size``…). Passed to `load_sweep` with
      ``metric=`` naming the metric column.
    * **panel export** ("Export CSV" of a chart): ``Step`` and one column
      ``"<run name> - <metric>"`` per run (``__MIN``/``__MAX`` columns ignored); the
      batch size and learning rate of each run come from ``runs``, the runs-table
      export (``Name`` plus config columns).
    """
    df = _frame(history, "history")
    panel = [c for c in df.columns if " - " in str(c) and not str(c).endswith(("__MIN", "__MAX"))]
    if panel and "run" not in column_map:
        step_col = next((c for c in df.columns if str(c).lower() in ("step", "_step")), None)
        if step_col is None:
            raise ValueError("W&B panel export has no 'Step' column")
        names = {c: str(c).split(" - ", 1) for c in panel}
        metrics = {m for _, m in names.values()}
        if metric is None:
            if len(metrics) != 1:
                raise ValueError(f"W&B panel export has several metrics {sorted(metrics)}; "
                                 "pass metric=")
            metric = next(iter(metrics))
        long = []
        for c, (run, m) in names.items():
            if m != metric:
                continue
            part = df[[step_col, c]].dropna(subset=[c]).rename(columns={step_col: "step",
                                                                        c: "metric"})
            part.insert(0, "run", run)
            long.append(part)
        if not long:
            raise ValueError(f"no column ends with ' - {metric}' in the W&B panel export")
        table = pd.concat(long, ignore_index=True)
        if runs is None:
            raise ValueError("a W&B panel export needs runs= (the runs-table export with "
                             "the batch size and learning rate of each run)")
        cfg = _frame(runs, "runs")
        name_col = next((c for c in cfg.columns if str(c).lower() in ("name", "run", "run_name")),
                        None)
        if name_col is None:
            raise ValueError(f"runs table has no 'Name' column; columns are {list(cfg.columns)}")
        cfg = cfg.rename(columns={name_col: "run"})
        cfg["run"] = cfg["run"].astype(str)
        missing = sorted(set(table["run"]) - set(cfg["run"]))
        if missing:
            raise ValueError(f"runs {missing[:5]} of the panel export are not in the runs table")
        table = table.merge(cfg, on="run", how="left")
        return load_sweep(table, metric_name=metric, higher_is_better=higher_is_better,
                          **column_map)
    if metric is not None:
        column_map.setdefault("metric", metric)
    if runs is not None:
        cfg = _frame(runs, "runs")
        key = column_map.get("run") or next(
            (c for c in df.columns if str(c).lower() in ("name", "run", "run_id")), None)
        if key is None or key not in cfg.columns:
            raise ValueError("cannot join the runs table: no common run-name column")
        df = df.merge(cfg, on=key, how="left", suffixes=("", "_runs"))
    return load_sweep(df, higher_is_better=higher_is_better, **column_map)


def _frame(obj, name) -> pd.DataFrame:
    if isinstance(obj, pd.DataFrame):
        return obj.copy()
    if isinstance(obj, str | os.PathLike):
        p = Path(obj)
        if not p.exists():
            raise FileNotFoundError(f"{name} file not found: {p}")
        return pd.read_csv(p)
    raise TypeError(f"{name} must be a path or a DataFrame, got {type(obj).__name__}")


# --------------------------------------------------------------------------- TensorBoard


def _check_event_file(path: Path) -> None:
    """Refuse an event file that is cut short: its records (8-byte length, 4-byte
    checksum, data, 4-byte checksum: TFRecord framing) must end exactly at the end of
    the file. (tbparse would drop the tail of such a file without a word.)"""
    data = path.read_bytes()
    pos, records = 0, 0
    while pos < len(data):
        if len(data) - pos < 12:
            break
        length = int.from_bytes(data[pos:pos + 8], "little")
        end = pos + 12 + length + 4
        if end > len(data):
            break
        pos, records = end, records + 1
    if pos != len(data):
        raise ValueError(f"{path}: truncated or corrupt event file ({len(data) - pos} bytes "
                         f"after the last complete record, {records} records kept would be "
                         "only part of the run); re-copy the file or remove it")


def load_tensorboard(
    logdir,
    tag: str,
    *,
    run_config: Mapping[str, Mapping] | Callable[[str], Mapping] | None = None,
    higher_is_better: bool | None = None,
) -> Sweep:
    """TensorBoard event files as a sweep (parsed by ``tbparse``, not by hand).

    Parameters
    ----------
    logdir : path
        A directory with one sub-directory per run (TensorBoard's layout).
    tag : str
        The scalar tag to use as the metric (e.g. ``"val/loss"``).
    run_config : mapping or callable, optional
        ``{run_dir: {"batch_size": ..., "learning_rate": ...}}`` or a function of the
        run directory name returning that mapping. Without it, each run's
        ``batch_size``/``learning_rate`` must be logged as hparams (``add_hparams``)
        or as scalars tagged ``batch_size``/``learning_rate`` (first value used).
    """
    try:
        from tbparse import SummaryReader
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise ImportError("load_tensorboard needs tbparse: pip install tbparse") from exc
    p = Path(logdir)
    if not p.exists():
        raise FileNotFoundError(f"TensorBoard log directory not found: {p}")
    for f in sorted(p.rglob("events.out.tfevents.*")):
        _check_event_file(f)
    reader = SummaryReader(str(p), extra_columns={"dir_name"})
    sc = reader.scalars
    if sc.empty:
        raise ValueError(f"{p}: no scalar events found")
    tags = sorted(sc["tag"].unique())
    if tag not in tags:
        raise ValueError(f"{p}: tag {tag!r} not found; tags are {tags}")
    sc["dir_name"] = sc["dir_name"].fillna("").astype(str)
    data = sc[sc["tag"] == tag][["dir_name", "step", "value"]].rename(
        columns={"dir_name": "run", "value": "metric"})
    hp = None  # logged hparams, read once (tbparse rebuilds the frame on every access)
    if run_config is None:
        hp = reader.hparams
        if hp.empty or "dir_name" not in hp.columns:
            hp = None
        else:
            hp = hp.assign(dir_name=hp["dir_name"].fillna("").astype(str))
    cfg: dict[str, dict] = {}
    for run in data["run"].unique():
        c: dict = {}
        if run_config is not None:
            c = dict(run_config(run) if callable(run_config) else run_config.get(run, {}))
        else:
            if hp is not None:
                # add_hparams writes into <run>/<timestamp>: match the run exactly or as
                # a parent directory ("run1" must not pick up "run10")
                names = hp["dir_name"]
                sub = hp[(names == run) | names.str.startswith(run + "/")]
                c = {k: v for k, v in zip(sub["tag"], sub["value"], strict=True)}
            for key in ("batch_size", "learning_rate"):
                s = sc[(sc["dir_name"] == run) & (sc["tag"] == key)]
                if key not in c and not s.empty:
                    c[key] = s["value"].iloc[0]
        if "batch_size" not in c:
            raise ValueError(f"{p}: run {run!r} has no batch_size (give run_config=)")
        cfg[run] = c
    data["batch_size"] = data["run"].map(lambda r: cfg[r]["batch_size"])
    data["learning_rate"] = data["run"].map(lambda r: cfg[r].get("learning_rate", np.nan))
    sweep = load_sweep(data.reset_index(drop=True), metric_name=tag,
                       higher_is_better=higher_is_better)
    return sweep.with_source(str(p))
