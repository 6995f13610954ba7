"""Atomic file writes: a temporary file in the target's folder, then a rename.

An interrupted run never leaves a valid-looking prefix of a file behind: the
target either keeps its old content or gets the whole new one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .errors import InputError

__all__ = ["atomic_path", "atomic_write", "atomic_write_text"]

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
    path: str | os.PathLike[str], mode: str = "w", **open_kwargs
) -> Iterator[IO]:
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
