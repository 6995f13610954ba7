"""Where published data files are found, how missing ones are fetched, and the checksum
that every fetched file must pass.

Small, licence-compatible files ship inside the package (`bundled`). Larger ones
(`empirical_batch.datasets.registry.FILES`) are looked for in one data folder
(`get_data_home`), chosen in this order:

1. the ``data_home=`` argument;
2. the environment variable ``EMPIRICAL_BATCH_DATA`` (a local copy of the published
   data, in their usual layout: ``tinyshakespeare/input.txt``, ...);
3. the user's cache folder (``~/.cache/empirical_batch`` on Linux, as
   ``pooch.os_cache`` chooses).

A file that is not there is downloaded with `pooch` (from ``EMPIRICAL_BATCH_DATA_URL``,
a mirror holding the same layout, when set, then from its upstream address), checked
against its SHA-256 and kept. A file that is there is checked every time it is used: a
damaged or other version is refused, never silently replaced or used. Downloads are off
with ``download=False`` or ``EMPIRICAL_BATCH_OFFLINE=1``; a missing file is then one
`~empirical_batch.errors.DatasetError` naming the file, its URL and where to put it.
"""

from __future__ import annotations

import os
from pathlib import Path

from .._io import file_sha256
from ..errors import DatasetError, NotFoundError
from .registry import FILES, DataFile

__all__ = ["DATA_ENV", "OFFLINE_ENV", "URL_ENV", "bundled", "fetch", "get_data_home", "locate"]

#: environment variable naming the data folder
DATA_ENV = "EMPIRICAL_BATCH_DATA"
#: environment variable naming a mirror (base URL) of the data folder's layout
URL_ENV = "EMPIRICAL_BATCH_DATA_URL"
#: environment variable that turns downloads off ("1", "true" or "yes")
OFFLINE_ENV = "EMPIRICAL_BATCH_OFFLINE"

_FILES_DIR = Path(__file__).resolve().parent / "files"


def get_data_home(data_home: str | os.PathLike[str] | None = None) -> Path:
    """The folder where fetched files are looked for and kept: ``data_home``, else
    ``EMPIRICAL_BATCH_DATA``, else the user's cache folder for ``empirical_batch``."""
    if data_home is not None:
        return Path(data_home).expanduser()
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    import pooch

    return Path(pooch.os_cache("empirical_batch"))


def bundled(path: str) -> Path:
    """The package's own copy of a shipped file (``path`` in the data layout)."""
    full = _FILES_DIR / path
    if not full.exists():
        raise NotFoundError(f"{path!r} is not a file shipped with empirical_batch "
                            f"(shipped: {', '.join(sorted(_shipped()))})")
    return full


def _shipped() -> list[str]:
    return [p.relative_to(_FILES_DIR).as_posix() for p in _FILES_DIR.rglob("*")
            if p.is_file() and p.name != "LICENSE"]


def _entry(path: str) -> DataFile:
    try:
        return FILES[path]
    except KeyError:
        raise NotFoundError(f"{path!r} is not a published data file the library fetches "
                            f"(known: {', '.join(sorted(FILES))})") from None


def _downloads_on(download: bool | None) -> bool:
    if download is not None:
        return bool(download)
    return os.environ.get(OFFLINE_ENV, "").strip().lower() not in ("1", "true", "yes")


def locate(path: str, *, data_home: str | os.PathLike[str] | None = None) -> Path | None:
    """Where ``path`` would be used from, if it is already in the data folder (checked
    against its SHA-256); ``None`` if it is not there. Downloads nothing."""
    entry = _entry(path)
    target = get_data_home(data_home) / entry.path
    if not target.is_file():
        return None
    _verify(target, entry)
    return target


def fetch(path: str, *, data_home: str | os.PathLike[str] | None = None,
          download: bool | None = None, refetch: bool = False) -> Path:
    """The local file of the published data file ``path`` (see `FILES`), downloading it
    into the data folder when it is not there.

    Parameters
    ----------
    path : str
        The file, as laid out in the data folder (e.g. ``"tinyshakespeare/input.txt"``).
    data_home : path, optional
        The data folder (default: ``EMPIRICAL_BATCH_DATA``, else the cache folder).
    download : bool, optional
        Whether a missing file may be downloaded (default: yes, unless
        ``EMPIRICAL_BATCH_OFFLINE`` is set).
    refetch : bool
        Download the file again even if it is there (a damaged copy is replaced).

    Raises
    ------
    DatasetError
        The file is missing and cannot be downloaded (the message says from where and
        where to put it), or its bytes fail the SHA-256 check.
    """
    entry = _entry(path)
    home = get_data_home(data_home)
    target = home / entry.path
    if target.is_file() and not refetch:
        _verify(target, entry)
        return target
    urls = _urls(entry)
    if not _downloads_on(download):
        raise DatasetError(_missing(entry, home, "downloads are off (download=False or "
                                                 f"{OFFLINE_ENV})"))
    if not urls:
        raise DatasetError(_missing(entry, home, "it has no single-file download (a table "
                                                 "derived from many upstream files) and "
                                                 f"{URL_ENV} names no mirror"))
    failures = []
    for url in urls:
        try:
            _download(url, entry, target, replace=refetch)
        except Exception as exc:  # any network or checksum failure: try the next address
            failures.append(f"{url}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
            continue
        return target
    raise DatasetError(_missing(entry, home, "the download failed (" + "; ".join(failures)
                                + ")"))


def _urls(entry: DataFile) -> list[str]:
    mirror = os.environ.get(URL_ENV, "").strip()
    urls = [mirror.rstrip("/") + "/" + entry.path] if mirror else []
    return urls + ([entry.url] if entry.url else [])


def _download(url: str, entry: DataFile, target: Path, *, replace: bool) -> None:
    import pooch

    target.parent.mkdir(parents=True, exist_ok=True)
    if replace and target.exists():
        target.unlink()
    # pooch downloads to a temporary file, checks the hash, then moves it into place
    pooch.retrieve(url, known_hash=f"sha256:{entry.sha256}", fname=target.name,
                   path=target.parent, progressbar=True)


def _verify(target: Path, entry: DataFile) -> None:
    size = target.stat().st_size
    digest = file_sha256(target) if size == entry.size else None
    if digest == entry.sha256:
        return
    got = f"{size:,} bytes" if digest is None else f"sha256 {digest}"
    raise DatasetError(
        f"{target} fails its SHA-256 check ({got}; expected {entry.size:,} bytes with sha256 "
        f"{entry.sha256}): the file is damaged or another version. Delete it and load the "
        f"data set again to download it afresh, or call "
        f"empirical_batch.datasets.fetch({entry.path!r}, refetch=True)")


def _missing(entry: DataFile, home: Path, why: str) -> str:
    where = entry.url or f"a mirror of the published data ({URL_ENV})"
    return (f"{entry.path} ({entry.size_text}, data set {entry.dataset!r}) is not in the data "
            f"folder {home} and was not downloaded: {why}. Get it from {where} "
            f"(sha256 {entry.sha256}) and put it at {home / entry.path}, or point "
            f"{DATA_ENV} (or data_home=) at a folder that holds {entry.path}")
