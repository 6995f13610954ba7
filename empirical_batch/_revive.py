"""Values of a result's dict back to the types of its fields (`Result.from_dict`).

A field's annotation (a string under ``from __future__ import annotations``) says what
its plain value was: ``float`` (``None`` is NaN, ``"inf"``/``"-inf"`` the infinities),
``tuple[X, ...]``, ``np.ndarray`` (nested lists), ``pd.DataFrame`` (``{"columns",
"rows"}`` or a list of records), ``dict[str, X]``, unions of these with ``None``, and
named types the caller makes (`empirical_batch.result`: an ``Interval`` from
``{"low", "high", "level"}``, a nested result from its dict).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .errors import DataError


def number(v: Any) -> float:
    """A float from its JSON form: ``None`` is NaN, ``"inf"``/``"-inf"`` the infinities."""
    if v is None:
        return math.nan
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return float(v)
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
        raise DataError(f"expected a number, got {v!r}")
    return float(v)


def split_union(hint: str) -> list[str]:
    """``"A | B[C | D]"`` -> ``["A", "B[C | D]"]`` (top-level alternatives)."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(hint):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "|" and depth == 0:
            parts.append(hint[start:i].strip())
            start = i + 1
    parts.append(hint[start:].strip())
    return parts


def _split_args(inner: str) -> list[str]:
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(inner):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(inner[start:i].strip())
            start = i + 1
    parts.append(inner[start:].strip())
    return parts


def _plain_numbers(v: Any) -> Any:
    if isinstance(v, list):
        return [_plain_numbers(x) for x in v]
    return number(v) if v is None or isinstance(v, str) else v


def array(v: Any) -> np.ndarray:
    """A numpy array from nested lists (``None`` as NaN, ``"inf"`` as inf)."""
    if isinstance(v, list) and v and all(isinstance(x, bool) for x in v):
        return np.asarray(v, dtype=bool)
    out = np.asarray(_plain_numbers(v))
    return out.astype(float) if out.dtype == object else out


def frame(v: Any) -> Any:
    """A pandas table from ``{"columns": [...], "rows": [[...]]}`` (with ``"dtypes"``,
    the columns of a pandas extension type) or a list of records; a column of numbers,
    ``None`` (missing) and ``"inf"`` strings is a float column."""
    import pandas as pd

    if isinstance(v, Mapping) and "columns" in v and "rows" in v:
        out = pd.DataFrame(list(v["rows"]), columns=list(v["columns"]))
    elif isinstance(v, list):
        out = pd.DataFrame.from_records(v)
    else:
        raise DataError(f"expected a table ({{'columns', 'rows'}} or records), got "
                        f"{type(v).__name__}")
    for col in out.columns:
        values = out[col].tolist()
        kinds = {type(x) for x in values}
        if kinds and kinds <= {int, float, str, type(None)} and kinds != {int} and \
                all(not isinstance(x, str) or x in ("inf", "-inf") for x in values):
            out[col] = np.array([number(x) for x in values], dtype=float)
    dtypes = v.get("dtypes", {}) if isinstance(v, Mapping) else {}
    if not isinstance(dtypes, Mapping) or not set(dtypes) <= set(out.columns):
        raise DataError(f"a table's 'dtypes' must map its columns to pandas types, got "
                        f"{dtypes!r}")
    for col, dtype in dtypes.items():
        out[col] = out[col].astype(dtype)
    return out


def revive(v: Any, hint: str, lookup: Callable[[str], Callable[[Any], Any] | None]) -> Any:
    """``v`` (plain, from JSON) as the type ``hint`` names; ``lookup(name)`` makes the
    value of any other named type (an interval, a nested result) from ``v``, None for a
    name it does not know (``v`` is then kept as it is)."""
    alts = split_union(hint)
    if len(alts) > 1:
        if v is None:
            return None if "None" in alts else (math.nan if "float" in alts else None)
        errors = []
        for alt in (a for a in alts if a != "None"):
            try:
                return revive(v, alt, lookup)
            except (DataError, TypeError, ValueError, KeyError) as exc:
                errors.append(str(exc))
        raise DataError(f"{v!r} is none of {hint}: {'; '.join(errors)}")
    return _revive_one(v, hint, lookup)


def _revive_one(v: Any, hint: str,
                lookup: Callable[[str], Callable[[Any], Any] | None]) -> Any:
    head, _, rest = hint.partition("[")
    if hint == "float":
        return number(v)
    if hint in ("int", "str", "bool"):
        return {"int": int, "str": str, "bool": bool}[hint](v)
    if hint in ("np.ndarray", "ndarray"):
        return array(v)
    if hint in ("pd.DataFrame", "DataFrame"):
        return frame(v)
    if head == "tuple" and rest:
        args = _split_args(rest[:-1])
        if not isinstance(v, list | tuple):
            raise DataError(f"expected a list for {hint}, got {type(v).__name__}")
        if len(args) == 2 and args[1] == "...":
            return tuple(revive(x, args[0], lookup) for x in v)
        return tuple(revive(x, a, lookup) for x, a in zip(v, args, strict=True))
    if head in ("dict", "Mapping") and rest:
        value_hint = _split_args(rest[:-1])[-1]
        if not isinstance(v, Mapping):
            raise DataError(f"expected an object for {hint}, got {type(v).__name__}")
        return {k: revive(x, value_hint, lookup) for k, x in v.items()}
    make = lookup(hint)
    if make is not None:
        if not isinstance(v, Mapping):
            raise DataError(f"expected a {hint} object, got {type(v).__name__}")
        return make(v)
    return v  # Any, dict, a plain value
