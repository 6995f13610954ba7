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


# ------------------------------------------------------------ import layers

# Each module's layer (docs/design.md, "Layers"): a module imports from its own layer
# or below, never above; a subpackage's modules share its layer. Prefix match, longest
# first.
LAYERS: dict[str, int] = {
    # 0 ground floor: no library imports but these
    "empirical_batch": 0,  # the package's lazy facade (the version, a name table)
    "empirical_batch.errors": 0,
    "empirical_batch.result": 0,
    "empirical_batch._validate": 0,
    "empirical_batch._io": 0,
    "empirical_batch._optional": 0,
    "empirical_batch._frozen": 0,
    "empirical_batch._numeric": 0,
    "empirical_batch.params": 0,
    "empirical_batch.units": 0,
    "empirical_batch.provenance": 0,
    # 1 theory: closed forms of the paper
    "empirical_batch.one_step": 1,
    "empirical_batch.quadratic_model": 1,
    "empirical_batch.theory": 1,
    "empirical_batch.symbolic": 1,
    "empirical_batch.definitions": 1,
    # 2 models and data: the tradeoff, the estimators, the rules, the sweep schema
    "empirical_batch.tradeoff": 2,
    "empirical_batch.estimators": 2,
    "empirical_batch.estimator_state": 2,
    "empirical_batch.throughput": 2,
    "empirical_batch.branched": 2,
    "empirical_batch.rules": 2,
    "empirical_batch.sweeps": 2,
    "empirical_batch.noise_log": 2,
    # 3 analysis: fits, the simulator, planning, transfer, schedules, loaders
    "empirical_batch.fit": 3,
    "empirical_batch.simulate": 3,
    "empirical_batch.planning": 3,
    "empirical_batch.budget": 3,
    "empirical_batch.transfer": 3,
    "empirical_batch.schedule": 3,
    "empirical_batch.loaders": 3,
    "empirical_batch.laws": 3,
    "empirical_batch.datasets": 3,
    # 4 measurement in training (torch)
    "empirical_batch.measure": 4,
    # 5 figures and framework callbacks
    "empirical_batch.plot": 5,
    "empirical_batch.integrations": 5,
    # 6 the validation harness
    "empirical_batch.harness": 6,
    # 7 the validation study, a user of the harness
    "empirical_batch.validation": 7,
    # 8 the command line
    "empirical_batch.cli": 8,
    "empirical_batch.__main__": 8,
}

# circles still open, each to be removed with the work that breaks it; an entry that is
# no longer a circle fails the test, so the list only shrinks
KNOWN_CIRCLES: set[frozenset[str]] = set()


def layer_of(module: str) -> int:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or (module.startswith(prefix + ".") and prefix != "empirical_batch"):
            return LAYERS[prefix]
    raise AssertionError(f"{module} has no layer: add it to LAYERS and docs/design.md")


def import_graph() -> dict[str, set[str]]:
    """Every import between the package's modules (module level, inside functions and
    under TYPE_CHECKING alike), resolved to module files."""
    modules = {_module_name(p): p for p in SOURCES}

    def targets(current: str, node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = current.split(".")
        if modules[current].name != "__init__.py":
            base = base[:-1]
        if node.level:
            base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, *([node.module] if node.module else [])])
        else:
            target = node.module or ""
        return [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                for a in node.names]

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for t in targets(name, node):
                    while t not in modules and "." in t:
                        t = t.rsplit(".", 1)[0]
                    if t in modules and t != name:
                        deps.add(t)
        graph[name] = deps
    return graph


def test_every_module_has_a_layer():
    for name in import_graph():
        layer_of(name)


def test_no_import_against_the_layers():
    wrong = [f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
             for a, deps in import_graph().items() for b in deps
             if layer_of(b) > layer_of(a)]
    assert not wrong, "\n".join(sorted(wrong))


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    found = {frozenset(c) for c in _circles(import_graph())}
    assert found - KNOWN_CIRCLES == set(), sorted(map(sorted, found - KNOWN_CIRCLES))
    assert KNOWN_CIRCLES - found == set(), "circle gone: remove it from KNOWN_CIRCLES"


def test_the_circle_check_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
