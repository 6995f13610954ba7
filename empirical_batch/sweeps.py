r"""Sweep logs: load, recognise columns, validate (docs/design.md, "The sweep schema").

A *sweep* is a set of training runs at several batch sizes (and learning rates,
and seeds), each logging a metric against optimizer steps. Every source — a CSV
or Parquet file, a DataFrame, the loaders of `empirical_batch.loaders`, the
simulator — lands in one long table, one row per logged point:

=================  =====  ==========================================================
column             type   meaning
=================  =====  ==========================================================
``run``            str    one training run (one batch size, one learning rate, one seed)
``batch_size``     float  examples (or tokens) per optimizer step, > 0
``learning_rate``  float  peak learning rate (> 0, or NaN when the source has none)
``step``           float  optimizer steps taken, ≥ 0
``examples``       float  examples processed; ``step × batch_size`` when absent
``metric``         float  the logged quantity; NaN/±inf mark a diverged run
=================  =====  ==========================================================

Extra columns (seed, optimizer, task, …) pass through untouched.

Design choice: `Sweep` is a small frozen container holding the validated
DataFrame (``sweep.data``) and its metadata — the metric's name and whether
higher is better — rather than a DataFrame subclass, so the metadata cannot be
lost by a pandas operation. ``sweep.data`` is sorted by ``(run, step)``.

Diverged runs: non-finite metric values are what diverging runs log. They are
kept, the run is marked ``diverged`` (see `Sweep.runs`), and
`empirical_batch.fit.steps_to_target` never lets a diverged run reach a
target (its hyper-parameters are unstable, so its earlier progress is not
counted either).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from ._io import read_csv
from .errors import DataError, InputError
from .params import BOOLEAN, validate_params
from .result import unwrap_table
from .units import check_unit

__all__ = ["COLUMN_ALIASES", "SCHEMA", "STEPS_ALIASES", "Sweep", "load_sweep"]

SCHEMA = ("run", "batch_size", "learning_rate", "step", "examples", "metric")

#: Source column names recognised for each schema column (compared case-insensitively,
#: after stripping W&B's ``config.``/``config/`` prefixes).
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "run": ("run", "run_id", "run_name", "runid", "name", "trial", "trial_id", "id"),
    "batch_size": (
        "batch_size", "batchsize", "bs", "global_batch_size", "train_batch_size",
        "total_batch_size", "effective_batch_size", "batch", "global_bs", "gbs",
    ),
    "learning_rate": (
        "learning_rate", "lr", "opt_base_learning_rate", "base_lr", "peak_lr", "max_lr",
        "learningrate",
    ),
    "step": ("step", "steps", "_step", "global_step", "iteration", "iter", "optimizer_step",
             "train_step", "trainer/global_step"),
    "examples": ("examples", "samples", "examples_seen", "samples_seen", "num_examples",
                 "train_samples", "samples_count"),
    "metric": ("metric", "loss", "val_loss", "eval_loss", "valid_loss", "validation_loss",
               "test_loss", "train_loss", "value"),
}

#: Names of the steps column of a steps-to-target table (one row per batch size or seed:
#: batch size and the optimizer steps it took to reach a target), compared like the above.
STEPS_ALIASES = ("steps_to_target", "steps", "num_steps", "n_steps", "steps_to_loss")

# pandas >= 3 copies on write: a shallow copy is then an independent frame
_DEEP_COPY = int(pd.__version__.split(".")[0]) < 3

# names that suggest a quantity where higher is better: the direction must then be stated
_HIGHER_HINTS = ("acc", "auc", "map", "bleu", "f1", "score", "top1", "top5", "precision",
                 "recall", "rouge", "reward")


class Sweep:
    """A validated sweep: the long table plus the metric's name and direction.

    Build one with `load_sweep` (which validates); the constructor trusts
    its input. A Sweep is immutable: ``data`` returns a copy of its table (cheap under
    pandas' copy-on-write), ``metadata`` a read-only mapping, and attributes cannot be
    set; `with_source` and `with_metadata` return new sweeps.

    Attributes
    ----------
    data : pandas.DataFrame
        Columns of `SCHEMA` (plus pass-through extras), sorted by run and step.
    metric_name : str
        Name of the logged quantity (e.g. ``"val_loss"``).
    higher_is_better : bool
        ``False`` for losses/errors, ``True`` for accuracies/scores.
    source : str
        Where the sweep came from (file path or ``"<DataFrame>"``), used in messages.
    """

    __slots__ = ("_data", "higher_is_better", "metadata", "metric_name", "source")
    _data: pd.DataFrame
    metric_name: str
    higher_is_better: bool
    source: str
    metadata: Mapping[str, Any]

    def __init__(self, data: pd.DataFrame, metric_name: str = "metric",
                 higher_is_better: bool = False, source: str = "<DataFrame>",
                 metadata: Mapping[str, Any] | None = None):
        set_ = object.__setattr__
        set_(self, "_data", data.copy(deep=_DEEP_COPY))
        set_(self, "metric_name", str(metric_name))
        set_(self, "higher_is_better", bool(higher_is_better))
        set_(self, "source", str(source))
        set_(self, "metadata", MappingProxyType(dict(metadata or {})))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Sweep is immutable: cannot set {name!r} (use with_source or "
                             "with_metadata, or load a new sweep)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Sweep is immutable: cannot delete {name!r}")

    @property
    def data(self) -> pd.DataFrame:
        """The long table (a copy: editing it does not change the sweep)."""
        return self._data.copy(deep=_DEEP_COPY)

    def with_source(self, source: str) -> Sweep:
        """The same sweep, described as coming from ``source``."""
        return Sweep(self._data, self.metric_name, self.higher_is_better, source,
                     self.metadata)

    def with_metadata(self, **items: Any) -> Sweep:
        """The same sweep with ``items`` added to its metadata."""
        return Sweep(self._data, self.metric_name, self.higher_is_better, self.source,
                     {**self.metadata, **items})

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        r = self.runs
        return (
            f"Sweep({len(r)} runs, {r['batch_size'].nunique()} batch sizes, "
            f"{len(self._data)} points, metric={self.metric_name!r} "
            f"({self.direction} is better), "
            f"{int(r['diverged'].sum())} diverged, source={self.source!r})"
        )

    @property
    def direction(self) -> str:
        """``"higher"`` or ``"lower"`` (is better)."""
        return "higher" if self.higher_is_better else "lower"

    @property
    def runs(self) -> pd.DataFrame:
        """One row per run: batch size, learning rate, points, last step, best metric, diverged."""
        d = self._data
        finite = np.isfinite(d["metric"].to_numpy())
        g = d.assign(_bad=~finite).groupby("run", sort=False)
        out = g.agg(
            batch_size=("batch_size", "first"),
            learning_rate=("learning_rate", "first"),
            n_points=("step", "size"),
            last_step=("step", "max"),
            diverged=("_bad", "any"),
        )
        best = d.loc[finite].groupby("run", sort=False)["metric"]
        out["best_metric"] = best.max() if self.higher_is_better else best.min()
        return out.reset_index()

    @property
    def batch_sizes(self) -> np.ndarray:
        """Sorted distinct batch sizes."""
        return np.sort(self._data["batch_size"].unique())

    @property
    def diverged_runs(self) -> list[str]:
        """Runs that logged a NaN or infinite metric."""
        r = self.runs
        return list(r.loc[r["diverged"], "run"])

    def to_frame(self) -> pd.DataFrame:
        """A copy of the long table."""
        return self.data

    @property
    def provenance(self) -> Any:
        """Where the sweep comes from, for the published ones
        (`empirical_batch.datasets`): a `~empirical_batch.provenance.Provenance`,
        else ``None``."""
        return self.metadata.get("provenance")

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric_name": self.metric_name,
            "higher_is_better": self.higher_is_better,
            "source": self.source,
            "n_rows": len(self._data),
            "n_runs": int(self._data["run"].nunique()),
            "batch_sizes": self.batch_sizes.tolist(),
            "diverged_runs": self.diverged_runs,
            **{k: (v.to_dict() if hasattr(v, "to_dict") else v)
               for k, v in self.metadata.items()},
        }


def read_table(source: object) -> tuple[pd.DataFrame, str, int]:
    """Read a sweep source (path to CSV/TSV/Parquet, optionally gzipped; a DataFrame; a
    `Sweep`; a result object holding a table, such as `simulate_sweep`'s) as (frame,
    label, line offset) where ``line = index + offset`` for files."""
    source = unwrap_table(source)
    if isinstance(source, Sweep):
        return source.data.copy(), source.source, 0
    if isinstance(source, pd.DataFrame):
        return source.copy(), "<DataFrame>", 0
    if not isinstance(source, str | os.PathLike):
        raise InputError(
            f"source must be a path, a pandas DataFrame or a Sweep, got {type(source).__name__}"
        )
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"sweep file not found: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a sweep file")
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            return pd.read_parquet(path), str(path), 0
        except (OSError, ValueError) as exc:
            raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
    if suffix in (".csv", ".txt", ".tsv", ".gz"):
        sep = "\t" if ".tsv" in path.name.lower() else ","
        _check_complete(path)
        return read_csv(path, sep=sep), str(path), 2  # header is line 1
    raise InputError(f"{path}: unknown sweep file type {suffix!r} (expected .csv or .parquet)")


def _check_complete(path: Path) -> None:
    """Refuse a file cut short: a gzip stream that ends early, or a text file whose last
    line has no newline (a value may be cut mid-number)."""
    import gzip
    import zlib

    gz = path.suffix.lower() == ".gz"
    try:
        if gz:
            with gzip.open(path, "rb") as fh:
                tail = b""
                while chunk := fh.read(1 << 20):
                    tail = (tail + chunk)[-1:]
        else:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                if fh.tell() == 0:
                    return  # empty: reported by the reader
                fh.seek(-1, os.SEEK_END)
                tail = fh.read(1)
    except (EOFError, OSError, zlib.error) as exc:
        raise DataError(f"{path}: the compressed stream is cut short or damaged ({exc}); "
                         "the file looks truncated") from None
    if tail and tail not in (b"\n", b"\r"):
        raise DataError(f"{path}: the last line does not end with a newline, so its last "
                         "value may be cut short (a truncated file?); if the file is "
                         "complete, add a final newline")


def _at(offset: int, index: Hashable) -> str:
    """``line N`` of a file (``offset`` > 0: its rows are numbered 0, 1, ...) or ``row
    INDEX`` of a table."""
    if isinstance(index, np.integer):
        index = int(index)
    return f"line {index + offset}" if offset and isinstance(index, int) else f"row {index!r}"


def _where(label: str, offset: int, index: Hashable) -> str:
    return f"{label}, {_at(offset, index)}"


def _strip_prefix(name: str) -> str:
    low = str(name).lower()
    for prefix in ("config.", "config/", "summary.", "summary/"):
        if low.startswith(prefix):
            return low[len(prefix):]
    return low


def _recognise(df: pd.DataFrame, column_map: Mapping[str, str], label: str) -> dict[str, str]:
    """Map schema column -> source column."""
    mapping: dict[str, str] = {}
    for key, src in column_map.items():
        if key not in SCHEMA:
            raise InputError(
                f"unknown schema column {key!r} in column_map; expected one of {SCHEMA}"
            )
        if src not in df.columns:
            raise InputError(
                f"{label}: column {src!r} (given for {key!r}) not found; "
                f"columns are {list(map(str, df.columns))}"
            )
        mapping[key] = src
    used = set(mapping.values())
    lowered: dict[str, list[str]] = {}
    for col in df.columns:
        lowered.setdefault(_strip_prefix(col), []).append(col)
    for key in SCHEMA:
        if key in mapping:
            continue
        for alias in COLUMN_ALIASES[key]:
            cands = [c for c in lowered.get(alias, []) if c not in used]
            if len(cands) > 1:
                raise InputError(
                    f"{label}: several columns could be {key!r}: {cands}; pass {key}=NAME"
                )
            if cands:
                mapping[key] = cands[0]
                used.add(cands[0])
                break
    _refuse_ambiguous(df, mapping, column_map, lowered, label)
    missing = [k for k in ("run", "batch_size", "step", "metric") if k not in mapping]
    if missing:
        hints = {k: COLUMN_ALIASES[k][:4] for k in missing}
        raise InputError(
            f"{label}: missing column(s) {missing}; recognised names include {hints}; "
            f"columns are {list(map(str, df.columns))}; map them with "
            + ", ".join(f"{k}=NAME" for k in missing)
        )
    return mapping


def _refuse_ambiguous(df: pd.DataFrame, mapping: Mapping[str, str],
                      column_map: Mapping[str, str], lowered: Mapping[str, list[str]],
                      label: str) -> None:
    """Two recognised columns for the metric (``loss`` and ``val_loss``): which one is
    meant must be said (``metric=NAME``). Two for the batch size or the learning rate
    (``batch_size`` and ``bs``) must agree on every row, else both are named."""
    for key in ("metric", "batch_size", "learning_rate"):
        if key in column_map or key not in mapping:
            continue
        chosen = mapping[key]
        others = [c for alias in COLUMN_ALIASES[key] for c in lowered.get(alias, [])
                  if c != chosen and c not in mapping.values()]
        if not others:
            continue
        if key == "metric":
            raise InputError(
                f"{label}: several columns could be the metric: {[chosen, *others]}; say "
                f"which one with metric=NAME (e.g. metric={str(others[0])!r})")
        a = pd.to_numeric(df[chosen], errors="coerce")
        for other in others:
            b = pd.to_numeric(df[other], errors="coerce")
            differ = ~((a == b) | (a.isna() & b.isna()))
            if differ.any():
                i = df.index[differ.to_numpy()][0]
                raise InputError(
                    f"{label}: columns {chosen!r} and {other!r} both look like the "
                    f"{key.replace('_', ' ')} and differ (row {i!r}: {df.at[i, chosen]!r} "
                    f"and {df.at[i, other]!r}); say which one with {key}=NAME")


_NOT_NUMBERS = (bool, np.bool_, complex, np.complexfloating, pd.Timestamp, pd.Timedelta,
                np.datetime64, np.timedelta64)


def _numeric(df: pd.DataFrame, col: str, label: str, offset: int, *,
             allow_nonfinite: bool = False, allow_nan: bool = False) -> np.ndarray:
    raw = df[col]
    kind = raw.dtype.kind
    if kind in "bcmM":  # bool, complex, timedelta, datetime: not measurements
        raise InputError(f"{label}, column {col!r}: holds {raw.dtype} values, not numbers")
    if kind == "O":
        odd = raw.map(lambda v: isinstance(v, _NOT_NUMBERS))
        if odd.any():
            pos = int(np.argmax(odd.to_numpy()))
            value = raw.iloc[pos]
            raise InputError(f"{_where(label, offset, raw.index[pos])}, column {col!r}: not a "
                             f"number: {value!r} ({type(value).__name__})")
    num = pd.to_numeric(raw, errors="coerce")
    bad = num.isna() & raw.notna()
    if not (allow_nan or allow_nonfinite):
        bad = bad | raw.isna()
    if bad.any():
        pos = int(np.argmax(bad.to_numpy()))
        raise InputError(f"{_where(label, offset, raw.index[pos])}, column {col!r}: not a "
                         f"number: {raw.iloc[pos]!r}")
    values = num.to_numpy(dtype=float)
    if not allow_nonfinite:
        finite = np.isfinite(values) | (allow_nan & np.isnan(values))
        if not finite.all():
            idx = df.index[int(np.argmin(finite))]
            raise InputError(
                f"{_where(label, offset, idx)}, column {col!r}: must be finite, got "
                f"{raw.loc[idx]!r}"
            )
    return values


def _bounded_column(df: pd.DataFrame, mapping: Mapping[str, str], key: str, what: str,
                    label: str, offset: int, *, strict: bool,
                    allow_nan: bool = False) -> np.ndarray:
    """Numeric column ``mapping[key]``, > 0 (``strict``) or >= 0; errors name file, row, column."""
    col = mapping[key]
    values = _numeric(df, col, label, offset, allow_nan=allow_nan)
    bad = values <= 0 if strict else values < 0
    if np.any(bad):
        idx = df.index[int(np.argmax(bad))]
        raise InputError(
            f"{_where(label, offset, idx)}, column {col!r}: {what} must be "
            f"{'> 0' if strict else '>= 0'}, got {df.loc[idx, col]!r}"
        )
    return values


@validate_params(higher_is_better=BOOLEAN)
def load_sweep(
    source: object,
    *,
    metric_name: str | None = None,
    higher_is_better: bool | None = None,
    unit: str | None = None,
    **column_map: str,
) -> Sweep:
    """Load and validate a sweep log into the sweep schema.

    Parameters
    ----------
    source : str, path, pandas.DataFrame or Sweep
        A ``.csv``/``.parquet`` file or a table, one row per logged point.
    metric_name : str, optional
        Name recorded for the metric; defaults to the source column's name.
    higher_is_better : bool, optional
        Direction of the metric. Defaults to ``False`` (a loss); when the metric's
        name looks like an accuracy/score (``acc``, ``auc``, ``map``, ``bleu``…)
        the direction must be given explicitly — it is not guessed.
    unit : {"examples", "sequences", "tokens"}, optional
        What ``batch_size`` counts, kept in ``metadata["unit"]`` and carried into the
        fits (`empirical_batch.units`); fits take ``"examples"`` when it is not given.
    **column_map : str
        ``schema_column=source_column`` for columns whose names are not recognised,
        e.g. ``load_sweep(df, batch_size="bsz", metric="val/ce")``. Recognised names
        are in `COLUMN_ALIASES` (case-insensitive; W&B ``config.`` prefixes
        are stripped).

    Returns
    -------
    Sweep
        ``examples`` is ``step × batch_size`` when the source has no such column;
        ``learning_rate`` is NaN when absent.

    Raises
    ------
    ValueError
        Naming file, line/row and column: missing columns, non-numeric values,
        batch sizes ≤ 0, negative steps/examples, learning rates ≤ 0, duplicated
        (run, step), a run with several batch sizes or learning rates.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"run": ["a", "a", "b", "b"], "bs": [8, 8, 16, 16],
    ...                    "lr": [0.1, 0.1, 0.2, 0.2], "step": [0, 10, 0, 10],
    ...                    "loss": [2.0, 1.0, 2.0, 0.8]})
    >>> s = load_sweep(df)
    >>> s.metric_name, s.higher_is_better, s.data["examples"].tolist()
    ('loss', False, [0.0, 80.0, 0.0, 160.0])
    """
    df, label, offset = read_table(source)
    if isinstance(source, Sweep):
        metric_name = metric_name or source.metric_name
        if higher_is_better is None:
            higher_is_better = source.higher_is_better
        if unit is None:
            unit = source.metadata.get("unit")
    if len(df) == 0:
        raise InputError(f"{label}: the sweep has no rows")
    mapping = _recognise(df, column_map, label)
    src_metric = mapping["metric"]
    name = metric_name or ("metric" if src_metric == "metric" else str(src_metric))
    if higher_is_better is None:
        low = name.lower()
        if any(h in low for h in _HIGHER_HINTS) and "loss" not in low and "err" not in low:
            raise InputError(
                f"{label}: metric {name!r} looks like a quantity where higher is better; "
                "state the direction with higher_is_better=True or False"
            )
        higher_is_better = False

    out = pd.DataFrame(index=df.index)
    runs = df[mapping["run"]]
    empty = runs.isna() | (runs.astype(str).str.strip() == "")
    if empty.any():
        where = [_at(offset, i) for i in df.index[empty.to_numpy()][:3]]
        raise InputError(f"{label}, column {mapping['run']!r}: empty or missing run id at "
                         f"{', '.join(where)}" + (" ..." if empty.sum() > 3 else "")
                         + "; every row must name its run")
    out["run"] = runs.astype(str)
    bs = _bounded_column(df, mapping, "batch_size", "batch size", label, offset, strict=True)
    out["batch_size"] = bs
    if "learning_rate" in mapping:
        out["learning_rate"] = _bounded_column(df, mapping, "learning_rate", "learning rate",
                                               label, offset, strict=True, allow_nan=True)
    else:
        out["learning_rate"] = np.nan
    step = _bounded_column(df, mapping, "step", "step", label, offset, strict=False)
    out["step"] = step
    if "examples" in mapping:
        out["examples"] = _bounded_column(df, mapping, "examples", "examples", label, offset,
                                          strict=False)
    else:
        out["examples"] = step * bs
    out["metric"] = _numeric(df, src_metric, label, offset, allow_nonfinite=True)

    dup = out.duplicated(["run", "step"], keep=False)
    if dup.any():
        rows = out.index[dup.to_numpy()][:2]
        r0 = out.loc[rows[0]]
        raise InputError(
            f"{label}: duplicated (run, step) = ({r0['run']!r}, {r0['step']:g}) at "
            f"{_at(offset, rows[0])} and {_at(offset, rows[1])} "
            f"(columns {mapping['run']!r}, {mapping['step']!r})"
        )
    for key in ("batch_size", "learning_rate"):
        vals = out[key].fillna(-1.0)
        nun = vals.groupby(out["run"]).nunique()
        if (nun > 1).any():
            run = nun.index[int(np.argmax((nun > 1).to_numpy()))]
            rows = out.index[(out["run"] == run).to_numpy()]
            first = vals.loc[rows[0]]
            other = rows[int(np.argmax((vals.loc[rows] != first).to_numpy()))]
            raise InputError(
                f"{label}: run {run!r} has several values of {key!r} "
                f"({vals.loc[rows].unique().tolist()}), e.g. at "
                f"{_at(offset, rows[0])} and {_at(offset, other)}, column {mapping[key]!r}; "
                "a run must have one batch size and one learning rate"
            )

    extras = [c for c in df.columns if c not in set(mapping.values()) and c not in SCHEMA]
    for c in extras:
        out[c] = df[c]
    out = out.sort_values(["run", "step"], kind="stable").reset_index(drop=True)
    return Sweep(
        data=out,
        metric_name=str(name),
        higher_is_better=bool(higher_is_better),
        source=label,
        metadata={"columns": {k: str(v) for k, v in mapping.items()},
                  **({"unit": check_unit(unit)} if unit is not None else {})},
    )
