"""Optional dependencies: where the package imports one, a missing package is one
`MissingDependencyError` naming the package and the extra that installs it.

>>> print(missing("sklearn", by="the digits task"))
the digits task needs scikit-learn: pip install 'empirical_batch[harness]'

Imports go in a ``with`` block, at module level (before the module's other imports) or
inside a function alike::

    with optional_import("sklearn", by="the digits task"):
        from sklearn.datasets import load_digits

`check_installed` asks without importing (a harness task checks its packages when it is
configured, before any training).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator

from .errors import MissingDependencyError

__all__ = ["EXTRAS", "check_installed", "missing", "optional_import"]

#: top-level module → (the package to install, the extra of ``empirical_batch`` holding it)
EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("torch", "torch"),
    "sklearn": ("scikit-learn", "harness"),
    "transformers": ("transformers", "hf"),
    "lightning": ("lightning", "lightning"),
    "accelerate": ("accelerate", "accelerate"),
    "deepspeed": ("deepspeed", "deepspeed"),
    "tbparse": ("tbparse", "tensorboard"),
    "distributed": ("Dask distributed", "distributed"),
    "ray": ("Ray", "distributed"),
}


def _top(module: str) -> str:
    return module.split(".")[0]


def missing(module: str, *, by: str, extra: str | None = None) -> MissingDependencyError:
    """The error for ``module`` absent where ``by`` (e.g. "the digits task") needs it;
    ``extra`` names another extra that also installs it (``"hf"`` for torch)."""
    top = _top(module)
    package, default = EXTRAS.get(top, (top, ""))
    extra = extra or default
    how = f"pip install 'empirical_batch[{extra}]'" if extra else f"pip install {package}"
    return MissingDependencyError(f"{by} needs {package}: {how}", name=top)


@contextlib.contextmanager
def optional_import(*modules: str, by: str, extra: str | None = None) -> Iterator[None]:
    """Run the imports of the ``with`` block; when one of ``modules`` (top-level names)
    or a submodule of one cannot be found, raise `missing` instead. Any other import
    failure (a broken installation, a package not named here) passes unchanged."""
    try:
        yield
    except ModuleNotFoundError as exc:
        top = _top(exc.name or "")
        if isinstance(exc, MissingDependencyError) or top not in map(_top, modules):
            raise
        raise missing(top, by=by, extra=extra) from None


def check_installed(module: str, *, by: str, extra: str | None = None) -> None:
    """Raise `missing` when ``module`` cannot be imported here (nothing is imported)."""
    try:
        found = importlib.util.find_spec(_top(module)) is not None
    except (ImportError, ValueError):  # e.g. a module without a spec
        found = False
    if not found:
        raise missing(module, by=by, extra=extra)
