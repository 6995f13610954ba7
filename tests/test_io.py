import os

import pytest

from empirical_batch._io import atomic_path, atomic_write, atomic_write_text


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
