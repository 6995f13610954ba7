"""Which files of an output folder the harness wrote, and the rule that keeps every other one.

A harness run writes a manifest (``OUT/manifest*.json``, a JSON object with the key
``harness_config``) that lists, relative to ``OUT``, every
file the run wrote or reused: sweeps, sweep groups, cached analysis stages, result
tables, figures, the report. Those files, and the manifests themselves, are the
harness's own; everything else in ``OUT`` is the user's, and

- the harness never writes over a user's file: a file it would write that exists
  and no manifest lists (a ``report.md`` of your own, a web app's ``manifest.json``)
  is refused with an error naming it, with or without ``--overwrite``;
- ``--overwrite`` (a folder holding another configuration's results) removes only the
  files that other run's manifests list, then the manifests; a notebook in
  ``OUT/results`` or any other file of yours stays.

A ``manifest*.json`` that is not a harness manifest (not JSON, or without that key)
is a user's file like any other. Manifests written before the files were listed
relative to ``OUT`` named them relative to the working directory of their run
(``data/harness/results/x.csv``); such an entry names the file of ``OUT`` that ends
with its longest tail (``results/x.csv``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

__all__ = ["FileGuard", "Manifest", "harness_manifests", "owned_files", "remove_owned"]


@dataclass(frozen=True)
class Manifest:
    path: Path
    data: dict

    @property
    def config(self):
        return self.data.get("harness_config")


def harness_manifests(out: Path) -> list[Manifest]:
    """The harness manifests in ``out`` (other ``manifest*.json`` files are not)."""
    found = []
    for path in sorted(out.glob("manifest*.json")):
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and "harness_config" in data:
            found.append(Manifest(path, data))
    return found


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def listed_paths(out: Path, entries: Iterable) -> set[Path]:
    """The files of ``out`` that manifest entries name (resolved; never outside ``out``)."""
    root = out.resolve()
    owned: set[Path] = set()
    for entry in entries:
        if not isinstance(entry, str) or not entry:
            continue
        p = Path(entry)
        # a relative entry (or an absolute one of a folder since moved or copied): the
        # file of ``out`` it names, read from its last parts
        parts = p.parts[1:] if p.is_absolute() else p.parts
        candidates = ([p] if p.is_absolute() else []) + [
            root / Path(*parts[k:]) for k in range(len(parts))]
        for c in candidates:
            c = c.resolve()
            if _inside(c, root) and c != root and c.is_file():
                owned.add(c)
                break
    return owned


def owned_files(out: Path, manifests: list[Manifest] | None = None) -> set[Path]:
    """Every file of ``out`` the harness wrote: the manifests and what they list."""
    manifests = harness_manifests(out) if manifests is None else manifests
    owned = {m.path.resolve() for m in manifests}
    for m in manifests:
        files = m.data.get("files")
        if isinstance(files, list):
            owned |= listed_paths(out, files)
    return owned


def remove_owned(out: Path, manifests: list[Manifest]) -> list[Path]:
    """Remove the files ``manifests`` list and the manifests themselves; then the folders
    that this leaves empty (up to ``out``). Returns the removed files."""
    root = out.resolve()
    removed = []
    for path in sorted(owned_files(out, manifests)):
        path.unlink()
        removed.append(path)
        parent = path.parent
        while parent != root and _inside(parent, root) and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    return removed


@dataclass
class FileGuard:
    """Refuses to write over a file of ``out`` that the harness does not own."""

    out: Path
    owned: set[Path] = field(default_factory=set)

    @classmethod
    def for_folder(cls, out: Path) -> FileGuard:
        return cls(out, owned_files(out) if out.is_dir() else set())

    def check(self, path: Path) -> None:
        path = Path(path)
        if path.exists() and path.resolve() not in self.owned:
            raise InputError(
                f"{path} exists and is not a file of this harness (no harness manifest in "
                f"{self.out} lists it): move it away or choose another --out; the harness "
                "never writes over a file it did not write")

    def check_all(self, paths: Iterable[Path]) -> None:
        for p in paths:
            self.check(p)

    def claim(self, path: Path) -> None:
        self.owned.add(Path(path).resolve())

    def relative(self, path: Path) -> str:
        """``path`` relative to ``out`` (as the manifests list it)."""
        p = Path(path).resolve()
        root = self.out.resolve()
        return p.relative_to(root).as_posix() if _inside(p, root) else str(path)
