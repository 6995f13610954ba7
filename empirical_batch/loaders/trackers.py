"""Experiment trackers' exports: W&B CSV and TensorBoard event files, in the sweep schema
(see `empirical_batch.loaders`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._io import read_csv
from .._optional import optional_import
from ..errors import InputError
from ..sweeps import Sweep, load_sweep
from ._files import a_file

__all__ = ["load_tensorboard", "load_wandb"]


def load_wandb(
    history: str | os.PathLike[str] | pd.DataFrame,
    runs: str | os.PathLike[str] | pd.DataFrame | None = None,
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
            raise InputError("W&B panel export has no 'Step' column")
        names = {c: str(c).split(" - ", 1) for c in panel}
        metrics = {m for _, m in names.values()}
        if metric is None:
            if len(metrics) != 1:
                raise InputError(f"W&B panel export has several metrics {sorted(metrics)}; "
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
            raise InputError(f"no column ends with ' - {metric}' in the W&B panel export")
        table = pd.concat(long, ignore_index=True)
        if runs is None:
            raise InputError("a W&B panel export needs runs= (the runs-table export with "
                             "the batch size and learning rate of each run)")
        cfg = _frame(runs, "runs")
        name_col = next((c for c in cfg.columns if str(c).lower() in ("name", "run", "run_name")),
                        None)
        if name_col is None:
            raise InputError(f"runs table has no 'Name' column; columns are {list(cfg.columns)}")
        cfg = cfg.rename(columns={name_col: "run"})
        cfg["run"] = cfg["run"].astype(str)
        missing = sorted(set(table["run"]) - set(cfg["run"]))
        if missing:
            raise InputError(f"runs {missing[:5]} of the panel export are not in the runs table")
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
            raise InputError("cannot join the runs table: no common run-name column")
        df = df.merge(cfg, on=key, how="left", suffixes=("", "_runs"))
    return load_sweep(df, higher_is_better=higher_is_better, **column_map)


def _frame(obj: object, name: str) -> pd.DataFrame:
    if isinstance(obj, pd.DataFrame):
        return obj.copy()
    if isinstance(obj, str | os.PathLike):
        frame: pd.DataFrame = read_csv(a_file(Path(obj), f"{name} file"))
        return frame
    raise InputError(f"{name} must be a path or a DataFrame, got {type(obj).__name__}")


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
        raise InputError(f"{path}: truncated or corrupt event file ({len(data) - pos} bytes "
                         f"after the last complete record, {records} records kept would be "
                         "only part of the run); re-copy the file or remove it")


def load_tensorboard(
    logdir: str | os.PathLike[str],
    tag: str,
    *,
    run_config: Mapping[str, Mapping[str, Any]] | Callable[[str], Mapping[str, Any]]
    | None = None,
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
    with optional_import("tbparse", by="load_tensorboard"):
        from tbparse import SummaryReader
    p = Path(logdir)
    if not p.exists():
        raise FileNotFoundError(f"TensorBoard log directory not found: {p}")
    for f in sorted(p.rglob("events.out.tfevents.*")):
        _check_event_file(f)
    reader = SummaryReader(str(p), extra_columns={"dir_name"})
    sc = reader.scalars
    if sc.empty:
        raise InputError(f"{p}: no scalar events found")
    tags = sorted(sc["tag"].unique())
    if tag not in tags:
        raise InputError(f"{p}: tag {tag!r} not found; tags are {tags}")
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
    cfg: dict[str, dict[str, Any]] = {}
    for run in data["run"].unique():
        c: dict[str, Any] = {}
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
            raise InputError(f"{p}: run {run!r} has no batch_size (give run_config=)")
        cfg[run] = c
    data["batch_size"] = data["run"].map(lambda r: cfg[r]["batch_size"])
    data["learning_rate"] = data["run"].map(lambda r: cfg[r].get("learning_rate", np.nan))
    sweep = load_sweep(data.reset_index(drop=True), metric_name=tag,
                       higher_is_better=higher_is_better)
    return sweep.with_source(str(p))
