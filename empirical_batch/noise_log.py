r"""The noise-log schema: one table of noise-scale estimates along a training run.

Every writer — `empirical_batch.measure.NoiseScaleLog` (CSV or JSON Lines), the
harness's noise stage (``noise_along_reference.csv``: one run per task and optimizer,
selected with ``where``), a user's own loop — and every reader —
`empirical_batch.schedule.NoiseTrajectory.from_log`, ``empirical-batch schedule
--log``, ``empirical-batch plan --noise-log`` and ``empirical-batch transfer
--noise-log`` — meet in one table, one row per logged point:

====================  ==========================================================
column                meaning
====================  ==========================================================
``step``              optimizer steps completed when the row was written, >= 0
``examples``          examples (sequences) processed by then (optional)
``tokens``            tokens processed by then (optional)
``b_simple``          $B_{simple} = \operatorname{tr}\Sigma / |G|^2$ (eq. 2.9)
``b_simple_low``      lower end of its interval (optional; ``b_simple_high`` the
                      upper end, ``b_simple_se`` its standard error)
``b_noise``           $B_{noise} = \operatorname{tr}(H\Sigma) / G^T H G$ (eq. 2.8),
                      where the Hessian is known (optional)
``unit``              what the noise scales count: ``examples``, ``sequences``
                      or ``tokens`` (`empirical_batch.units`); ``examples`` when
                      absent
====================  ==========================================================

The framework callbacks' keys (``noise_scale/b_simple``, ``noise_scale/examples`` ...)
are the same columns with a prefix: a trainer's ``log_history`` (or its
``trainer_state.json``) and a metrics CSV shared with other metrics read as a noise log.
Such a log's ``b_simple`` counts sequences when it has ``b_simple_tokens`` (the
``transformers`` callback also writes ``unit`` into ``log_history``).

At least one of ``b_simple`` and ``b_noise`` is present; any other column
(``loss``, ``g2``, ``trace_sigma``, ``n_eff``, ``skipped``, ``lr`` ...) passes
through. A noise scale is NaN where nothing was measured yet and may be negative
where the estimate is not resolved (an unbiased $|G|^2$ estimate below zero); the
log keeps such rows, and each reader says what it does with them (they are never
dropped without a count).

Which quantity a reader uses is always named. The model of McCandlish et al.
needs $B_{noise}$; a collector measures $B_{simple}$, which equals $B_{noise}$
when the Hessian is a multiple of the identity and otherwise differs from it
(in the paper's Table 1, $B_{simple}$ predicts $B_{crit}$ within about an order of
magnitude for the classifiers, the language model and RL, and falls far below it
for the generative models). A
reader given only $B_{simple}$ where $B_{noise}$ is meant uses it as an
approximation and says so with `BSimpleForBNoise`, unless the caller asked for
``quantity="b_simple"``.

Reference: S. McCandlish, J. Kaplan, D. Amodei and the OpenAI Dota Team. "An
Empirical Model of Large-Batch Training." arXiv:1812.06162 (2018), eqs. 2.8-2.9.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from ._io import check_float_range, loads_json
from .errors import DataError, EmpiricalBatchWarning, InputError, warn
from .params import Options, validate_params
from .result import Result
from .units import check_unit

__all__ = ["NOISE_LOG_COLUMNS", "QUANTITIES", "BSimpleForBNoise", "FinalNoiseScale",
           "choose_quantity", "final_noise_scale", "load_noise_log", "token_column",
           "write_noise_log"]

NOISE_LOG_COLUMNS = ("step", "examples", "tokens", "b_simple", "b_simple_low",
                     "b_simple_high", "b_simple_se", "b_noise", "unit")
Quantity = Literal["b_simple", "b_noise"]
"""The noise scale a log's value stands for."""
QUANTITIES = get_args(Quantity)
_NUMERIC = tuple(c for c in NOISE_LOG_COLUMNS if c != "unit")


class BSimpleForBNoise(EmpiricalBatchWarning):
    """A measured $B_{simple}$ is used where $B_{noise}$ is meant (an approximation)."""


