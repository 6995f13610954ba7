"""The command line reports user errors in one line with exit status 2, never a traceback."""

from __future__ import annotations

import gzip

import pytest

from empirical_batch.cli import main


def _run(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


def _one_line_error(code, err, *words):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("empirical-batch ")
    for w in words:
        assert w.lower() in lines[0].lower(), (w, lines[0])


def test_a_directory_instead_of_a_file(tmp_path, capsys):
    _one_line_error(*_run(["fit", str(tmp_path), "--target", "1.0"], capsys), str(tmp_path))


def test_a_missing_file(tmp_path, capsys):
    missing = tmp_path / "nope.csv"
    _one_line_error(*_run(["fit", str(missing), "--target", "1.0"], capsys), "nope.csv")


def test_a_truncated_gzip(tmp_path, capsys):
    good = "run,batch_size,learning_rate,step,examples,metric\n" + "".join(
        f"r{b},{b},0.1,{s},{s * b},{1.0 / (s + 1)}\n" for b in (8, 16, 32) for s in range(50)
    )
    path = tmp_path / "sweep.csv.gz"
    path.write_bytes(gzip.compress(good.encode())[:-40])
    _one_line_error(*_run(["fit", str(path), "--target", "0.1"], capsys))


def test_traceback_on_request(tmp_path, monkeypatch):
    monkeypatch.setenv("EMPIRICAL_BATCH_TRACEBACK", "1")
    with pytest.raises((OSError, ValueError)):
        main(["fit", str(tmp_path), "--target", "1.0"])


def test_interrupt_exits_130(monkeypatch, capsys):
    import empirical_batch.cli.plan as plan_cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(plan_cli, "run", interrupted)
    code, err = _run(["plan", "--b-crit", "100", "--s-min", "1000"], capsys)
    assert code == 130 and "interrupted" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, word", [
    (["simulate", "--n-points", "1000000000"], "--n-points"),
    (["simulate", "--n-points", "0"], "--n-points"),
    (["simulate", "--steps", "0"], "--steps"),
    (["simulate", "--method", "monte_carlo", "--steps", "100000000000"], "Monte Carlo"),
])
def test_absurd_sizes_are_refused_at_once(argv, word, capsys):
    _one_line_error(*_run(argv, capsys), word)


def test_absurd_n_boot_is_refused_at_once(tmp_path, capsys):
    path = tmp_path / "steps.csv"
    path.write_text("batch_size,steps\n1,4\n2,3\n4,2.5\n")
    _one_line_error(*_run(["fit", str(path), "--n-boot", "1000000000"], capsys), "--n-boot")
    _one_line_error(*_run(["fit", str(path), "--n-boot", "-1"], capsys), "--n-boot")


def test_out_pointing_at_a_directory(tmp_path, capsys):
    path = tmp_path / "steps.csv"
    path.write_text("batch_size,steps\n1,40\n2,25\n4,17\n8,13\n16,12\n")
    _one_line_error(*_run(["fit", str(path), "--n-boot", "0", "--out", str(tmp_path)], capsys),
                    "directory")


def test_cuda_without_a_gpu_is_one_line(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    _one_line_error(*_run(["simulate", "--method", "monte_carlo", "--device", "cuda",
                           "--dims", "10", "--steps", "10", "--quiet"], capsys), "no CUDA")


def test_a_bug_inside_a_command_keeps_its_traceback(monkeypatch):
    """Only the library's errors and OSError are user errors: a builtin ValueError,
    TypeError or RuntimeError raised inside a command is a bug and propagates."""
    import empirical_batch.cli.plan as plan_cli

    for exc in (ValueError("bug"), TypeError("bug"), RuntimeError("bug"), KeyError("bug")):
        def broken(args, exc=exc):
            raise exc

        monkeypatch.setattr(plan_cli, "run", broken)
        with pytest.raises(type(exc)):
            main(["plan", "--b-crit", "100", "--s-min", "1000"])


def test_a_library_error_inside_a_command_is_one_line(monkeypatch, capsys):
    import empirical_batch.cli.plan as plan_cli
    from empirical_batch.errors import DataError

    def refused(args):
        raise DataError("the table lacks column 'loss'")

    monkeypatch.setattr(plan_cli, "run", refused)
    _one_line_error(*_run(["plan", "--b-crit", "100", "--s-min", "1000"], capsys),
                    "lacks column")


@pytest.mark.parametrize("content", [b"", b"a,b\n1,2\n3,4,5\n", b"\xff\xfe\x00bad\n"])
def test_bad_timings_file_for_plan(tmp_path, capsys, content):
    path = tmp_path / "timings.csv"
    path.write_bytes(content)
    _one_line_error(*_run(["plan", "--b-crit", "100", "--s-min", "1000",
                           "--timings", str(path)], capsys), "timings.csv")


@pytest.mark.parametrize("content", ['{"fits": [{"status": "identified"}]}', "[1, 2",
                                     '"just a string"'])
def test_bad_fit_json_for_plan(tmp_path, capsys, content):
    path = tmp_path / "fit.json"
    path.write_text(content)
    _one_line_error(*_run(["plan", "--fit", str(path)], capsys), "fit.json")


def test_text_in_a_numeric_column_names_the_file_row_and_column(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("examples,loss\n100,3.0\n200,abc\n300,2.5\n")
    assert main(["schedule", "--power-law", "100,0.5", "--loss-curve", str(curve),
                 "--batch-size", "32", "--base-batch", "32"]) == 2
    err = capsys.readouterr().err
    assert f"{curve}, row 1, column 'loss': not a number: 'abc'" in err
    assert "Traceback" not in err
    timings = tmp_path / "timings.csv"
    timings.write_text("micro_batch,devices,accumulation,step_seconds\n8,1,1,0.1\n"
                       "16,1,1,slow\n32,1,1,0.3\n8,2,1,0.12\n")
    assert main(["plan", "--b-crit", "100", "--s-min", "1000", "--timings",
                 str(timings)]) == 2
    assert f"{timings}, row 1, column 'step_seconds': not a number: 'slow'" in \
        capsys.readouterr().err


def test_a_json_lines_line_that_is_not_an_object_is_named(tmp_path, capsys):
    log = tmp_path / "gns.jsonl"
    log.write_text('{"step": 1, "b_simple": 10}\n[1, 2]\n')
    argv = ["transfer", "--from-batch", "8", "--to-batch", "16", "--optimizer", "sgd",
            "--lr", "0.1", "--noise-log", str(log)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{log}, line 2: a JSON Lines noise log holds one object per line" in err
    log.write_text('{"step": 1, "b_simple": 10}\n{"step": 2, "b_simple": Infinity}\n'
                   '{"step": 3, "b_simple": "inf"}\n{"step": 4, "b_simple": 12.5}\n')
    assert main(argv) == 0  # JSON's own non-finite spellings still read


@pytest.mark.parametrize("argv, flag", [
    (["fit", "sweep.csv", "--level", "1.5"], "--level"),
    (["fit", "sweep.csv", "--level", "95"], "--level"),
    (["law", "fit", "grid.csv", "--level", "0"], "--level"),
])
def test_a_level_out_of_range_names_the_flag(capsys, argv, flag):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be in (0, 1)" in err and "level must be" not in err
