"""The commands' output layer: no command writes over one of its inputs, each warning is
printed once on one line, and a reader closing the pipe ends a command quietly."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fit_docs import fit_document, fit_entry

from empirical_batch.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def log(tmp_path):
    e = np.linspace(0, 1e6, 200)
    path = tmp_path / "gns.csv"
    pd.DataFrame({"examples": e, "b_simple": 50 * (1 + e / 1e5)}).to_csv(path, index=False)
    return path


@pytest.fixture()
def curve(tmp_path):
    e = np.linspace(0, 1e6, 200)
    path = tmp_path / "curve.csv"
    pd.DataFrame({"examples": e, "loss": 4.0 / (1 + e / 2e5) ** 0.3}).to_csv(path, index=False)
    return path


@pytest.fixture()
def fit_json(tmp_path):
    path = tmp_path / "fit.json"
    path.write_text(fit_document(fit_entry(1000.0, 1e5, target=3.0),
                                 fit_entry(3000.0, 3e6, target=2.0)))
    return path


@pytest.fixture()
def steps_csv(tmp_path):
    b = 2.0 ** np.arange(8)
    path = tmp_path / "steps.csv"
    pd.DataFrame({"batch_size": b, "steps": 1000 * (1 + 64 / b)}).to_csv(path, index=False)
    return path


def _argv(case, log, curve, fit_json, steps_csv, tmp_path):
    """(argv, the input file that the output path repeats) for each command that writes."""
    timings = tmp_path / "timings.csv"
    pd.DataFrame({"micro_batch": [8, 16, 32, 8], "devices": [1, 1, 1, 4],
                  "accumulation": [1, 1, 1, 1],
                  "step_seconds": [0.1, 0.18, 0.34, 0.12]}).to_csv(timings, index=False)
    return {
        "schedule --log": (["schedule", "--log", str(log), "--batch-size", "64",
                            "--base-batch", "64", "--format", "csv", "--out", str(log)], log),
        "schedule --fit": (["schedule", "--fit", str(fit_json), "--loss-curve", str(curve),
                            "--batch-size", "64", "--base-batch", "64", "--format", "json",
                            "--out", str(fit_json)], fit_json),
        "schedule --loss-curve": (["schedule", "--power-law", "2000,0.5", "--loss-curve",
                                   str(curve), "--batch-size", "64", "--base-batch", "64",
                                   "--format", "csv", "--out", str(curve)], curve),
        "fit": (["fit", str(steps_csv), "--n-boot", "10", "--out", str(steps_csv)], steps_csv),
        "plan --fit": (["plan", "--fit", str(fit_json), "--out", str(fit_json)], fit_json),
        "plan --timings": (["plan", "--b-crit", "100", "--s-min", "1000", "--timings",
                            str(timings), "--out", str(timings)], timings),
    }[case]


CASES = ["schedule --log", "schedule --fit", "schedule --loss-curve", "fit", "plan --fit",
         "plan --timings"]


@pytest.mark.parametrize("case", CASES)
def test_no_command_writes_over_its_input(case, log, curve, fit_json, steps_csv, tmp_path,
                                          capsys):
    argv, victim = _argv(case, log, curve, fit_json, steps_csv, tmp_path)
    before = victim.read_bytes()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert "replace an input" in err and len(err.strip().splitlines()) == 1
    assert victim.read_bytes() == before


def test_the_same_file_by_another_name_is_refused(log, tmp_path, capsys, monkeypatch):
    """A relative spelling and a symbolic link name the same file."""
    link = tmp_path / "link.csv"
    link.symlink_to(log)
    monkeypatch.chdir(tmp_path)
    before = log.read_bytes()
    for out in ("gns.csv", "./sub/../gns.csv", str(link)):
        (tmp_path / "sub").mkdir(exist_ok=True)
        code = main(["schedule", "--log", "gns.csv", "--batch-size", "64", "--base-batch",
                     "64", "--format", "csv", "--out", out])
        assert code == 2 and "replace an input" in capsys.readouterr().err
    assert log.read_bytes() == before


def test_a_distinct_output_is_written(log, tmp_path, capsys):
    out = tmp_path / "schedule.csv"
    assert main(["schedule", "--log", str(log), "--batch-size", "64", "--base-batch", "64",
                 "--format", "csv", "--out", str(out)]) == 0
    assert pd.read_csv(out)["batch_size"].iloc[0] == 64


def _warning_run(args):
    for _ in range(3):
        warnings.warn("the same condition\nover two lines", UserWarning, stacklevel=1)
    warnings.warn("a second condition", RuntimeWarning, stacklevel=1)
    print("result")
    return 0


def test_each_warning_once_on_one_line(capsys, monkeypatch):
    import empirical_batch.cli.transfer as transfer_cli

    monkeypatch.setattr(transfer_cli, "run", _warning_run)
    assert main(["transfer", "--from-batch", "1", "--to-batch", "2", "--optimizer", "sgd",
                 "--lr", "0.1"]) == 0
    out, err = capsys.readouterr()
    assert out == "result\n"
    assert err.splitlines() == [
        "empirical-batch transfer: warning: the same condition over two lines",
        "empirical-batch transfer: warning: a second condition"]


def test_a_warning_the_output_already_shows_is_not_repeated(capsys, monkeypatch):
    import empirical_batch.cli.transfer as transfer_cli

    def run(args):
        warnings.warn("grid too coarse", UserWarning, stacklevel=1)
        print("fit ...\nwarning: grid too coarse")
        return 0

    monkeypatch.setattr(transfer_cli, "run", run)
    assert main(["transfer", "--from-batch", "1", "--to-batch", "2", "--optimizer", "sgd",
                 "--lr", "0.1"]) == 0
    assert capsys.readouterr().err == ""


def test_a_real_fit_warning_has_no_source_line(tmp_path):
    """A fit whose warning goes to stderr (--json): one line, no file path or code."""
    b = 2.0 ** np.arange(3)
    path = tmp_path / "steps.csv"
    pd.DataFrame({"batch_size": b, "steps": 1000 * (1 + 64 / b)}).to_csv(path, index=False)
    res = subprocess.run([sys.executable, "-m", "empirical_batch.cli", "fit", str(path),
                          "--json", "--n-boot", "20"], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines, res.stderr
    for ln in lines:
        assert ln.startswith("empirical-batch fit: "), ln
        assert ".py:" not in ln and str(ROOT) not in ln
    assert len(lines) == len(set(lines))


_LONG_OUTPUT = """
import sys
import empirical_batch.cli.transfer as transfer_cli
from empirical_batch.cli import main

