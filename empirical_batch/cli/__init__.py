"""The ``empirical-batch`` command.

Each sub-command lives in its own module of this package and provides
``add_parser(subparsers)`` and ``run(args) -> int``. Errors a user can fix
(bad path, bad column, unreachable target, a device that is not there) print one
line and exit with status 2, never a traceback; ``EMPIRICAL_BATCH_TRACEBACK=1``
shows the traceback instead (for bug reports). Ctrl-C exits with status 130.

Only the library's own errors (:class:`~empirical_batch.errors.EmpiricalBatchError`)
and ``OSError`` (a file that cannot be read or written) are user errors: any other
exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from empirical_batch.errors import EmpiricalBatchError

COMMANDS = {
    "demo": "Run the built-in demo: theory, tradeoff, simulation and a plan (no GPU, no data).",
    "fit": "Fit the critical batch size to a sweep log (CSV/Parquet).",
    "simulate": "Simulate a batch-size sweep on a noisy quadratic problem.",
    "plan": "Choose batch size and device count from a tradeoff: time, cost, Pareto frontier.",
    "harness": "Run the validation harness: real training sweeps against the noise scale.",
    "schedule": "Design a batch-size schedule (App. D, doubling, Seesaw) and export it.",
    "transfer": "Move hyperparameters to another batch size: rules, citations, regimes.",
    "law": "Batch-size laws over model size and tokens: fit, list, predict the next run's batch.",
    "data": "The published data sets: list them, fetch them ahead of time, print a file's path.",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="empirical-batch",
        description=(
            "How large a batch can a training run use? Tools from McCandlish et al. (2018), "
            "'An Empirical Model of Large-Batch Training'."
        ),
    )
    from empirical_batch import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"{__name__}.{name}")
        module.add_parser(sub, name, help_text)
    return parser


def _message(exc: BaseException) -> str:
    """One line for a user error: the exception's text, with the file it concerns."""
    if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in str(exc):
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"empirical-batch {args.command}: interrupted", file=sys.stderr)
        return 130
    except (EmpiricalBatchError, OSError) as exc:
        if os.environ.get("EMPIRICAL_BATCH_TRACEBACK"):
            raise
        print(f"empirical-batch {args.command}: error: {_message(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
