"""The one check every loader makes of a path it reads as a file."""

from __future__ import annotations

from pathlib import Path


def a_file(path: Path, what: str) -> Path:
    """``path`` if it is an existing file; `FileNotFoundError` if it is missing and
    `IsADirectoryError` if it is a directory (both name it and what was expected)."""
    if not path.exists():
        raise FileNotFoundError(f"{what} not found: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a {what}")
    return path
