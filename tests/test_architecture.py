"""The package's structure holds: one exception tree, small modules, layered imports
without circles, and a typed top level. The layers are written down in docs/design.md."""

from __future__ import annotations

import ast
import builtins
import importlib
import pkgutil
from pathlib import Path

import pytest

import empirical_batch
from empirical_batch.errors import EmpiricalBatchError, EmpiricalBatchWarning

PACKAGE = Path(empirical_batch.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# ---------------------------------------------------------------- exceptions

# builtin exceptions the library may still raise on purpose: OSError and its kin for files
# (the command line reports them like the library's own errors); NotImplementedError for
# abstract methods; ImportError for a missing optional package (Python's convention);
# AssertionError in unreachable branches; symbolic.py's self-check of a derivation (a
# failure there is a bug, not a user error)
_ALLOWED_BUILTIN_RAISES = {
    "ImportError", "AssertionError",
    "OSError", "FileNotFoundError", "IsADirectoryError", "NotADirectoryError",
    "FileExistsError", "PermissionError", "NotImplementedError", "AttributeError",
    "KeyboardInterrupt", "StopIteration",
}
_SELF_CHECKS = {("empirical_batch.symbolic", "RuntimeError")}


def _raised_builtins(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and isinstance(getattr(builtins, exc.id, None), type) \
                    and issubclass(getattr(builtins, exc.id), BaseException):
                yield exc.id, node.lineno


def test_no_bare_builtin_raise():
    found = []
    for path in SOURCES:
        mod = _module_name(path)
        for name, line in _raised_builtins(ast.parse(path.read_text())):
            if name not in _ALLOWED_BUILTIN_RAISES and (mod, name) not in _SELF_CHECKS:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: raise {name}")
    assert not found, "raise the library's errors (empirical_batch.errors):\n" + "\n".join(found)


def test_every_warning_has_a_library_category():
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "warn" and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == "warnings":
                category = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "category"), None)
                if category is None or (isinstance(category, ast.Name)
                                        and category.id in dir(builtins)):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not found, "warnings.warn without a library category:\n" + "\n".join(found)


def _all_modules():
    names = [empirical_batch.__name__]
    for info in pkgutil.walk_packages(empirical_batch.__path__, "empirical_batch."):
        if not info.name.endswith("__main__"):  # importing it runs the command line
            names.append(info.name)
    return names


def test_every_exception_class_derives_from_the_tree():
    pytest.importorskip("torch")
    stray = []
    for name in _all_modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional integration whose package is missing
            continue
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, BaseException) \
                    and obj.__module__.startswith("empirical_batch") \
                    and not issubclass(obj, EmpiricalBatchError | EmpiricalBatchWarning):
                stray.append(f"{obj.__module__}.{obj.__qualname__}")
    assert not stray, stray


# ------------------------------------------------------------- module sizes

MAX_LINES = 600


def test_no_module_over_600_lines():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in SOURCES
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules (> {MAX_LINES} lines): {long}"