def load_noise_log(source: object, where: str | None = None) -> pd.DataFrame:
    """Read and validate a noise log (a ``.csv``/``.jsonl`` path or a DataFrame).

    ``where`` (a pandas query, e.g. ``"task == 'text_lm' and optimizer == 'adam'"``)
    keeps the rows of one run of a table that holds several, such as the harness's
    ``noise_along_reference.csv``.

    Returns the table sorted by ``step`` (by ``examples`` or ``tokens`` in a log
    without steps) with a ``unit`` column (``"examples"`` when the source has none).
    Raises `DataError` naming the column and row for: no ``step`` (nor
    ``examples``/``tokens``), neither ``b_simple`` nor ``b_noise``, non-numeric
    values, negative or repeated steps, decreasing ``examples``/``tokens``, an interval
    end on the wrong side of a resolved estimate (``b_simple_low`` above ``b_simple``
    > 0), several
    units in one log, or a ``unit`` given on some rows and blank on others.
    The older lower-bound spelling ``b_simple_lo`` is refused with the schema's name.
    """
    frame, label = _read(source)
    if where:
        try:
            frame = frame.query(where)
        except Exception as exc:  # pandas raises many kinds for a bad expression
            raise InputError(f"where {where!r} on {label}: {type(exc).__name__}: {exc}") \
                from None
        if frame.empty:
            raise DataError(f"where {where!r} keeps no row of {label}")
    if "b_simple_lo" in frame.columns and "b_simple_low" not in frame.columns:
        raise DataError(f"{label}: column 'b_simple_lo' is spelled 'b_simple_low' in the "
                        "noise-log schema; rename it")
    order = next((c for c in ("step", "examples", "tokens") if c in frame.columns), None)
    if order is None:
        raise DataError(f"{label}: the noise log needs a 'step' column (or 'examples' or "
                        f"'tokens'); got {list(frame.columns)}")
    if not set(QUANTITIES) & set(frame.columns):
        raise DataError(f"{label}: the noise log needs a 'b_simple' or 'b_noise' column; "
                        f"got {list(frame.columns)}")
    if len(frame) == 0:
        raise DataError(f"{label}: the noise log has no rows")
    out = frame.copy()
    for col in _NUMERIC:
        if col in out.columns:
            num = pd.to_numeric(out[col], errors="coerce")
            bad = num.isna() & out[col].notna()
            if bad.any():
                i = int(np.argmax(bad.to_numpy()))
                raise DataError(f"{label}, row {i}, column {col!r}: not a number: "
                                f"{out[col].iloc[i]!r}")
            out[col] = num.astype(float)
    step = out[order].to_numpy()
    if not np.all(np.isfinite(step)) or np.any(step < 0):
        i = int(np.argmax(~np.isfinite(step) | (step < 0)))
        raise DataError(f"{label}, row {i}, column {order!r}: must be a finite number >= 0, "
                        f"got {step[i]!r}")
    out = out.sort_values(order, kind="stable").reset_index(drop=True)
    dup = out[order].duplicated()
    if dup.any():
        runs = [c for c in out.columns if c not in NOISE_LOG_COLUMNS
                and out[c].dtype.kind in "OSUb" and out[c].nunique() > 1]
        hint = ""
        if runs:
            first = out.iloc[0]
            example = " and ".join(f"{c} == {first[c]!r}" for c in runs)
            hint = (f": the table holds several runs (they differ in {', '.join(runs)}); "
                    f"keep one with where=\"{example}\" (--log-where)")
        raise DataError(f"{label}: {order} {out[order][dup].iloc[0]:g} appears more than "
                        f"once ({int(dup.sum())} repeats); one row per logged point" + hint)
    for col in ("examples", "tokens"):
        if col in out.columns:
            v = out[col].to_numpy()
            known = v[np.isfinite(v)]
            if np.any(known < 0) or np.any(np.diff(known) < 0):
                raise DataError(f"{label}, column {col!r}: must be >= 0 and not decrease "
                                "with step (it counts what was processed so far)")
    for col, side in (("b_simple_low", 1.0), ("b_simple_high", -1.0)):
        if col in out.columns and "b_simple" in out.columns:
            est, end = out["b_simple"].to_numpy(), out[col].to_numpy()
            wrong = np.isfinite(est) & (est > 0) & np.isfinite(end) & \
                (side * (end - est) > 1e-9 * np.maximum(np.abs(est), np.abs(end)))
            if wrong.any():
                i = int(np.argmax(wrong))
                raise DataError(f"{label}, row {i}, column {col!r}: {float(end[i])!r} is "
                                f"{'above' if side > 0 else 'below'} the estimate b_simple "
                                f"= {float(est[i])!r}; an interval holds its estimate (are the "
                                "columns swapped?)")
    units = set()
    if "unit" in out.columns:
        raw = out["unit"]
        blank = raw.isna() | raw.map(lambda u: isinstance(u, str) and not u.strip())
        if blank.any() and not blank.all():
            i = int(np.argmax(blank.to_numpy()))
            raise DataError(f"{label}, row {i}, column 'unit': blank while other rows say "
                            f"{raw[~blank].iloc[0]!r}; fill the unit of every row (or of "
                            "none, which means examples)")
        units = {check_unit(u, f"{label}, column 'unit'") for u in raw[~blank]}
    if len(units) > 1:
        raise DataError(f"{label}: several units in one log: {sorted(units)}; one log "
                        "holds one unit")
    out["unit"] = units.pop() if units else "examples"
    return out


