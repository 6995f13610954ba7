"""README.md's Python examples run, and print what the README says they print.

Every ```python block is executed (in order, each in a fresh namespace, in this
interpreter); when the block is followed by a ```text block, that block must equal
the printed output exactly (trailing whitespace aside). The examples use fixed seeds
and print rounded numbers, so a mismatch means the library's answer changed: update
the README from the real output.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _examples() -> list[tuple[str, str | None]]:
    blocks = [(m.group(1), m.group(2)) for m in _BLOCK.finditer(README.read_text())]
    out = []
    for i, (lang, code) in enumerate(blocks):
        if lang != "python":
            continue
        after = blocks[i + 1] if i + 1 < len(blocks) else None
        out.append((code, after[1] if after and after[0] == "text" else None))
    return out


EXAMPLES = _examples()


def test_readme_has_examples():
    assert len(EXAMPLES) >= 3, "README.md should show measure, fit and plan examples"


@pytest.mark.parametrize("code,expected", EXAMPLES,
                         ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_readme_example(code, expected, tmp_path, monkeypatch):
    if "torch" in code:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)  # examples must not depend on (or litter) the checkout
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    if expected is not None:
        got = [line.rstrip() for line in buf.getvalue().rstrip().splitlines()]
        want = [line.rstrip() for line in expected.rstrip().splitlines()]
        assert got == want


def test_readme_demo_output_is_current(tmp_path):
    """Every line of the README's trimmed demo output is printed by the demo, in order."""
    text = README.read_text()
    anchor = text.index("python -m empirical_batch.cli demo --no-figure")
    block = _BLOCK.search(text, anchor)
    assert block is not None and block.group(1) == "text"
    want = [line.rstrip() for line in block.group(2).splitlines()
            if line.strip() and line.strip() != "…"]
    env_root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run(
        [sys.executable, "-m", "empirical_batch.cli", "demo", "--no-figure"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": env_root},
    ).stdout
    got = [line.rstrip() for line in out.splitlines()]
    pos = 0
    for line in want:
        assert line in got[pos:], f"README demo line not in the demo's output (in order): {line!r}"
        pos = got.index(line, pos) + 1


def test_shell_examples_activate_the_environment_first():
    """After `make demo` the command line is in .venv/bin: the README activates it before
    its first shell example that calls `empirical-batch`."""
    text = README.read_text()
    activate = text.index("source .venv/bin/activate")
    shell = [m for m in _BLOCK.finditer(text) if m.group(1) == "bash"]
    calls = [m.start() for m in shell if re.search(r"^empirical-batch ", m.group(2), re.M)]
    assert calls and activate < min(calls)


def test_every_extra_is_listed_for_users():
    """README.md and the docs' getting-started page name each extra of pyproject.toml."""
    import tomllib

    root = README.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for page in (README, root / "docs" / "getting-started.md"):
        listed = set(re.findall(r"`\[([\w-]+)\]`", page.read_text()))
        assert listed == set(extras), (page.name, sorted(listed ^ set(extras)))
