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
