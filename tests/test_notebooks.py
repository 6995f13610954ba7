"""Execute every notebook in notebooks/ top to bottom (one test per notebook).

The notebooks run exactly as the documentation build runs them, through
``execute_notebooks`` of ``docs/_ext/notebooks_hook.py``: the kernel is the
interpreter running pytest, with the repository root on ``PYTHONPATH`` (so the
notebooks import this checkout's ``empirical_batch``), one BLAS thread and
``notebooks/`` as the working directory. A cell that raises fails the test with the
notebook's name and the cell's traceback.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _hook():
    pytest.importorskip("mkdocs", reason="the notebooks run through the docs hook: '.[docs]'")
    spec = importlib.util.spec_from_file_location(
        "notebooks_hook", ROOT / "docs" / "_ext" / "notebooks_hook.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_notebooks_exist():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    hook = _hook()
    (executed,) = asyncio.run(hook.execute_notebooks([path], tmp_path, ROOT))
    assert executed.is_file()
    keep = os.environ.get(hook.EXECUTED_ENV)  # set by `make test`: the docs build reuses it
    if keep:
        dest = Path(keep) / "notebooks"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(executed, dest / path.name)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_committed_without_outputs(path):
    """Outputs are stripped before committing: the files stay small and diffable."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    with_outputs = [
        i for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count"))
    ]
    assert not with_outputs, f"{path.name}: cells {with_outputs} have outputs; strip them"