def choose_quantity(frame: pd.DataFrame, quantity: Quantity | None, label: str = "the log"
                    ) -> tuple[str, bool]:
    """The noise-scale column to use as $B_{noise}$ and whether that is an approximation.

    ``quantity=None`` takes ``b_noise`` where the log has finite values of it, else
    ``b_simple`` and warns `BSimpleForBNoise`; an explicit ``quantity`` is used as
    asked (``"b_simple"``: the caller accepts it as the approximation, no warning)."""
    if quantity is not None:
        Options.of(Quantity).check(quantity, "quantity")
        if quantity not in frame.columns:
            raise DataError(f"{label} has no {quantity!r} column; got {list(frame.columns)}")
        return quantity, quantity == "b_simple"
    if "b_noise" in frame.columns and np.isfinite(frame["b_noise"].to_numpy(float)).any():
        return "b_noise", False
    warn(
        f"{label} holds B_simple = tr(Sigma)/|G|^2, used here for B_noise = "
        "tr(H Sigma)/(G^T H G) (McCandlish et al. 2018, eqs. 2.8-2.9): they agree when the "
        "Hessian is a multiple of the identity, otherwise B_simple may differ from it. "
        "Pass quantity='b_simple' (--quantity b_simple) to accept the approximation "
        "without this warning",
        BSimpleForBNoise)
    return "b_simple", True


@dataclass(frozen=True)
class FinalNoiseScale(Result):
    """The last resolved noise scale of a log (`final_noise_scale`)."""

    value: float
    unit: str
    quantity: str  # the column read: "b_noise" or "b_simple"
    step: float  # the row's step (or examples/tokens in a log without steps)
    n_unresolved_after: int  # later rows with a NaN or non-positive value
    column: str = ""  # the column read when not ``quantity`` (``b_simple_tokens``)

    def describe(self) -> str:
        name = "B_noise" if self.quantity == "b_noise" else "B_simple (for B_noise)"
        later = (f"; {self.n_unresolved_after} later rows unresolved"
                 if self.n_unresolved_after else "")
        measured = f" (the log's measured {self.column})" if self.column else ""
        return (f"{name} = {self.value:.4g} {self.unit}{measured} at step {self.step:g} "
                f"of the log{later}")


def token_column(frame: pd.DataFrame, column: str) -> str | None:
    """The measured per-token twin of ``column`` (the callbacks' ``b_simple_tokens``) in
    a log whose unit is not tokens, or ``None`` where the log has none.

    Such a column is what the run measured per token (with its own loss tokens per
    sequence, padding left out); a reader asked for tokens uses it rather than the
    sequences times a nominal sequence length."""
    twin = f"{column}_tokens"
    if str(frame["unit"].iat[0]) == "tokens" or twin not in frame.columns:
        return None
    values = pd.to_numeric(frame[twin], errors="coerce").to_numpy(dtype=float)
    return twin if np.isfinite(values).any() else None


@validate_params(quantity=Quantity)
def final_noise_scale(source: object, quantity: Quantity | None = None, where: str | None = None,
                      *, unit: str | None = None,
                      tokens_per_example: float | None = None) -> FinalNoiseScale:
    """The noise scale at the end of a logged run: the last row whose value is finite and
    > 0 (the critical batch of the model at the end of training, eq. 2.12's
    $B_{crit} \\approx B_{noise}$). Later unresolved rows are counted, not hidden;
    a log with no resolved row is refused. ``where`` as in `load_noise_log`.

    ``unit`` (default the log's) is the unit of the value returned: tokens are read from
    the log's measured per-token column where it has one (`token_column`), else
    converted with ``tokens_per_example`` (`empirical_batch.units.convert`)."""
    from .units import convert

    frame = load_noise_log(source, where)
    label = source if isinstance(source, str | os.PathLike) else "the log"
    col, _ = choose_quantity(frame, quantity, str(label))
    log_unit = str(frame["unit"].iat[0])
    want = log_unit if unit is None else check_unit(unit, "unit")
    read = token_column(frame, col) if want == "tokens" else None
    v = pd.to_numeric(frame[read or col], errors="coerce").to_numpy(dtype=float)
    ok = np.flatnonzero(np.isfinite(v) & (v > 0))
    if ok.size == 0:
        raise DataError(f"{label}: no row has a resolved {read or col} (finite and > 0)")
    i = int(ok[-1])
    at = next(c for c in ("step", "examples", "tokens") if c in frame.columns)
    value = float(v[i]) if read else float(convert(float(v[i]), log_unit, want,
                                                   tokens_per_example=tokens_per_example))
    return FinalNoiseScale(value, want, col, float(frame[at].to_numpy(dtype=float)[i]),
                           len(v) - 1 - i, column=read or "")


