"""The built wheel works with nothing of the source tree around it: its package data
(the shipped data sets) are inside it, and the command line runs the demo and the tiny
harness from a folder elsewhere, with an empty data folder and downloads off."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("setuptools")

ROOT = Path(__file__).resolve().parents[1]

CHECKS = """
import empirical_batch, sys
from pathlib import Path
from empirical_batch import datasets
from empirical_batch.errors import DatasetError
site = Path(sys.argv[1]).resolve()
assert Path(empirical_batch.__file__).resolve().is_relative_to(site), empirical_batch.__file__
fits = datasets.zhang2024().fit(n_boot=50)
assert round(fits.fits["1.2B"].b_crit, -2) == 11100, fits
assert datasets.mlperf_rcp(benchmark="bert").n_rows > 100
assert len(datasets.vaessen2024().batch_sizes) == 7
assert datasets.mccandlish2018_table1().frame.shape[0] == 10
assert datasets.tiny_shakespeare(chars=20_000).is_relative_to(site)
try:
    datasets.tiny_shakespeare()
except DatasetError as exc:
    assert "tinyshakespeare/input.txt" in str(exc)
else:
    raise AssertionError("the whole corpus cannot be in an empty data folder")
print("ok")
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel built from a copy of the package's sources, installed into a folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "empirical_batch", src / "empirical_batch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"),
                    str(src)], check=True, capture_output=True, cwd=tmp)
    wheel = next((tmp / "dist").glob("empirical_batch-*.whl"))
    site = tmp / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, cwd=tmp)
    (tmp / "empty").mkdir()
    (tmp / "work").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMPIRICAL_BATCH_")}
    env.update(PYTHONPATH=str(site), EMPIRICAL_BATCH_DATA=str(tmp / "empty"),
               EMPIRICAL_BATCH_OFFLINE="1")
    return site, tmp / "work", env


def _run(args, installed, timeout=300):
    _, work, env = installed
    return subprocess.run(args, cwd=work, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_wheel_ships_the_data_sets(installed):
    site = installed[0]
    r = _run([sys.executable, "-c", CHECKS, str(site)], installed)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    for licence in ("zhang2024_critical_batch_size", "mlperf_rcp", "vaessen2024_w2v2_batch_size"):
        assert (site / "empirical_batch" / "datasets" / "files" / licence / "LICENSE").is_file()


@pytest.mark.slow
def test_the_wheel_runs_the_demo_and_the_tiny_harness(installed):
    work = installed[1]
    cli = [sys.executable, "-m", "empirical_batch"]
    demo = _run([*cli, "demo", "--no-figure"], installed)
    assert demo.returncode == 0, demo.stderr
    assert "Simulated sweep" in demo.stdout
    h = _run([*cli, "harness", "--config", "tiny", "--tasks", "text_lm", "--out", "h",
              "--no-progress", "--threads", "1"], installed)
    assert h.returncode == 0, h.stderr
    assert (work / "h" / "report.md").is_file()
    assert "excerpt.txt" in (work / "h" / "manifest.json").read_text()
