"""A missing optional package is one error naming the extra that installs it.

Every import of an optional package in the library goes through
`empirical_batch._optional` (checked on the source); the error says which extra of
``pyproject.toml`` installs the package, and the command line prints it as one line.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import empirical_batch
from empirical_batch._optional import EXTRAS, check_installed, missing, optional_import
from empirical_batch.cli import main
from empirical_batch.errors import MissingDependencyError, UsageError

PACKAGE = Path(empirical_batch.__file__).parent
ROOT = PACKAGE.parent


def _block(monkeypatch, module: str) -> None:
    """Make ``module`` and its submodules unimportable, as if not installed (submodules
    that earlier tests imported included: they would be found in ``sys.modules``)."""
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, module, None)


def test_the_message_names_the_package_and_the_extra():
    err = missing("sklearn.datasets", by="the digits task")
    assert str(err) == "the digits task needs scikit-learn: pip install 'empirical_batch[harness]'"
    assert err.name == "sklearn"
    assert isinstance(err, UsageError) and isinstance(err, ModuleNotFoundError)
    assert "empirical_batch[hf]" in str(missing("torch", by="x", extra="hf"))
    assert str(missing("foo", by="x")) == "x needs foo: pip install foo"


def test_every_extra_named_installs_its_package():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for module, (package, extra) in EXTRAS.items():
        names = {r.split(">")[0].split("=")[0].split("[")[0].strip().lower()
                 for r in extras[extra]}
        assert package.split()[-1].lower() in names, (module, extra, names)


def test_optional_import_turns_only_its_own_module_into_the_error(monkeypatch):
    _block(monkeypatch, "sklearn")
    with pytest.raises(MissingDependencyError, match=r"^the digits task needs scikit-learn: "
                       r"pip install 'empirical_batch\[harness\]'$"):
        with optional_import("sklearn", by="the digits task"):
            from sklearn.datasets import load_digits
    with pytest.raises(MissingDependencyError, match="needs scikit-learn"):
        with optional_import("sklearn", by="the digits task"):
            import sklearn  # noqa: F401
    with pytest.raises(ModuleNotFoundError) as info:  # another package: unchanged
        with optional_import("ray", by="x"):
            from sklearn.datasets import load_digits  # noqa: F401
    assert not isinstance(info.value, MissingDependencyError)
    with optional_import("sklearn", by="x"):
        import json  # noqa: F401
    with pytest.raises(MissingDependencyError, match="needs scikit-learn"):
        check_installed("sklearn", by="x")
    check_installed("json", by="x")


def test_a_task_checks_its_packages_when_configured(monkeypatch):
    pytest.importorskip("torch")
    from empirical_batch.harness.config import get_config
    from empirical_batch.harness.tasks import make_task

    _block(monkeypatch, "sklearn")
    message = r"^the digits task needs scikit-learn: pip install 'empirical_batch\[harness\]'$"
    with pytest.raises(MissingDependencyError, match=message):
        make_task("digits")
    with pytest.raises(MissingDependencyError, match=message):
        get_config("tiny", ["digits"])
    make_task("teacher_student")  # a task without optional packages


def test_harness_without_scikit_learn_is_one_line(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    _block(monkeypatch, "sklearn")
    out = tmp_path / "run"
    code = main(["harness", "--config", "tiny", "--tasks", "digits", "--out", str(out),
                 "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.err.splitlines() == [
        "empirical-batch harness: error: the digits task needs scikit-learn: "
        "pip install 'empirical_batch[harness]'"], captured.err
    assert "Traceback" not in captured.out + captured.err
    assert not out.exists()  # nothing started


def _without(module: str, code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter where ``module`` cannot be imported."""
    script = f"import sys\nsys.modules[{module!r}] = None\n{code}"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_harness_without_torch_is_one_line(tmp_path):
    out = tmp_path / "run"
    run = _without("torch", "from empirical_batch.cli import main\n"
                   f"sys.exit(main(['harness', '--config', 'tiny', '--out', {str(out)!r}]))")
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [
        "empirical-batch harness: error: the validation harness needs torch: "
        "pip install 'empirical_batch[harness]'"], run.stderr
    assert not out.exists()


