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
from typing import Any

from .errors import InputError, MissingDependencyError

__all__ = ["EXTRAS", "check_installed", "missing", "optional_import", "torch_device"]

#: top-level module → (the package to install, the extra of ``empirical_batch`` holding it)
EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("torch", "torch"),
    "sklearn": ("scikit-learn", "harness"),
    "transformers": ("transformers", "hf"),
    "lightning": ("lightning", "lightning"),
    "accelerate": ("accelerate", "accelerate"),
    "deepspeed": ("deepspeed", "deepspeed"),
    "olmo_core": ("ai2-olmo-core", "olmo-core"),
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


# Any: a string or a torch.device in, a torch.device out; torch is optional and this
# module imports it only when called (tests/test_optional_deps.py), not for type checkers
def torch_device(device: Any, name: str = "device") -> Any:
    """``device`` (a string or a ``torch.device``) as a ``torch.device`` this build and
    machine can use: an unknown name, or CUDA/MPS where there is none, is an `InputError`
    in words (not PyTorch's message about how the library was built)."""
    with optional_import("torch", by=f"{name}={device!r}"):
        import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise InputError(f"{name} must be a torch device such as 'cpu' or 'cuda', got "
                         f"{device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"{name}={device!r}: no CUDA device is available here (this torch "
                         f"build or machine has none); use {name}='cpu'")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InputError(f"{name}={device!r}: there are {torch.cuda.device_count()} CUDA "
                         "devices")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"{name}={device!r}: no MPS device is available here; use "
                         f"{name}='cpu'")
    return dev
