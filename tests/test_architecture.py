"""The package's structure holds: one exception tree, small modules, layered imports
without circles, and a typed top level. The layers are written down in docs/design.md."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import re
import textwrap
from pathlib import Path

import pytest

import empirical_batch
from empirical_batch.errors import EmpiricalBatchError, EmpiricalBatchWarning

PACKAGE = Path(empirical_batch.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
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


DESIGN = PACKAGE.parent / "docs" / "design.md"


def _library_exception_classes(package: Path = PACKAGE) -> dict[str, tuple[str, str | None]]:
    """Every exception and warning class the package defines, read from the sources
    (torch-only modules included): name -> (module, its base in the library's tree or
    None for the two roots)."""
    from empirical_batch import errors

    roots = {errors.EmpiricalBatchError.__name__, errors.EmpiricalBatchWarning.__name__}
    defs = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                         if isinstance(b, ast.Name | ast.Attribute)]
                defs.append((node.name, _module_name(path, package), bases))
    found: dict[str, tuple[str, str | None]] = {}
    grew = True
    while grew:  # a class is in the tree once one of its bases is
        grew = False
        for name, module, bases in defs:
            if name in found:
                continue
            if module == errors.__name__ and name in roots:
                found[name] = (module, None)
                grew = True
            elif (base := next((b for b in bases if b in found), None)) is not None:
                found[name] = (module, base)
                grew = True
    modules_of = {}
    for name, module, _ in defs:
        modules_of.setdefault(name, set()).add(module)
    clash = {n: m for n, m in modules_of.items() if n in found and len(m) > 1}
    assert not clash, f"one name, one exception class: {clash}"
    return found


def _design_tree(design: Path = DESIGN) -> dict[str, str | None]:
    """The exception tree drawn in docs/design.md: class name -> the class it is drawn
    under (None at the left margin)."""
    text = design.read_text()
    section = text[text.index("## Exceptions and warnings"):]
    block = section[section.index("```\n") + 4:]
    block = block[: block.index("```")]
    parents: dict[str, str | None] = {}
    last_at: dict[int, str] = {}
    for line in block.splitlines():
        # a class at the margin, or after a branch (├── or └──); else a continuation
        drawn = re.match(r"((?:[│ ]   )*[├└]── )?([A-Z]\w*(?:, [A-Z]\w*)*)", line)
        if drawn is None:
            continue
        depth = len(drawn.group(1) or "") // 4
        for name in drawn.group(2).split(", "):
            parents[name] = last_at[depth - 1] if depth else None
            last_at[depth] = name
    return parents


def _errors_py_findings(module) -> list[str]:
    """Each class defined in the errors module that is outside the tree or not exported."""
    from empirical_batch import errors

    found = []
    for name, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ != module.__name__:
            continue
        if not issubclass(cls, errors.EmpiricalBatchError | errors.EmpiricalBatchWarning):
            found.append(f"{name} derives from neither base")
        if name not in module.__all__:
            found.append(f"{name} is not in __all__")
    return found


def test_every_class_of_errors_py_is_exported_and_derives_from_the_tree():
    from empirical_batch import errors

    assert _errors_py_findings(errors) == []
    assert {"EmpiricalBatchError", "EmpiricalBatchWarning"} <= set(errors.__all__)
    # the API page renders errors.__all__
    assert "::: empirical_batch.errors" in (
        PACKAGE.parent / "docs" / "api" / "empirical_batch.errors.md").read_text()


def test_the_errors_py_check_finds_a_stray_class(monkeypatch):
    from empirical_batch import errors

    stray = type("StrayError", (Exception,), {"__module__": errors.__name__})
    hidden = type("HiddenError", (errors.InputError,), {"__module__": errors.__name__})
    monkeypatch.setattr(errors, "StrayError", stray, raising=False)
    monkeypatch.setattr(errors, "HiddenError", hidden, raising=False)
    assert _errors_py_findings(errors) == [
        "HiddenError is not in __all__",
        "StrayError derives from neither base", "StrayError is not in __all__",
    ]


def _design_tree_findings(package: Path = PACKAGE, design: Path = DESIGN) -> list[str]:
    classes = _library_exception_classes(package)
    drawn = _design_tree(design)
    stale = sorted(set(drawn) - set(classes))
    missing = sorted(f"{module}.{name}" for name, (module, _) in classes.items()
                     if name not in drawn)
    wrong = sorted(f"{name}: drawn under {drawn[name]}, derives from {base}"
                   for name, (_, base) in classes.items() if name in drawn and drawn[name] != base)
    return ([f"drawn, not defined: {n}" for n in stale] + [f"not drawn: {n}" for n in missing]
            + wrong)


def test_the_design_draws_every_exception_class_under_its_base():
    found = _design_tree_findings()
    assert not found, "docs/design.md, \"Exceptions and warnings\":\n" + "\n".join(found)


def test_the_tree_check_finds_a_class_drawn_wrong(tmp_path):
    import shutil

    package = Path(shutil.copytree(PACKAGE, tmp_path / "empirical_batch",
                                   ignore=shutil.ignore_patterns("__pycache__")))
    with (package / "units.py").open("a") as f:
        f.write("\n\nclass UnitProbe(UnitMismatch):\n    pass\n")
    design = tmp_path / "design.md"
    design.write_text(DESIGN.read_text().replace("├── RegimeWarning", "│   └── RegimeWarning")
                      .replace("└── TargetAtStart ", "└── TargetAtBeginning "))
    assert _design_tree_findings(package, design) == [
        "drawn, not defined: TargetAtBeginning",
        "not drawn: empirical_batch.fit.tradeoff_fit.TargetAtStart",
        "not drawn: empirical_batch.units.UnitProbe",
        "RegimeWarning: drawn under FitWarning, derives from EmpiricalBatchWarning",
    ]


# ------------------------------------------------------------- module sizes

MAX_LINES = 600


def test_no_module_over_600_lines():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in SOURCES
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules (> {MAX_LINES} lines): {long}"


# function sizes: in these subpackages no function (def line through its last line,
# docstring included) is longer than MAX_FUNCTION_LINES; a long one is split in stages
MAX_FUNCTION_LINES = 80
SHORT_FUNCTIONS = ("fit",)


def long_functions(package: Path = PACKAGE,
                   subpackages: tuple[str, ...] = SHORT_FUNCTIONS) -> dict[str, int]:
    """The functions (methods and nested ones included) of ``subpackages`` longer than
    `MAX_FUNCTION_LINES`: "path::name" -> lines."""
    found = {}
    for sub in subpackages:
        for path in sorted((package / sub).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    n = node.end_lineno - node.lineno + 1
                    if n > MAX_FUNCTION_LINES:
                        found[f"{path.relative_to(package.parent)}::{node.name}"] = n
    return found


def test_no_function_over_80_lines_in_fit():
    long = long_functions()
    assert not long, f"split these functions (> {MAX_FUNCTION_LINES} lines): {long}"


def test_the_function_length_check_finds_a_long_function(tmp_path):
    fit = tmp_path / "empirical_batch" / "fit"
    fit.mkdir(parents=True)
    body = "\n".join(f"x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (fit / "stage.py").write_text(
        "def long():\n" + textwrap.indent(body, "    ")
        + "\n\n\ndef short():\n    return 1\n\n\nclass C:\n    def method(self):\n"
        + textwrap.indent(body, "        ") + "\n")
    assert long_functions(tmp_path / "empirical_batch") == {
        "empirical_batch/fit/stage.py::long": MAX_FUNCTION_LINES + 1,
        "empirical_batch/fit/stage.py::method": MAX_FUNCTION_LINES + 1,
    }


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
    "empirical_batch._revive": 0,
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


def _package_modules(package: Path) -> dict[str, Path]:
    return {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _from_target(modules: dict[str, Path], current: str, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative levels resolved."""
    if not node.level:
        return node.module or ""
    base = current.split(".")
    if modules[current].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _module_level(tree: ast.Module):
    """The statements run when the module is imported: its body, and inside its ``if``,
    ``try`` and ``with`` blocks, not the bodies of its functions and classes."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With):
            for field in ("body", "orelse", "finalbody"):
                todo += getattr(node, field, [])
            todo += [s for h in getattr(node, "handlers", []) for s in h.body]


def _reexports(modules: dict[str, Path]) -> dict[str, dict[str, tuple[str, str]]]:
    """For each package's ``__init__``: public name -> (module, name there) it comes from,
    read from its module-level ``from .x import name`` statements and from a lazy name
    table (``_EXPORTS = {"name": "submodule"}``, the top level's ``__getattr__``)."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for name, path in modules.items():
        if path.name != "__init__.py":
            continue
        table: dict[str, tuple[str, str]] = {}
        for node in _module_level(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                source = _from_target(modules, name, node)
                for a in node.names:
                    table[a.asname or a.name] = (source, a.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in targets):
                    for k, v in zip(node.value.keys, node.value.values, strict=True):
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
                            table[k.value] = (f"{name}.{v.value}", k.value)
        out[name] = table
    return out


def _reexport_chain(modules: dict[str, Path], reexports: dict[str, dict[str, tuple[str, str]]],
                    module: str, name: str) -> list[str]:
    """The modules that importing ``name`` from ``module`` runs through: the re-export
    chain of package ``__init__`` files down to the plain module (or the submodule) that
    defines it."""
    chain = [module]
    while True:
        if f"{module}.{name}" in modules:
            return [*chain, f"{module}.{name}"]
        source = reexports.get(module, {}).get(name)
        if source is None:
            return chain
        module, name = source
        while module not in modules and "." in module:  # a name from outside the package
            module = module.rsplit(".", 1)[0]
        if module not in modules or module in chain:
            return chain
        chain.append(module)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Every import between the package's modules (module level, inside functions and
    under TYPE_CHECKING alike), resolved to module files. A name imported through a
    package's facade (``from empirical_batch import Sweep``, ``from .. import fit_tradeoff``,
    ``from empirical_batch.fit import StepsTable``) counts as an import of the module
    that defines it, and of each facade on the way."""
    modules = _package_modules(package)
    reexports = _reexports(modules)

    def targets(current: str, node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        target = _from_target(modules, current, node)
        found = []
        for a in node.names:
            if f"{target}.{a.name}" in modules:
                found.append(f"{target}.{a.name}")
            else:
                found += _reexport_chain(modules, reexports, target, a.name)
        return found

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


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
                  for a, deps in graph.items() for b in deps if layer_of(b) > layer_of(a))


def design_layers(design: Path = DESIGN) -> dict[str, int]:
    """The layer table of docs/design.md: module -> layer."""
    text = design.read_text()
    section = text[text.index("## Layers"):]
    section = section[: section.index("\n## ", 1)]
    out = {}
    for row in re.findall(r"^\| (\d+) [^|]*\| ([^|]*) \|", section, re.M):
        for module in re.findall(r"`([\w.]+)`", row[1]):
            out[f"empirical_batch.{module}"] = int(row[0])
    return out


def test_the_design_table_holds_the_layers():
    # the facade and `python -m` are not drawn; every other entry is, at its layer
    expected = {m: n for m, n in LAYERS.items()
                if m not in ("empirical_batch", "empirical_batch.__main__")}
    assert design_layers() == expected


def test_the_layer_table_check_finds_a_module_out_of_place(tmp_path):
    design = tmp_path / "design.md"
    design.write_text(DESIGN.read_text().replace("`_numeric`, ", "").replace(
        "| `tradeoff`, ", "| `tradeoff`, `_numeric`, "))
    assert design_layers(design)["empirical_batch._numeric"] == 2


# modules that import torch: at the top, or inside a function (only when it is called)
TORCH_AT_IMPORT = ("empirical_batch.measure", "empirical_batch.integrations",
                   "empirical_batch.harness", "empirical_batch.validation")
TORCH_WHEN_CALLED = ("empirical_batch.simulate", "empirical_batch._optional",
                     "empirical_batch.cli.devices")


def torch_imports(package: Path = PACKAGE) -> list[str]:
    """Imports of torch outside the modules docs/design.md names for it."""
    def within(module: str, prefixes: tuple[str, ...]) -> bool:
        return any(module == p or module.startswith(p + ".") for p in prefixes)

    found = []
    for path in sorted(package.rglob("*.py")):
        module = _module_name(path, package)
        tree = ast.parse(path.read_text())
        in_functions = {id(n) for f in ast.walk(tree)
                        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                        for n in ast.walk(f)}
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            if not any(n.split(".")[0] == "torch" for n in names):
                continue
            allowed = TORCH_AT_IMPORT + (TORCH_WHEN_CALLED if id(node) in in_functions else ())
            if not within(module, allowed):
                found.append(f"{module}:{node.lineno}")
    return found


def test_torch_is_imported_where_the_design_says():
    assert torch_imports() == []


def test_the_torch_check_finds_a_stray_import(tmp_path):
    import shutil

    package = Path(shutil.copytree(PACKAGE, tmp_path / "empirical_batch",
                                   ignore=shutil.ignore_patterns("__pycache__")))
    with (package / "fit" / "steps.py").open("a") as f:
        f.write("\n\ndef _probe():\n    import torch  # noqa\n")
    with (package / "simulate" / "__init__.py").open("a") as f:
        f.write("\nimport torch.nn  # noqa\n")
    assert [f.split(":")[0] for f in torch_imports(package)] == [
        "empirical_batch.fit.steps", "empirical_batch.simulate"]


def test_every_module_has_a_layer():
    for name in import_graph():
        layer_of(name)


def test_no_import_against_the_layers():
    wrong = layer_violations(import_graph())
    assert not wrong, "\n".join(wrong)


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


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "empirical_batch" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "empirical_batch"


# a lazy top level and a subpackage re-exporting its modules, as in the package
_FACADES = {
    "__init__.py": (
        "import importlib\n"
        '_EXPORTS: dict[str, str] = {"Sweep": "sweeps", "fit_tradeoff": "fit"}\n'
        "def __getattr__(name):\n"
        '    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)\n'),
    "sweeps.py": "class Sweep: ...\n",
    "fit/__init__.py": "from .tradeoff_fit import fit_tradeoff as fit_tradeoff\n",
    "fit/tradeoff_fit.py": "from ..sweeps import Sweep\ndef fit_tradeoff(): ...\n",
}


def test_an_upward_import_through_a_facade_is_caught(tmp_path):
    package = _write_package(tmp_path, {
        **_FACADES,
        # theory (layer 1) reaches the sweep schema (2) through the top level
        "theory.py": "from empirical_batch import Sweep\n",
        # rules (2) reaches fit (3) through the top level, then fit's __init__
        "rules.py": "def f():\n    from . import fit_tradeoff\n",
        # within a layer, through the facade: no finding
        "fit/curve.py": "from .. import Sweep\n",
        # a re-export inside a try block of the facade
        "loaders/__init__.py": "try:\n    from .mlperf import load_mllog\nexcept ImportError:\n"
                               "    pass\n",
        "loaders/mlperf.py": "def load_mllog(): ...\n",
        "planning.py": "from empirical_batch.loaders import load_mllog\n",
    })
    graph = import_graph(package)
    assert "empirical_batch.sweeps" in graph["empirical_batch.theory"]
    assert "empirical_batch.fit.tradeoff_fit" in graph["empirical_batch.rules"]
    assert "empirical_batch.loaders.mlperf" in graph["empirical_batch.planning"]
    assert layer_violations(graph) == [
        "empirical_batch.rules (layer 2) imports empirical_batch.fit (layer 3)",
        "empirical_batch.rules (layer 2) imports empirical_batch.fit.tradeoff_fit (layer 3)",
        "empirical_batch.theory (layer 1) imports empirical_batch.sweeps (layer 2)",
    ]


def test_a_circle_through_a_facade_is_caught(tmp_path):
    package = _write_package(tmp_path, {
        **_FACADES,
        "estimators.py": "from empirical_batch import Sweep\ndef g(): ...\n",
        "sweeps.py": "from .estimators import g\nclass Sweep: ...\n",
    })
    graph = import_graph(package)
    assert layer_violations(graph) == []
    assert _circles(graph) == [["empirical_batch.estimators", "empirical_batch.sweeps"]]


def test_a_facade_probe_in_the_package_fails_the_layer_test(tmp_path):
    import shutil

    package = Path(shutil.copytree(PACKAGE, tmp_path / "empirical_batch",
                                   ignore=shutil.ignore_patterns("__pycache__")))
    with (package / "units.py").open("a") as f:
        f.write("\n\ndef _probe():\n    from empirical_batch import fit_tradeoff  # noqa\n")
    assert layer_violations(import_graph(package)) == [
        "empirical_batch.units (layer 0) imports empirical_batch.fit (layer 3)",
        "empirical_batch.units (layer 0) imports empirical_batch.fit.tradeoff_fit (layer 3)",
    ]


# ------------------------------------------------------------- strict typing

def strict_modules(pyproject: Path = PACKAGE.parent / "pyproject.toml") -> set[str]:
    """The modules pyproject.toml holds to --strict's checks (one [[tool.mypy.overrides]]
    with disallow_untyped_defs)."""
    import tomllib

    overrides = tomllib.loads(pyproject.read_text())["tool"]["mypy"]["overrides"]
    return {m for o in overrides if o.get("disallow_untyped_defs")
            for m in ([o["module"]] if isinstance(o["module"], str) else o["module"])}


# layers held to --strict's checks, and the subpackages of those layers not yet (each to
# leave this set once typed; an entry with nothing loose left fails the test)
STRICT_LAYERS = 3
NOT_YET_STRICT = {"empirical_batch.simulate"}


def loose_modules(pyproject: Path = PACKAGE.parent / "pyproject.toml") -> list[str]:
    """Modules of layers 0 (ground floor) to `STRICT_LAYERS` (analysis), new ones
    included, that pyproject.toml does not hold to --strict's checks."""
    strict = strict_modules(pyproject)
    return sorted(m for m in import_graph()
                  if m != "empirical_batch" and layer_of(m) <= STRICT_LAYERS
                  and m not in strict)


def _exempt(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in NOT_YET_STRICT)


def test_the_lower_layers_are_strictly_typed():
    loose = loose_modules()
    missing = [m for m in loose if not _exempt(m)]
    assert not missing, ("add to pyproject.toml's strict [[tool.mypy.overrides]]: "
                         + ", ".join(missing))
    done = [p for p in NOT_YET_STRICT if not any(_exempt(m) and m.startswith(p) for m in loose)]
    assert not done, f"strictly typed now: remove {done} from NOT_YET_STRICT"


def test_the_strict_check_finds_a_loose_module(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text((PACKAGE.parent / "pyproject.toml").read_text().replace(
        '    "empirical_batch.units",\n', ""))
    assert "empirical_batch.units" in loose_modules(pyproject)
    assert "empirical_batch.units" not in loose_modules()
