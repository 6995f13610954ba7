r"""Shallue et al. 2018's ``batch_science`` layout, read as a steps-to-target grid.

Shallue, Lee, Antognini, Sohl-Dickstein, Frostig and Dahl, *Measuring the Effects of
Data Parallelism on Neural Network Training* (JMLR 2019, arXiv 1811.03600), released
their measurements as a directory tree (``google-research/batch_science``):

```
<dataset>/<model>/<optimizer>/          a workload
    <batch_size study>/study.json       {"batch_size": ..., "dataset", "model", "optimizer"}
        <trial>/metadata.json           {"trial_id": ..., "status": "COMPLETE", ...}
        <trial>/measurements.csv        a ``step`` column and the metrics
```

Steps to a result are defined as their ``compute_steps_to_result`` does: over every
trial of a study (one batch size, its metaparameter search), the first step, in
step order with ties broken by trial id, at which the objective is *strictly* below the
target (above it with ``maximize``). Only trials with status ``COMPLETE`` are read, the
default of their ``load_study``. Batch sizes are in examples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._io import read_csv, read_json
from ..errors import DataError
from .schema import RunGrid, finish_grid

__all__ = ["load_batch_science", "steps_to_result"]


def steps_to_result(measurements: pd.DataFrame, metric: str, target: float,
                    maximize: bool = False) -> float:
    """First step at which ``metric`` is strictly past ``target`` in the table of one
    study (columns ``trial_id``, ``step`` and ``metric``); ``inf`` if never."""
    m = measurements.sort_values(["step", "trial_id"], kind="mergesort")
    values = m[metric].to_numpy(dtype=float)
    good = values > target if maximize else values < target
    return float(m["step"].to_numpy()[good][0]) if good.any() else float("inf")


def _is_study(path: Path) -> bool:
    return (path / "study.json").is_file()


def _workloads(root: Path) -> list[Path]:
    """Directories whose subdirectories are studies (``root`` itself, or below it)."""
    found = []
    for d in sorted([root, *[p for p in root.rglob("*") if p.is_dir()]]):
        if any(_is_study(c) for c in d.iterdir() if c.is_dir()):
            found.append(d)
    return found


def _read_study(study: Path, metric: str) -> tuple[float, pd.DataFrame, dict[str, Any]]:
    meta = read_json(study / "study.json")
    if not isinstance(meta, dict) or "batch_size" not in meta:
        raise DataError(f"{study / 'study.json'}: no batch_size")
    tables = []
    for trial in sorted((p for p in study.iterdir() if p.is_dir()), key=lambda p: p.name):
        tmeta = read_json(trial / "metadata.json")
        if not isinstance(tmeta, dict) or tmeta.get("status") != "COMPLETE":
            continue
        m = read_csv(trial / "measurements.csv")
        if "step" not in m.columns or metric not in m.columns:
            raise DataError(f"{trial / 'measurements.csv'}: needs columns 'step' and "
                            f"{metric!r}; columns are {list(m.columns)}")
        tables.append(m.assign(trial_id=tmeta.get("trial_id", trial.name)))
    if not tables:
        raise DataError(f"{study}: no trial with status COMPLETE")
    return float(meta["batch_size"]), pd.concat(tables, ignore_index=True), meta


def load_batch_science(root: str | Path, *, metric: str, target: float,
                       maximize: bool = False) -> RunGrid:
    """A steps grid (one cell per workload ``dataset/model/optimizer``) from a
    ``batch_science`` tree: per batch size, the steps to reach ``target`` (see the
    module's text); batch sizes that never reach it have ``steps = inf``."""
    root = Path(root)
    workloads = _workloads(root)
    if not workloads:
        raise DataError(f"{root}: no batch_science study (a directory holding study.json) "
                        "found")
    rows = []
    for w in workloads:
        for study in sorted(c for c in w.iterdir() if c.is_dir() and _is_study(c)):
            b, table, meta = _read_study(study, metric)
            name = "/".join(str(meta.get(k, "?")) for k in ("dataset", "model", "optimizer"))
            rows.append({"cell": name, "batch_size": b,
                         "steps": steps_to_result(table, metric, float(target), maximize),
                         "n_trials": int(table["trial_id"].nunique())})
    frame = pd.DataFrame(rows)
    frame["n_params"], frame["tokens"] = np.nan, np.nan
    return finish_grid(frame, "steps", "examples", None, "batch_science", str(root))
