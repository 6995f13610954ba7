"""The result protocol: one interval type, one base for result objects, one JSON form.

Every result object of the library (a fit, an estimate, a transfer) is a frozen
dataclass deriving from `Result`: a short ``repr`` (at most 300 characters),
``to_dict()`` (plain Python values), ``to_json()`` (strict JSON) and ``to_frame()``
(a pandas table). Its confidence intervals are `Interval` objects, like
``scipy.stats``' ``ConfidenceInterval``: ``fit.b_crit_interval.low``,
``.high`` and ``.level``.

`json_safe` and `dumps` turn results into strict JSON (no ``NaN`` or ``Infinity``
tokens); the command line's ``--json`` output and the schedule exports use them. A
result's JSON carries its class under ``"result"`` (`RESULT_KEY`), so `read_result` gives
the object back: ``read_result(fit.to_json()) == fit``; ``Cls.from_dict(d)`` is the
inverse of ``to_dict``. ``result.interval(name, level)`` is the interval of a quantity at
any level where the result stores its bootstrap draws (a `TradeoffFit`'s ``b_crit``: where
it stores its profile, `empirical_batch.fit.tradeoff_intervals.BCritProfile`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np

from ._validate import as_scalar
from .errors import DataError, InputError, UsageError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["REPR_LIMIT", "RESULT_KEY", "Interval", "Result", "TableResult", "dumps",
           "json_safe", "read_result", "table_dict", "unwrap_table"]

REPR_LIMIT = 300
"""Most characters a result's ``repr`` may have."""

RESULT_KEY = "result"
"""The key of a result's JSON that names its class (``"module:Class"``)."""

_CLASSES: dict[str, type[Result]] = {}


def _tag(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


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
    scalar fields (an interval ``x_interval`` as columns ``x_low``, ``x_high``).

    ``from_dict`` (a classmethod) reads ``to_dict()`` back, each field by its annotation
    (a table field ``frame`` from ``columns`` and ``rows``, as `TableResult` writes it);
    a subclass whose dict cannot give it back (it holds a callable) names why in
    ``cannot_read_back``. A subclass that stores bootstrap draws (``draws``: quantity
    name -> 1-D array) answers `interval` at any level."""

    #: why the class cannot be read back from its dict or JSON (None: it can)
    cannot_read_back: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _CLASSES[_tag(cls)] = cls

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """The result whose `to_dict` (or parsed `to_json`) is ``d``: the inverse of
        ``to_dict``. Keys that are no field (derived values) are ignored."""
        from ._revive import revive

        if cls.cannot_read_back is not None:
            raise UsageError(f"{cls.__name__} cannot be read back from its dict or JSON: "
                             f"{cls.cannot_read_back}")
        if not isinstance(d, Mapping):
            raise DataError(f"{cls.__name__}.from_dict needs a dict, got {type(d).__name__}")
        tag = d.get(RESULT_KEY)
        if tag is not None and tag != _tag(cls):
            raise DataError(f"the dict is a {tag!r} result, not a {cls.__name__}")
        if not dataclasses.is_dataclass(cls):  # pragma: no cover - every result is one
            raise UsageError(f"{cls.__name__} is not a dataclass: override from_dict")
        if "frame" not in d and "columns" in d and "rows" in d:  # a table (`table_dict`)
            d = {**d, "frame": {k: d[k] for k in ("columns", "rows", "dtypes") if k in d}}
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if not f.init or (f.name not in d and f.name.startswith("_")):
                continue
            if f.name not in d:
                if f.default is not dataclasses.MISSING or \
                        f.default_factory is not dataclasses.MISSING:
                    continue
                raise DataError(f"{cls.__name__}.from_dict: no {f.name!r} in the dict "
                                f"(keys: {sorted(d)})")
            try:
                kwargs[f.name] = revive(d[f.name], str(f.type), _maker)
            except (TypeError, ValueError, KeyError) as exc:
                raise DataError(f"{cls.__name__}.from_dict: field {f.name!r}: {exc}") from None
        return cls(**kwargs)

    def interval(self, name: str, level: float | None = None) -> Interval:
        """The interval of quantity ``name`` (``"b_crit"`` for ``b_crit_interval``) at
        confidence ``level`` (default: the level it was computed at), like scipy's
        ``confidence_interval(confidence_level)``. Another level is the percentile
        interval of the stored bootstrap draws (``draws``); a result without draws of
        ``name`` raises `UsageError` naming what it lacks."""
        stored = getattr(self, f"{name}_interval", None) if isinstance(name, str) else None
        if not isinstance(stored, Interval):
            fields: tuple[dataclasses.Field[Any], ...] = (
                dataclasses.fields(self) if dataclasses.is_dataclass(self) else ())
            names = sorted(f.name.removesuffix("_interval") for f in fields
                           if f.name.endswith("_interval"))
            raise InputError(f"name must name an interval of {type(self).__name__} "
                             f"({', '.join(map(repr, names)) or 'none'}), got {name!r}")
        if level is None:
            return stored
        from ._validate import check_level

        level = check_level(level)
        if level == stored.level:
            return stored
        draws = (getattr(self, "draws", None) or {}).get(name)
        if draws is None:
            raise UsageError(
                f"{type(self).__name__} stores no bootstrap draws of {name} (none were "
                f"drawn, the interval is not a percentile one, or the result was read back "
                f"from JSON): its interval is at level={stored.level:g} only; recompute it "
                f"with level={level:g}")
        values = np.asarray(draws, dtype=float)
        if values.size == 0:
            return Interval(math.nan, math.nan, level)
        low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
        return self._opened(name, Interval(float(low), float(high), level))

    def _opened(self, name: str, interval: Interval) -> Interval:
        """``interval`` as the result reports it (a subclass opens an end the data leave
        open)."""
        return interval

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
        """``to_dict()`` as strict JSON (see `dumps`), with the class under
        ``"result"`` (`RESULT_KEY`): `read_result` reads it back."""
        return dumps(self, **kwargs)

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

    ``to_frame()`` returns a copy of ``frame``; ``to_dict()`` gives the scalar fields,
    the values read from the table (``derived``: counts of its rows, properties of the
    subclass, never stored beside the table) and the rows as ``{"columns": [...],
    "rows": [[...], ...]}``. It is not a DataFrame (no ``obj["col"]``, ``len(obj)`` or
    ``obj.loc``): read its table as ``obj.frame``."""

    frame: pd.DataFrame = dataclasses.field(repr=False, compare=False)
    derived: ClassVar[tuple[str, ...]] = ()

    def to_frame(self) -> pd.DataFrame:
        """A copy of ``frame``."""
        return self.frame.copy()

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
               if f.name != "frame"}
        out |= {name: _plain(getattr(self, name)) for name in self.derived}
        return out | table_dict(self.frame)

    def _repr_html_(self) -> str | None:
        html: str | None = self.frame._repr_html_()  # type: ignore[operator]
        return html