def write_noise_log(frame: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a noise log as CSV, or JSON Lines when ``path`` ends in ``.jsonl`` (NaN as
    ``null``); atomically, so an interrupted write leaves the old file intact."""
    from ._io import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp:
        if path.suffix.lower() == ".jsonl":
            with open(tmp, "w", encoding="utf-8") as fh:
                for row in frame.to_dict(orient="records"):
                    fh.write(json.dumps({k: _json_value(v) for k, v in row.items()},
                                        allow_nan=False) + "\n")
        else:
            frame.to_csv(tmp, index=False)
    return path


def _json_value(v: object) -> object:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None if np.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file, one a line (blank lines skipped); a line that is
    not JSON, or holds something other than an object, is a `DataError` naming it."""
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = loads_json(line, f"{path}, line {n}")
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}, line {n}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}, line {n}: a JSON Lines noise log holds one object "
                            f"per line, got {type(row).__name__} {line.strip()[:40]}")
        rows.append(row)
    if not rows:
        raise DataError(f"{path}: the noise log is empty (no JSON lines)")
    return rows


def _read(source: object) -> tuple[pd.DataFrame, str]:
    if isinstance(source, pd.DataFrame):
        return _unprefixed(source, "<DataFrame>"), "<DataFrame>"
    if isinstance(source, list):  # a trainer's log history: one dict per log call
        return _unprefixed(pd.DataFrame(source), "<log history>"), "<log history>"
    if not isinstance(source, str | os.PathLike):
        raise InputError(f"a noise log is a path, a DataFrame or a list of log entries, got "
                         f"{type(source).__name__}")
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"noise log not found: {path}")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        frame = pd.DataFrame(_json_lines(path))
        frame = frame.replace({"inf": np.inf, "-inf": -np.inf})
    elif suffix == ".json":  # a Hugging Face trainer_state.json
        try:
            data = loads_json(path.read_text(), str(path))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: not JSON ({exc})") from None
        history = data.get("log_history") if isinstance(data, dict) else data
        if not isinstance(history, list):
            raise DataError(f"{path}: neither a trainer state with 'log_history' nor a list "
                            "of log entries")
        bad = next((i for i, e in enumerate(history) if not isinstance(e, dict)), None)
        if bad is not None:
            raise DataError(f"{path}: log entry {bad} is a {type(history[bad]).__name__}, "
                            "not an object of named values")
        frame = pd.DataFrame(history)
    else:
        try:
            frame = pd.read_csv(path)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: not a readable CSV noise log ({exc})") from None
        check_float_range(frame, path)
    return _unprefixed(frame, str(path)), str(path)


def _unprefixed(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    """The callbacks' and loggers' keys (``noise_scale/b_simple`` ...,
    `empirical_batch.integrations.loggers`) as schema columns. Such a log is shared with
    other metrics (a trainer's log history, Lightning's ``metrics.csv``): its rows
    without any noise-scale value are the other metrics' rows and are not part of the
    noise log; rows repeated with identical values (one step logged twice) count once."""
    if set(QUANTITIES) & set(frame.columns):
        return frame
    ends = [c for c in frame.columns if isinstance(c, str) and c.endswith("/b_simple")
            and not c.startswith("layer/") and "/layer/" not in c]
    if len(ends) != 1:
        if len(ends) > 1:
            raise DataError(f"{label}: several noise-scale prefixes {ends}; keep one")
        return frame
    prefix = ends[0][: -len("b_simple")]
    mapping = {c: c[len(prefix):] for c in frame.columns
               if isinstance(c, str) and c.startswith(prefix)}
    out = frame.loc[frame[list(mapping)].notna().any(axis=1)].rename(columns=mapping)
    if "step" in out.columns:
        out = out.drop_duplicates(subset=["step", *mapping.values()])
    if "unit" not in out.columns and "b_simple_tokens" in out.columns:
        # the callbacks log b_simple_tokens only for token batches: b_simple counts
        # sequences (a logger that takes numbers only cannot carry the unit itself)
        out["unit"] = "sequences"
    return out.reset_index(drop=True)
