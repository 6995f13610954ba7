"""analysis/harness/run_gpu.sh: refuses to start without CUDA (its smoke mode is run by hand).

The full ``--dry-run`` smoke run of the runbook takes about 1.5 minutes on the 2-core
CI machine, too slow for the suite; docs/validation.md says how it was run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "analysis" / "harness" / "run_gpu.sh"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _run(*args, tmp_path, **extra_env):
    env = {**os.environ, "PYTHON": sys.executable, **extra_env}
    env.pop("CPU_SMOKE", None)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_without_cuda_it_stops_before_any_work(tmp_path):
    out = tmp_path / "out"
    r = _run(str(out), tmp_path=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "CUDA is not available" in r.stderr and "--dry-run" in r.stderr
    # nothing but the preflight log was written
    assert sorted(p.name for p in out.rglob("*")) == ["logs", "preflight.txt"]


def test_bad_arguments(tmp_path):
    r = _run("--bogus", tmp_path=tmp_path)
    assert r.returncode == 2 and "unknown option --bogus" in r.stderr
    r = _run("a", "b", tmp_path=tmp_path)
    assert r.returncode == 2 and "one OUT folder only" in r.stderr
    r = _run("--dry-run", str(tmp_path / "o"), tmp_path=tmp_path, STEPS="harness bogus")
    assert r.returncode == 2 and "unknown step bogus" in r.stderr
    r = _run("--dry-run", str(tmp_path / "o"), tmp_path=tmp_path, HARNESS_STAGE="fit")
    assert r.returncode == 2 and "HARNESS_STAGE must be" in r.stderr
    r = _run("--help", tmp_path=tmp_path)
    assert r.returncode == 0 and "--dry-run" in r.stdout
