"""`empirical-batch harness` works from an installed copy of the package, run outside the
checkout (nothing in the package reaches for the source tree)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("torch")


@pytest.mark.slow
def test_tiny_harness_from_an_installed_wheel(tmp_path):
    import shutil

    # build from a copy of the sources: setuptools' build/ folder neither litters the
    # checkout nor carries stale files into the wheel
    src = tmp_path / "src"
    shutil.copytree(ROOT / "empirical_batch", src / "empirical_batch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(src)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("empirical_batch-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, cwd=tmp_path)
    assert (site / "empirical_batch" / "py.typed").is_file()
    assert (site / "empirical_batch" / "harness" / "tasks" / "base.py").is_file()
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONSAFEPATH": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "empirical_batch.cli", "harness", "--config", "tiny",
         "--tasks", "teacher_student", "--out", "X", "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    where = subprocess.run(
        [sys.executable, "-c", "import empirical_batch.harness as h; print(h.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert where.startswith(str(site)), where
    assert any((tmp_path / "X").rglob("*.csv*")), sorted((tmp_path / "X").rglob("*"))
