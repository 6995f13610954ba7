"""The library's exceptions and warnings, in one tree.

Every error the library raises on purpose derives from :class:`EmpiricalBatchError`,
and every warning from :class:`EmpiricalBatchWarning`. The command line turns these
(and ``OSError``) into one-line messages; any other exception is a bug and keeps its
traceback.

``InputError`` also derives from the builtin ``ValueError`` and ``TypeError``, so code
written against the builtins (``except ValueError``) keeps working.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = [
    "DataError",
    "DatasetError",
    "EmpiricalBatchDeprecationWarning",
    "EmpiricalBatchError",
    "EmpiricalBatchWarning",
    "FitError",
    "InputError",
    "MissingDependencyError",
    "NotFoundError",
    "UsageError",
]


class EmpiricalBatchError(Exception):
    """Base of every error the library raises on purpose."""


class InputError(EmpiricalBatchError, ValueError, TypeError):
    """An argument or value is not valid; the message names it and says what is wrong."""


class DataError(InputError):
    """A table, log or file does not hold what the library needs (a column, a schema)."""


class DatasetError(DataError):
    """A published data file is missing and cannot be fetched, or its bytes fail their
    SHA-256 check (`empirical_batch.datasets`); the message names the file, where it was
    looked for, its URL and how to get it."""


class NotFoundError(EmpiricalBatchError, KeyError):
    """A name asked for (a column, a task, a value) is not there; the message lists what is."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UsageError(EmpiricalBatchError, RuntimeError):
    """A call out of order or in a state that cannot serve it (e.g. ``step()`` before any
    backward pass), or an optional dependency that the call needs is missing
    (`MissingDependencyError`)."""


class MissingDependencyError(UsageError, ModuleNotFoundError):
    """An optional package that the call needs is not installed; the message names it and
    the extra that installs it (``pip install 'empirical_batch[harness]'``). Also a
    ``ModuleNotFoundError`` (``name`` is the missing module), so ``except ImportError``
    keeps working."""

    def __init__(self, message: str, *, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class FitError(EmpiricalBatchError, ValueError):
    """Valid data from which the requested fit cannot be made (e.g. too few batch sizes)."""


class EmpiricalBatchWarning(UserWarning):
    """Base of every warning the library issues."""


class EmpiricalBatchDeprecationWarning(EmpiricalBatchWarning, DeprecationWarning):
    """A name or behaviour that goes in a later release (also a ``DeprecationWarning``,
    so Python's default filters show it to code under development, not to end users)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str, category: type[Warning] = EmpiricalBatchWarning) -> None:
    """Issue ``message`` as ``category``, attributed to the first caller outside the
    library: the warning names the user's line, not the library function (or wrapper)
    it passed through, however deep the call (``warnings.warn``'s ``stacklevel`` counted
    here, as ``skip_file_prefixes`` does from Python 3.12)."""
    frame, level = sys._getframe(1), 2  # level 2: warn's caller
    while frame.f_back is not None and os.path.abspath(
            frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