def run(args):
    for i in range(100_000):
        print(f"line {i} " + "x" * 80)
    return 0

transfer_cli.run = run
sys.exit(main(["transfer", "--from-batch", "1", "--to-batch", "2", "--optimizer", "sgd",
               "--lr", "0.1"]))
"""


def test_a_closed_pipe_is_quiet(tmp_path):
    """`empirical-batch ... | head -1`: no traceback, no error line, status 141."""
    script = tmp_path / "long.py"
    script.write_text(_LONG_OUTPUT)
    res = subprocess.run(["bash", "-c", f"{sys.executable} {script} | head -1; "
                          "echo status=${PIPESTATUS[0]}"], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.stderr == "", res.stderr
    assert res.stdout.splitlines() == ["line 0 " + "x" * 80, "status=141"]


def test_check_no_overwrite_property(tmp_path):
    """Property: any spelling of an input's path (./, sub/.., a symbolic link, absolute)
    is refused as an output; a sibling file is not."""
    from argparse import Namespace

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from empirical_batch.cli.output import check_no_overwrite
    from empirical_batch.errors import InputError

    (tmp_path / "d").mkdir()
    target = tmp_path / "d" / "in.csv"
    target.write_text("x\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)

    @settings(max_examples=50, deadline=None)
    @given(st.lists(st.sampled_from([".", "d/..", "./d/.."]), max_size=4),
           st.booleans(), st.booleans())
    def check(prefix, use_link, sibling):
        name = "other.csv" if sibling else "in.csv"
        out = link if use_link and not sibling else Path(tmp_path, *prefix, "d", name)
        args = Namespace(log=target, out=out)
        if sibling:
            check_no_overwrite(args, ("log",), ("out",))
        else:
            with pytest.raises(InputError, match="replace an input"):
                check_no_overwrite(args, ("log",), ("out",))

    check()
