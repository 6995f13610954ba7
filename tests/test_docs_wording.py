"""The documentation, README, notebooks, data notes and package speak of the library and
its users: no account of how the project was built (which machine was at hand, what a
work session was lent, the aims of an issue) and no machine paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROCESS = re.compile(
    r"\blent\b|\bsessions?\b|\bthe issue\b|\bissue tracker\b|\bissue \d+|\bat hand\b"
    r"|\bwhich machine\b|\baims of\b|\bno gpu (?:was|is) (?:available|at)\b"
    r"|\babstract was read\b|\bonly (?:its|the) abstract\b|\bnot read in the paper\b",
    re.IGNORECASE)
MACHINE_PATH = re.compile(r"(?<![\w.])(?:/work/|/root/|/home/\w|/tmp/|/var/folders/)")


def _texts():
    """(file, line number, line) of every scanned text; notebooks: cell sources and any
    committed outputs."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "data").rglob("*.md")),
             *sorted((ROOT / "empirical_batch").rglob("*.py")),
             *sorted((ROOT / "benchmarks").glob("*.py"))]
    for path in files:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield path, i, line
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for c, cell in enumerate(nb["cells"]):
            chunks = ["".join(cell.get("source", ""))]
            for out in cell.get("outputs", []):
                chunks.append("".join(out.get("text", "")))
                chunks += ["".join(v) for v in out.get("data", {}).values()
                           if isinstance(v, list | str)]
            for line in "\n".join(chunks).splitlines():
                yield path, c, line


def _hits(pattern):
    return [f"{p.relative_to(ROOT)}:{i}: {line.strip()[:120]}"
            for p, i, line in _texts() if pattern.search(line)]


def test_no_process_wording():
    assert _hits(PROCESS) == []


def test_no_machine_paths():
    assert _hits(MACHINE_PATH) == []


@pytest.mark.parametrize("line, bad", [
    ("No GPU was lent to the session that added it", True),
    ("The aims of the issue are GPU aims", True),
    ("a GPU was at hand", True),
    ("the run saved to /tmp/run1", True),
    ("issues a RegimeWarning and lists the message", False),
    ("the claims table of the paper", False),
])
def test_the_patterns_catch_what_they_should(line, bad):
    assert bool(PROCESS.search(line) or MACHINE_PATH.search(line)) is bad


def test_the_docs_hook_refuses_machine_paths_and_raw_warnings(tmp_path):
    """The docs build fails when an executed notebook shows a raw warning or a path."""
    import importlib.util

    import nbformat

    spec = importlib.util.spec_from_file_location(
        "notebooks_hook", ROOT / "docs" / "_ext" / "notebooks_hook.py")
    pytest.importorskip("mkdocs")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    nb = nbformat.v4.new_notebook()
    raw = (f"{ROOT}/empirical_batch/fit/tradeoff_fit.py:490: FitWarning: best learning "
           "rate at the edge of its grid\n  fit = fit_tradeoff(table)\n")
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[
        nbformat.v4.new_output("stream", name="stderr", text=raw)])]
    problems = hook.output_problems(nb, ROOT)
    assert any("raw warning" in p for p in problems)
    clean = nbformat.v4.new_notebook()
    clean.cells = [nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "stream", name="stderr", text="FitWarning: best learning rate at the edge\n")])]
    assert hook.output_problems(clean, ROOT) == []
