"""`empirical-batch data`: the published data sets (`empirical_batch.datasets`).

``data list`` shows each data set, its licence and files, and whether a fetched file is
in the data folder; ``data fetch [NAME ...]`` downloads fetched files ahead of time (all,
or those of the named data sets or files), checked by SHA-256; ``data path FILE`` prints
where a file is used from (fetching it if needed), for use in other commands;
``data info NAME`` prints a data set's provenance.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import DatasetError, NotFoundError
from .output import command


def add_parser(subparsers, name: str, help_text: str) -> None:
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    home = argparse.ArgumentParser(add_help=False)
    home.add_argument("--data-home", type=Path, default=None,
                      help="the data folder (default: EMPIRICAL_BATCH_DATA, else the cache "
                           "folder)")
    actions.add_parser("list", parents=[home],
                       help="the data sets, their licences and files, and what is present")
    fetch = actions.add_parser("fetch", parents=[home],
                               help="download fetched files now (checked by SHA-256)")
    fetch.add_argument("names", nargs="*", metavar="NAME",
                       help="data sets or files to fetch (default: every fetched file)")
    fetch.add_argument("--refetch", action="store_true",
                       help="download again even if present (replaces a damaged copy)")
    path = actions.add_parser("path", parents=[home],
                              help="print where a file is used from (fetching it if needed)")
    path.add_argument("file", help="the file, as laid out in the data folder "
                                   "(e.g. tinyshakespeare/input.txt)")
    info = actions.add_parser("info", help="print a data set's provenance")
    info.add_argument("name", help="a data set (see `data list`)")
    parser.set_defaults(run=command(run))


def run(args) -> int:
    from .. import datasets

    if args.action == "info":
        print(datasets.provenance(args.name))
    elif args.action == "path":
        print(_path(datasets, args.file, args.data_home))
    elif args.action == "fetch":
        failed = 0
        for f in _selected(datasets, args.names):
            try:
                print(datasets.fetch(f, data_home=args.data_home, download=True,
                                     refetch=args.refetch))
            except DatasetError as exc:  # the other files are still fetched
                failed += 1
                print(f"empirical-batch data: error: {exc}", file=sys.stderr)
        return 2 if failed else 0
    else:
        _list(datasets, args.data_home)
    return 0


def _path(datasets, file: str, home: Path | None) -> Path:
    if file in datasets.FILES:
        return datasets.fetch(file, data_home=home)
    return datasets.bundled(file)


def _selected(datasets, names: list[str]) -> list[str]:
    if not names:
        return list(datasets.FILES)
    out = []
    for n in names:
        files = [f.path for f in datasets.FILES.values() if n in (f.path, f.dataset)]
        if not files:
            fetched = sorted({f.dataset for f in datasets.FILES.values()})
            raise NotFoundError(f"nothing to fetch for {n!r}: data sets with fetched files are "
                                f"{', '.join(fetched)} (the others ship with the package)")
        out += [f for f in files if f not in out]
    return out


def _list(datasets, home: Path | None) -> None:
    folder = datasets.get_data_home(home)
    print(f"data folder: {folder}")
    for name, p in datasets.PROVENANCE.items():
        print(f"{name}  ({p.licence})  {p.title}")
        for f in p.files:
            if f.endswith("(shipped)"):
                print(f"    {f}")
        for entry in datasets.FILES.values():
            if entry.dataset == name:
                there = ("in the data folder" if (folder / entry.path).is_file()
                         else "not yet fetched")
                print(f"    {entry.path} ({entry.size_text}, {there})")
