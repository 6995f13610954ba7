"""The commands' output layer: machine-readable output (``--json``, ``--csv``; `dumps`
is `empirical_batch.result.dumps`) and the wrapper every sub-command's ``run`` goes
through (`command`: no input file overwritten,
each warning once on one line, a closed pipe ends the command quietly)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import math
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..result import dumps

__all__ = ["add_tokens_per_example", "check_no_overwrite", "command", "dumps", "level",
           "positive_number", "read_fits"]


# --- the commands' run wrapper: no input overwritten, warnings once, quiet closed pipe ---

def _same_file(a: Path, b: Path) -> bool:
    """Whether the paths name one file: equal once resolved, or (both existing) the same
    inode (a hard link, a symbolic link, a different spelling)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return False


def check_no_overwrite(args: Any, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> None:
    """Refuse a run whose output path is one of its input files.

    ``inputs`` and ``outputs`` name attributes of the parsed ``args`` that hold paths
    (``None`` when not given). Raises `InputError` naming both options when an output
    would replace an input, before anything is written.
    """
    given = [(n, Path(getattr(args, n))) for n in inputs if getattr(args, n, None) is not None]
    for out_name in outputs:
        out = getattr(args, out_name, None)
        if out is None:
            continue
        for in_name, path in given:
            if _same_file(Path(out), path):
                raise InputError(
                    f"{_flag(out_name)} {out} is the file given as {_flag(in_name)}: writing "
                    "there would replace an input; choose another output path")


def _flag(name: str) -> str:
    return name if name == "sweep" else "--" + name.replace("_", "-")


class _Recorder(io.TextIOBase):
    """A pass-through for stdout that remembers the lines it printed as warnings
    (``warning: MESSAGE``, as the fits' summaries print them)."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.seen: list[str] = []

    def write(self, text: str) -> int:
        if "warning:" in text:
            for line in text.splitlines():
                head, sep, rest = line.strip().partition("warning:")
                if sep and not head:
                    self.seen.append(_one_line(rest))
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def __getattr__(self, name: str) -> Any:  # encoding, buffer, ...: the stream's own
        return getattr(self.stream, name)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


# --- flags shared by several commands, and renamed flags --------------------------------

def positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def level(text: str) -> float:
    """An argparse type: a confidence level in (0, 1), refused in the flag's words."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") \
            from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1) (e.g. 0.95), got {text!r}")
    return value


def add_tokens_per_example(parser: Any, what: str) -> None:
    """``--tokens-per-example``: tokens per example (sequence), ``what`` it converts."""
    parser.add_argument("--tokens-per-example", type=positive_number,
                        metavar="T", help=f"tokens per example (sequence), {what}; a "
                        "noise log's measured per-token values (b_simple_tokens) are "
                        "used where it has them")


def _one_line(message: str) -> str:
    return " ".join(message.split())


def command(run: Callable[[Any], int], *, inputs: tuple[str, ...] = (),
            outputs: tuple[str, ...] = ()) -> Callable[[Any], int]:
    """Wrap a sub-command's ``run(args)`` with what every command owes its user.

    - no output path (``outputs``) is one of the input files (``inputs``):
      `check_no_overwrite` refuses such a run before it starts;
    - each warning the run raises is printed once, as one line
      ``empirical-batch COMMAND: warning: MESSAGE`` on stderr, without source lines,
      and not at all when the command's own output already printed it;
    - a reader that closes the pipe early (``| head -1``) ends the command quietly
      with status 141 (128 + SIGPIPE), as a shell tool killed by SIGPIPE does: the rest
      of the output is sent to ``os.devnull`` (the Python documentation's "Note on
      SIGPIPE").
    """

    @functools.wraps(run)
    def wrapped(args: Any) -> int:
        check_no_overwrite(args, inputs, outputs)
        prog = f"empirical-batch {getattr(args, 'command', None) or run.__module__}"
        recorder = _Recorder(sys.stdout)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    with contextlib.redirect_stdout(recorder):
                        code = int(run(args) or 0)
                finally:
                    _print_warnings(prog, caught, recorder.seen)
            sys.stdout.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 141
        return code

    return wrapped


def _print_warnings(prog: str, caught: list[warnings.WarningMessage], shown: list[str]) -> None:
    printed = set(shown)
    done: set[tuple[type, str]] = set()
    for w in caught:
        text = _one_line(str(w.message))
        key = (w.category, text)
        if key in done:
            continue
        done.add(key)
        if text in printed:
            continue
        print(f"{prog}: warning: {text}", file=sys.stderr)


# --- the fits of `empirical-batch fit --json`, read back ---------------------------------

def read_fits(path: Path) -> tuple[list[Any], str]:
    """The fits of an ``empirical-batch fit --json`` document (each a `TradeoffFit` read
    back by `read_result`, None for a target not fitted) and their unit; a document of
    fits of several groups (``fit --group-by``) is refused."""
    from .._io import read_json
    from ..errors import DataError
    from ..fit import TradeoffFit
    from ..result import read_result

    data = read_json(path)
    fits = data.get("fits") if isinstance(data, dict) else None
    if not isinstance(fits, list):
        raise DataError(f"{path}: not `empirical-batch fit --json` output (expected an "
                        "object with a list of fits under 'fits')")
    groups = [f["group"] for f in fits if isinstance(f, dict) and f.get("group")]
    if len(groups) > 1:
        raise InputError(f"{path}: one fit per group ({groups[0]}, {groups[1]}, ...): use "
                         "one experiment's fits; fit it alone with --where")
    out: list[Any] = []
    for i, entry in enumerate(fits):
        try:
            fit = None if entry is None else read_result(entry)
        except DataError as exc:
            raise DataError(f"{path}: fit {i} is not `empirical-batch fit --json` output "
                            f"({exc})") from None
        if fit is not None and not isinstance(fit, TradeoffFit):
            raise DataError(f"{path}: fit {i} is a {type(fit).__name__}, not a TradeoffFit")
        out.append(fit)
    units = {f.unit for f in out if f is not None}
    if len(units) > 1:
        raise InputError(f"{path}: fits in several units {sorted(units)}")
    return out, units.pop() if units else str(data.get("unit", "examples"))
