import os

import pytest

from empirical_batch._io import atomic_path, atomic_write, atomic_write_text, read_json


def test_atomic_write_replaces_whole_file(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("old")
    atomic_write_text(p, "new content")
    assert p.read_text() == "new content"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_interrupted_write_leaves_old_file_and_no_temp(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(p) as fh:
        fh.write("half a line")
        raise RuntimeError("interrupted")
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.csv"]


def test_atomic_path_keeps_suffix_and_refuses_directory(tmp_path):
    with atomic_path(tmp_path / "fig.png") as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path
        tmp.write_bytes(b"x")
    assert (tmp_path / "fig.png").read_bytes() == b"x"
    with pytest.raises(IsADirectoryError, match="directory"):
        atomic_write_text(tmp_path, "x")
    with pytest.raises(ValueError, match="mode"):
        with atomic_write(tmp_path / "b", "a"):
            pass


def test_permissions_are_those_of_a_plain_write(tmp_path):
    """mkstemp makes 0600 files: a new file must get the umask's permissions, an existing
    one keep its own."""
    import stat

    umask = os.umask(0o022)
    os.umask(umask)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    new = atomic_write_text(tmp_path / "new.txt", "y")
    assert stat.S_IMODE(new.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    old = tmp_path / "old.txt"
    old.write_text("a")
    old.chmod(0o640)
    atomic_write_text(old, "b")
    assert stat.S_IMODE(old.stat().st_mode) == 0o640 and old.read_text() == "b"


# ------------------------------------------------------------ numbers past the float range
def test_a_number_past_the_float_range_is_named_not_read_as_inf(tmp_path):
    """'1e400' parses to inf, which a sweep takes for a diverged run and a noise log for
    an unresolved gradient: refused naming file, row, column and the number as written;
    a written 'inf' stays an infinity."""
    from empirical_batch.errors import DataError
    from empirical_batch.noise_log import load_noise_log
    from empirical_batch.sweeps import load_sweep

    sweep = tmp_path / "sweep.csv"
    sweep.write_text("run,batch_size,learning_rate,step,examples,loss\n"
                     "a,8,0.1,1,8,1.0\na,8,0.1,2,16,-1e400\n")
    with pytest.raises(DataError, match=r"sweep.csv, row 1, column 'loss': -1e400 is past"):
        load_sweep(sweep)
    sweep.write_text("run,batch_size,learning_rate,step,examples,loss\n"
                     "a,8,0.1,1,8,1.0\na,8,0.1,2,16,inf\n")
    assert load_sweep(sweep).diverged_runs == ["a"]
    log = tmp_path / "noise.csv"
    log.write_text("step,examples,b_simple\n1,8,30\n2,16,1E+400\n")
    with pytest.raises(DataError, match=r"row 1, column 'b_simple': 1E\+400 is past"):
        load_noise_log(log)
    lines = tmp_path / "noise.jsonl"
    lines.write_text('{"step": 1, "examples": 8, "b_simple": 30.0}\n'
                     '{"step": 2, "examples": 16, "b_simple": 1e400}\n')
    with pytest.raises(DataError, match=r"noise.jsonl, line 2: the number 1e400 is past"):
        load_noise_log(lines)
    doc = tmp_path / "fit.json"
    doc.write_text('{"b_crit": 2e308}')
    with pytest.raises(DataError, match=r"fit.json: the number 2e308 is past"):
        read_json(doc)
