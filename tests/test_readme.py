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
import re
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