@pytest.mark.parametrize(("module", "target", "extra"), [
    ("torch", "empirical_batch.measure", "torch"),
    ("torch", "empirical_batch.integrations.hf", "hf"),
    ("transformers", "empirical_batch.integrations.hf", "hf"),
    ("lightning", "empirical_batch.integrations.lightning", "lightning"),
    ("torch", "empirical_batch.validation.study", "harness"),
])
def test_importing_a_module_without_its_package(module, target, extra):
    if module != "torch":
        pytest.importorskip("torch")
    run = _without(module, "import importlib\n"
                   "from empirical_batch.errors import MissingDependencyError\n"
                   "try:\n"
                   f"    importlib.import_module({target!r})\n"
                   "except MissingDependencyError as exc:\n"
                   "    print(exc)\n")
    assert run.returncode == 0, run.stderr
    package = EXTRAS[module][0]
    assert run.stdout.strip().endswith(
        f"needs {package}: pip install 'empirical_batch[{extra}]'"), run.stdout


def _guards(tree: ast.Module, *, module_level: bool) -> list[tuple[ast.AST, set[str]]]:
    """The ``with optional_import(...)`` blocks (and, at module level, the
    ``check_installed(...)`` calls) with the modules they name."""
    found = []
    nodes = tree.body if module_level else list(ast.walk(tree))
    for node in nodes:
        calls = []
        if isinstance(node, ast.With):
            calls = [item.context_expr for item in node.items]
        elif isinstance(node, ast.Expr):
            calls = [node.value]
        for call in calls:
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
                    call.func.id in ("optional_import", "check_installed"):
                if call.func.id == "check_installed" and not module_level:
                    continue
                names = {a.value.split(".")[0] for a in call.args
                         if isinstance(a, ast.Constant) and isinstance(a.value, str)}
                found.append((node, names))
    return found


def test_every_optional_import_goes_through_the_helper():
    """An import of an optional package sits in a ``with optional_import(...)`` naming it,
    or below a package whose ``__init__`` checks it first (``measure``, ``harness``)."""
    trees = {p: ast.parse(p.read_text()) for p in PACKAGE.rglob("*.py")}
    package_guards = {p.parent: set().union(*(n for _, n in _guards(t, module_level=True)))
                      for p, t in trees.items() if p.name == "__init__.py"}
    bare = []
    for path, tree in trees.items():
        inside: dict[int, set[str]] = {}
        for block, names in _guards(tree, module_level=False):
            for node in ast.walk(block):
                inside.setdefault(id(node), set()).update(names)
        above = set().union(*(package_guards.get(d, set()) for d in path.parents
                              if d != path.parent or path.name != "__init__.py"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for mod in mods:
                top = mod.split(".")[0]
                if top in EXTRAS and top not in inside.get(id(node), set()) | above:
                    bare.append(f"{path.relative_to(ROOT)}:{node.lineno}: import {mod}")
    assert not bare, "import optional packages with _optional.optional_import:\n" + \
        "\n".join(bare)


@pytest.mark.parametrize(("spec", "module", "package"), [
    ("dask:local", "distributed", "Dask distributed"), ("ray:local", "ray", "Ray")])
def test_an_executor_without_its_engine(spec, module, package, monkeypatch):
    pytest.importorskip("torch")
    from empirical_batch.harness.distribute import open_executor

    _block(monkeypatch, module)
    engine = spec.split(":")[0]
    with pytest.raises(MissingDependencyError, match=rf"^--executor {engine}:\.\.\. needs "
                       rf"{package}: pip install 'empirical_batch\[distributed\]'$"):
        with open_executor(spec):
            pass
