"""MkDocs hook: execute ``notebooks/*.ipynb`` and publish them as site pages.

The notebooks live in the repository's ``notebooks/`` folder, where users open them
and where they read ``../data/``; they are committed without outputs. At each build
this hook

1. executes every notebook top to bottom with ``nbclient``, as
   ``tests/test_notebooks.py`` does: the kernel is the interpreter running MkDocs
   (``sys.executable``, through a kernelspec written to a temporary folder, so no
   installed kernelspec is looked up), started with the repository root first on
   ``PYTHONPATH`` (the pages show this checkout's ``empirical_batch``), one
   BLAS/OpenMP thread, the inline matplotlib backend, and the notebook's own folder
   as working directory. Up to one notebook per CPU core runs at a time;
2. fails the build if a cell raises (the error names the notebook and shows the
   cell's traceback), or if an output shows a machine path (the checkout, a home or
   temporary folder, ``site-packages``) or a warning in Python's raw format
   (``file.py:LINE: Warning: ...`` and the source line; `output_problems`): no page is
   published from a broken notebook, and the pages speak of the library only;
3. adds the executed copies, written to a temporary folder (never back to
   ``notebooks/``), to the build as ``notebooks/<name>.ipynb``. The
   ``mkdocs-jupyter`` plugin (configured with ``execute: false``) renders them,
   figures inlined as PNG, and publishes the executed ``.ipynb`` beside each page.

Under ``make test`` step 1 is skipped: the notebooks were just executed by
``tests/test_notebooks.py`` (through :func:`execute_notebooks`), which leaves the copies
in the folder named by ``EXECUTED_ENV``; they are used only if every notebook has a
copy newer than itself.

Why execute here rather than with the plugin's ``execute: true``: the plugin runs
the notebooks one after another while rendering pages; running them side by side
roughly halves the added build time on a two-core CI machine, and the kernel is
pinned to this interpreter as in the tests. Registered in mkdocs.yml under ``hooks``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

NOTEBOOK_DIR = "notebooks"
CELL_TIMEOUT_S = 300  # per cell, as in tests/test_notebooks.py
KERNEL_NAME = "empirical-batch-docs"

_tmp: Path | None = None  # this build's kernelspec, sockets and executed notebooks

#: ``make test`` sets this to a folder where ``tests/test_notebooks.py`` leaves the
#: notebooks it executed (``<folder>/notebooks/<name>.ipynb``); the build that follows
#: publishes those rather than running every notebook a second time
EXECUTED_ENV = "EMPIRICAL_BATCH_EXECUTED_NOTEBOOKS"


def _root(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _kernel_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    # one BLAS thread: the notebooks are sized for one core and run side by side
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


def _write_kernelspec(tmp: Path) -> Path:
    kernels = tmp / "kernels"
    spec_dir = kernels / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "empirical_batch docs",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return kernels


_RAW_WARNING = re.compile(r"\.py:\d+: \w*Warning\b")
_MACHINE_PATHS = ("/work/", "/root/", "/home/", "/tmp/", "/var/folders/", "site-packages")


def output_problems(nb, root: Path) -> list[str]:
    """What an executed notebook's outputs must not show: machine paths and raw warnings.

    Returns one line per offending output line, naming the cell (0-based index)."""
    marks = (str(root), tempfile.gettempdir() + os.sep, *_MACHINE_PATHS)
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            texts = [out.get("text", "")]
            texts += [v for k, v in out.get("data", {}).items() if k.startswith("text/")]
            texts += out.get("traceback", [])
            for text in texts:
                for line in ("".join(text) if isinstance(text, list) else str(text)).splitlines():
                    if _RAW_WARNING.search(line):
                        found.append(f"cell {i}: raw warning: {line.strip()[:160]}")
                    elif any(m in line for m in marks):
                        found.append(f"cell {i}: machine path: {line.strip()[:160]}")
    return found


async def execute_notebooks(paths: list[Path], tmp: Path, root: Path) -> list[Path]:
    """Execute ``paths`` side by side; executed copies go to ``tmp/notebooks/``.

    Raises PluginError naming each failed notebook with its cell traceback. Also
    used by ``tests/test_notebooks.py``, so the tests and the site run notebooks alike.
    """
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    ksm = KernelSpecManager(kernel_dirs=[str(_write_kernelspec(tmp))])
    env = _kernel_env(root)
    out_dir = tmp / NOTEBOOK_DIR
    out_dir.mkdir()
    slots = asyncio.Semaphore(max(1, min(len(paths), os.cpu_count() or 1)))

    async def execute(i: int, path: Path) -> Path:
        async with slots:
            nb = nbformat.read(path, as_version=4)
            # IPC sockets in the temporary folder: local only, no TCP ports
            km = AsyncKernelManager(
                kernel_name=KERNEL_NAME, kernel_spec_manager=ksm,
                transport="ipc", ip=str(tmp / f"kernel{i}"),
            )
            client = NotebookClient(
                nb, km=km, timeout=CELL_TIMEOUT_S, allow_errors=False,
                resources={"metadata": {"path": str(path.parent)}},
            )
            await client.async_execute(cleanup_kc=True, env=env)
            problems = output_problems(nb, root)
            if problems:
                raise RuntimeError("outputs show what a page must not:\n  "
                                   + "\n  ".join(problems))
            out = out_dir / path.name
            nbformat.write(nb, out)
            return out

    results = await asyncio.gather(
        *(execute(i, p) for i, p in enumerate(paths)), return_exceptions=True
    )
    failed = [(p, r) for p, r in zip(paths, results, strict=True) if isinstance(r, BaseException)]
    if failed:
        detail = "\n\n".join(f"{p.name}: {type(r).__name__}: {r}" for p, r in failed)
        raise PluginError(f"{len(failed)} notebook(s) failed to execute:\n{detail}")
    return results


def _cleanup() -> None:
    global _tmp
    if _tmp is not None:
        shutil.rmtree(_tmp, ignore_errors=True)
        _tmp = None


def _executed_by_tests(paths: list[Path]) -> Path | None:
    """The folder ``EXECUTED_ENV`` names, if it holds an executed copy of every notebook
    newer than the notebook itself; else None (the build executes them)."""
    folder = os.environ.get(EXECUTED_ENV)
    if not folder:
        return None
    for path in paths:
        done = Path(folder) / NOTEBOOK_DIR / path.name
        if not done.is_file() or done.stat().st_mtime < path.stat().st_mtime:
            return None
    return Path(folder)


@event_priority(50)  # before mkdocs-jupyter (priority 0) wraps notebook files as pages
def on_files(files, config):
    global _tmp
    root = _root(config)
    paths = sorted((root / NOTEBOOK_DIR).glob("*.ipynb"))
    if not paths:
        raise PluginError(f"no notebooks found in {root / NOTEBOOK_DIR}")
    _cleanup()
    src_dir = _executed_by_tests(paths)
    if src_dir is None:
        _tmp = src_dir = Path(tempfile.mkdtemp(prefix="eb-docs-nb-"))
        try:
            asyncio.run(execute_notebooks(paths, _tmp, root))
        except BaseException:
            _cleanup()
            raise
    for path in paths:
        files.append(
            File(
                f"{NOTEBOOK_DIR}/{path.name}",
                src_dir=str(src_dir),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_post_build(config):
    _cleanup()


def on_build_error(error):
    _cleanup()


def on_serve(server, config, builder):
    """``mkdocs serve`` rebuilds (and re-executes) when a notebook changes."""
    server.watch(str(_root(config) / NOTEBOOK_DIR))
    return server
