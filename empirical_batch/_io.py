"""The library's edge with files: atomic writes and checked table reads.

Writes go to a temporary file in the target's folder, then a rename: an interrupted
run never leaves a valid-looking prefix of a file behind; the target either keeps its
old content or gets the whole new one.

Reads of user files (`read_csv`, `read_json`) turn what pandas raises on a bad file (empty,
malformed, not UTF-8) into :class:`~empirical_batch.errors.DataError` naming the file,
so a bad file is a user error and a bug elsewhere is not mistaken for one. A number
written past the float range (``1e400``, which a parser turns into ``inf`` without a
word) is refused naming the file, row and column (`check_float_range`; JSON:
`loads_json`); a literal ``inf``/``Infinity`` stays what it says.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import DataError, InputError

__all__ = ["atomic_path", "atomic_write", "atomic_write_text", "check_float_range",
           "file_sha256", "loads_json", "read_csv", "read_json"]

# the process's umask, read once at import (reading it means setting it); a new file gets
# the permissions a plain open() would give it (mkstemp's are 0600)
_UMASK = os.umask(0o022)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    For writers that want a file name (``DataFrame.to_csv``, ``Figure.savefig``).
    The temporary file keeps ``path``'s suffix so that format detection works. The
    result has ``path``'s permissions if it existed, else those ``open()`` would give.
    On an exception the temporary file is removed and ``path`` is untouched.
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a directory, not a file")
    fd, tmp = tempfile.mkstemp(
        dir=target.parent or ".", prefix=f".{target.name}.", suffix=f".tmp{target.suffix}"
    )
    os.close(fd)
    try:
        yield Path(tmp)
        try:  # an existing file keeps its permissions, a new one gets the umask's
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_UMASK
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str], mode: str = "w", **open_kwargs: Any
) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; rename it on success."""
    if "r" in mode or "a" in mode or "+" in mode:
        raise InputError(f"atomic_write writes a whole new file; mode {mode!r} is not allowed")
    with atomic_path(path) as tmp, open(tmp, mode, **open_kwargs) as fh:
        yield fh


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically and return the path."""
    with atomic_write(path, "w", encoding=encoding) as fh:
        fh.write(text)
    return Path(path)


def read_csv(path: str | os.PathLike[str], **kwargs: Any) -> Any:
    """``pandas.read_csv(path, **kwargs)``; a file pandas cannot parse raises `DataError`
    naming the file (empty, malformed rows, not UTF-8)."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, **kwargs)
        check_float_range(frame, path, **kwargs)
        return frame
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty (no header, no rows)") from None
    except pd.errors.ParserError as exc:
        raise DataError(f"{path}: malformed table ({' '.join(str(exc).split())})") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                        "re-save it as UTF-8") from None


_INFINITY = {"inf", "infinity", "+inf", "+infinity", "-inf", "-infinity"}
_FLOAT_MAX = "1.8e308"


def check_float_range(frame: Any, path: str | os.PathLike[str], **read_kwargs: Any) -> None:
    """Refuse a number of the CSV ``path`` (read into ``frame`` with ``read_kwargs``)
    that lies past the float range: pandas reads ``1e400`` as ``inf``, which a sweep
    would take for a diverged run. Only columns holding an infinity are read again, as
    text, to tell such a number from a written ``inf``."""
    import numpy as np

    cols = [c for c in frame.columns
            if frame[c].dtype.kind == "f" and bool(np.isinf(frame[c].to_numpy()).any())]
    if not cols:
        return
    import pandas as pd

    keep = {k: v for k, v in read_kwargs.items()
            if k not in ("dtype", "converters", "keep_default_na", "na_values", "usecols")}
    text = pd.read_csv(path, dtype=str, keep_default_na=False, **keep)
    for col in cols:
        for i in np.flatnonzero(np.isinf(frame[col].to_numpy())):
            cell = str(text[col].iloc[i]).strip()
            if cell.lower() not in _INFINITY:
                raise DataError(f"{path}, row {int(i)}, column {col!r}: {cell} is past the "
                                f"float range (|x| <= {_FLOAT_MAX}); write it within the "
                                "range, or inf for an infinity")


def _finite_float(text: str) -> float:
    import math

    value = float(text)
    if math.isinf(value):
        raise DataError(f"the number {text} is past the float range (|x| <= {_FLOAT_MAX}); "
                        "write it within the range")
    return value


def loads_json(text: str, label: str) -> Any:
    """``json.loads(text)``, refusing a number past the float range (``1e400``, which
    Python reads as ``inf``) with a `DataError` naming ``label`` (the file, the line) and
    the number as written. Errors of the JSON itself propagate as ``json`` raises them."""
    import json

    try:
        return json.loads(text, parse_float=_finite_float)
    except DataError as exc:
        raise DataError(f"{label}: {exc}") from None


def numeric_columns(frame: Any, columns: Any, label: str) -> Any:
    """A copy of ``frame`` with ``columns`` (those present) as floats; a cell that is not
    a number (text, a boolean) raises `DataError` naming ``label`` (the file), the row
    and the column, and the cell as written. Empty cells stay NaN."""
    import numpy as np
    import pandas as pd

    out = frame.copy()
    for col in columns:
        if col not in out.columns:
            continue
        raw = out[col]
        num = pd.to_numeric(raw, errors="coerce")
        bad = (num.isna() & raw.notna()) | raw.map(lambda v: isinstance(v, bool | np.bool_))
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            raise DataError(f"{label}, row {i}, column {col!r}: not a number: "
                            f"{raw.iloc[i]!r}")
        out[col] = num.astype(float)
    return out


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON document in ``path``; a file that is not UTF-8 JSON raises `DataError`
    naming the file."""
    import json

    try:
        return loads_json(Path(path).read_text(encoding="utf-8"), str(path))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"{path}: not valid JSON ({type(exc).__name__}: {exc})") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of the file's bytes (read in 1 MiB blocks)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
