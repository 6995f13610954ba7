"""`empirical-batch simulate`."""

from __future__ import annotations


def add_parser(subparsers, name: str, help_text: str) -> None:
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(run=run)


def run(args) -> int:
    raise NotImplementedError("'empirical-batch simulate' is not built yet")
