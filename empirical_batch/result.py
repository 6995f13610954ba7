"""The result protocol: one interval type, one base for result objects, one JSON form.

Every result object of the library (a fit, an estimate, a transfer) is a frozen
dataclass deriving from `Result`: a short ``repr`` (at most 300 characters),
``to_dict()`` (plain Python values), ``to_json()`` (strict JSON) and ``to_frame()``
(a pandas table). Its confidence intervals are `Interval` objects, like
``scipy.stats``' ``ConfidenceInterval``: ``fit.b_crit_interval.low``,
``.high`` and ``.level``.

`json_safe` and `dumps` turn results into strict JSON (no ``NaN`` or ``Infinity``
tokens); the command line's ``--json`` output and the schedule exports use them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ._validate import as_scalar
from .errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["REPR_LIMIT", "Interval", "Result", "TableResult", "dumps", "json_safe",
           "unwrap_table"]

REPR_LIMIT = 300
"""Most characters a result's ``repr`` may have."""


@dataclasses.dataclass(frozen=True)
class Interval:
    """A confidence interval ``[low, high]`` at confidence ``level`` (a fraction).

    It unpacks and indexes like the ``(low, high)`` tuples it replaces:
    ``lo, hi = fit.b_crit_interval``. Ends may be infinite (a one-sided interval) or
    NaN (none computed).

    >>> ci = Interval(2.0, 8.0, 0.95)
    >>> ci.low, ci.high, ci.level, 5.0 in ci, tuple(ci)
    (2.0, 8.0, 0.95, True, (2.0, 8.0))
    """

    low: float
    high: float
    level: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))
        object.__setattr__(self, "level", float(self.level))

    def __iter__(self) -> Iterator[float]:
        return iter((self.low, self.high))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> float:
        return (self.low, self.high)[i]

    def __contains__(self, x: object) -> bool:
        """A real number (Python or numpy scalar or 0-d array, not bool) within
        ``[low, high]``."""
        x = as_scalar(x)
        return (isinstance(x, numbers.Real) and not isinstance(x, bool | np.bool_)
                and self.low <= float(x) <= self.high)

    @property
    def width(self) -> float:
        """``high - low``."""
        return self.high - self.low

    def to_dict(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high, "level": self.level}

    def __repr__(self) -> str:
        return f"Interval(low={self.low:.6g}, high={self.high:.6g}, level={self.level:g})"


class Result:
    """Base of the library's result objects (frozen dataclasses).

    Subclasses may override `to_dict` and `to_frame`; the defaults are the dataclass
    fields (intervals as ``{"low", "high", "level"}``) and a one-row table of the
    scalar fields (an interval ``x_interval`` as columns ``x_low``, ``x_high``)."""

    def to_dict(self) -> dict[str, Any]:
        if not dataclasses.is_dataclass(self):  # pragma: no cover - every result is one
            raise UsageError(f"{type(self).__name__} is not a dataclass: override to_dict")
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def __repr__(self) -> str:
        """``Name(field=value, ...)`` of the scalar and interval fields, at most
        `REPR_LIMIT` characters (arrays and tables are left out)."""
        parts: list[str] = []
        if dataclasses.is_dataclass(self):
            for f in dataclasses.fields(self):
                if not f.repr:
                    continue
                v = getattr(self, f.name)
                if isinstance(v, float | np.floating):
                    parts.append(f"{f.name}={float(v):.4g}")
                elif isinstance(v, Interval):
                    parts.append(f"{f.name}=[{v.low:.4g}, {v.high:.4g}]")
                elif isinstance(v, int | str | bool | None | np.integer):
                    parts.append(f"{f.name}={v!r}")
        text = f"{type(self).__name__}({', '.join(parts)})"
        return text if len(text) <= REPR_LIMIT else text[: REPR_LIMIT - 4] + "...)"

    def to_json(self, **kwargs: Any) -> str:
        """``to_dict()`` as strict JSON (see `dumps`)."""
        return dumps(self.to_dict(), **kwargs)

    def to_frame(self) -> Any:
        """A pandas table of the result (one row of its scalar fields by default)."""
        import pandas as pd

        row: dict[str, Any] = {}
        if dataclasses.is_dataclass(self):
            for f in dataclasses.fields(self):
                value = getattr(self, f.name)
                if isinstance(value, Interval):
                    stem = f.name.removesuffix("_interval")
                    row[f"{stem}_low"], row[f"{stem}_high"] = value.low, value.high
                elif isinstance(value, int | float | str | bool | None | np.generic):
                    row[f.name] = value
        return pd.DataFrame([row])


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class TableResult(Result):
    """A result whose content is a table: ``frame`` (a pandas DataFrame) plus the
    scalar fields of its subclass.

    ``to_frame()`` returns a copy of ``frame``; ``to_dict()`` gives the scalar fields
    and the rows as ``{"columns": [...], "rows": [[...], ...]}``. It is not a DataFrame
    (no ``obj["col"]``, ``len(obj)`` or ``obj.loc``): read its table as ``obj.frame``."""

    frame: pd.DataFrame = dataclasses.field(repr=False, compare=False)

    def to_frame(self) -> pd.DataFrame:
        """A copy of ``frame``."""
        return self.frame.copy()

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
               if f.name != "frame"}
        out["columns"] = [str(c) for c in self.frame.columns]
        import pandas as pd

        # missing values (pandas' NA, NaN) as None
        cells = self.frame.astype(object).where(self.frame.notna(), None)
        out["rows"] = [[None if v is pd.NA else v for v in row]
                       for row in cells.to_numpy(dtype=object).tolist()]
        return out

    def _repr_html_(self) -> str | None:
        html: str | None = self.frame._repr_html_()  # type: ignore[operator]
        return html


def unwrap_table(obj: Any) -> Any:
    """``obj.frame`` for a `TableResult`, ``obj`` itself otherwise (for functions that
    take a DataFrame and now also take the result object that replaced it)."""
    return obj.frame if isinstance(obj, TableResult) else obj


def _plain(value: Any) -> Any:
    if isinstance(value, Interval):
        return value.to_dict()
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def json_safe(x: Any) -> Any:
    """JSON-safe: numpy scalars to Python, tuples to lists, intervals and results to
    dicts, ``inf`` to ``"inf"``, NaN to ``None``."""
    if isinstance(x, Interval | Result):
        return json_safe(x.to_dict())
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return [json_safe(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float):
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
    return x


def dumps(obj: Any, indent: int | None = 1) -> str:
    """``json.dumps`` of ``obj`` after `json_safe`: strict JSON (no NaN/Infinity
    tokens); infinite values are the strings ``"inf"``/``"-inf"``, undefined ones
    ``null``."""
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False)
