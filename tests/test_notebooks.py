"""Execute every notebook in notebooks/ top to bottom (one test per notebook).

The kernel is the interpreter running pytest (a kernelspec written to a temporary
directory points at ``sys.executable``), started with the repository root on
``PYTHONPATH`` so the notebooks import this checkout's ``empirical_batch``.
Notebooks run with ``notebooks/`` as the working directory, as for a user who opens
them there. A cell that raises fails the test with the cell's traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 300  # per cell; the whole notebook aims at < 60 s on one core


@pytest.fixture
def kernel_manager(tmp_path, monkeypatch):
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec_dir = tmp_path / "kernels" / "empirical-batch-test"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "empirical_batch tests",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # one BLAS thread: the notebooks are sized for one core, and CI runs two at once
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")
    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    return KernelManager(kernel_name="empirical-batch-test", kernel_spec_manager=ksm)


def test_notebooks_exist():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_manager):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        km=kernel_manager,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()


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