def unwrap_table(obj: Any) -> Any:
    """``obj.frame`` for a `TableResult`, ``obj`` itself otherwise (for functions that
    take a DataFrame and now also take the result object that replaced it)."""
    return obj.frame if isinstance(obj, TableResult) else obj


def table_dict(frame: Any) -> dict[str, Any]:
    """A pandas table as ``{"columns": [...], "rows": [[...], ...]}`` (missing values,
    pandas' NA and NaN, as None), and ``"dtypes"`` for the columns of a pandas extension
    type (``Int64``, ``boolean``, ...), which reading back restores."""
    import pandas as pd

    cells = frame.astype(object).where(frame.notna(), None)
    out = {"columns": [str(c) for c in frame.columns],
           "rows": [[None if v is pd.NA else v for v in row]
                    for row in cells.to_numpy(dtype=object).tolist()]}
    extension = {str(c): str(t) for c, t in frame.dtypes.items()
                 if isinstance(t, pd.api.extensions.ExtensionDtype)}
    if extension:
        out["dtypes"] = extension
    return out


def _class_named(name: str) -> type[Result] | None:
    """The result class of a field annotation (``"TradeoffFit"``) or a JSON tag
    (``"module:Class"``), None for any other name."""
    if ":" in name:
        found = _CLASSES.get(name)
        module = name.partition(":")[0]
        if found is None and (module == "empirical_batch" or
                              module.startswith("empirical_batch.")):
            import importlib

            try:
                importlib.import_module(module)
            except ImportError:
                return None
            found = _CLASSES.get(name)
        return found
    matches = [c for tag, c in _CLASSES.items() if tag.rpartition(":")[2] == name]
    return matches[0] if len(matches) == 1 else None


def _maker(name: str) -> Callable[[Any], Any] | None:
    """How `Result.from_dict` makes a field of type ``name`` from its plain value: an
    `Interval` from ``{"low", "high", "level"}``, a result from its dict."""
    if name == "Interval":
        from ._revive import number

        return lambda v: Interval(number(v.get("low")), number(v.get("high")),
                                  number(v.get("level")))
    cls = _class_named(name)
    return None if cls is None else cls.from_dict


def read_result(source: str | os.PathLike[str] | Mapping[str, Any]) -> Result:
    """The result written by ``to_json``: ``source`` is the JSON text, a path to a file
    holding it, or the parsed dict. The class is the one named under ``"result"``
    (`RESULT_KEY`); JSON without it is a `DataError`.

    >>> from empirical_batch import Tradeoff
    >>> read_result(Tradeoff(s_min=100.0, e_min=6400.0).to_json())
    Tradeoff(s_min=100.0, e_min=6400.0)
    """
    from ._io import loads_json, read_json

    where = "the JSON text"
    if isinstance(source, Mapping):
        data: Any = source
    elif isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        try:
            data = loads_json(source, where)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DataError(f"{where}: not valid JSON ({type(exc).__name__}: {exc})") from None
    elif isinstance(source, str | os.PathLike):
        where = str(source)
        if not Path(source).is_file():
            raise InputError(f"source must be JSON text or a file holding it; no file "
                             f"{where!r}")
        data = read_json(source)
    else:
        raise InputError(f"source must be JSON text, a path or a dict, got "
                         f"{type(source).__name__}")
    tag = data.get(RESULT_KEY) if isinstance(data, Mapping) else None
    if not isinstance(tag, str):
        raise DataError(f"{where}: not a result's JSON (no {RESULT_KEY!r} key naming its "
                        "class; results write it with to_json)")
    cls = _class_named(tag)
    if cls is None:
        raise DataError(f"{where}: {RESULT_KEY!r} names no result class of the library: "
                        f"{tag!r}")
    return cls.from_dict(data)


def _plain(value: Any) -> Any:
    if hasattr(value, "columns") and hasattr(value, "iloc"):  # a pandas table
        return table_dict(value)
    if isinstance(value, Interval):
        return value.to_dict()
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def json_safe(x: Any) -> Any:
    """JSON-safe: numpy scalars to Python, tuples to lists, intervals and results to
    dicts, ``inf`` to ``"inf"``, NaN to ``None``."""
    if isinstance(x, Result):
        return json_safe({RESULT_KEY: _tag(type(x)), **x.to_dict()})
    if isinstance(x, Interval):
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
