"""Refresh docs/validation.md from a harness output folder (tables verbatim, figures copied).

    python -m analysis.harness.docs_page data/harness

Replaces the text between ``<!-- BEGIN harness report -->`` and ``<!-- END harness
report -->`` in ``docs/validation.md`` with the folder's ``report.md`` (headings one
level down) and copies its figures to ``docs/img/harness/``. The prose around the
markers quotes these tables; it is written by hand.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- BEGIN harness report -->", "<!-- END harness report -->"


def refresh(out: str | Path, page: Path = ROOT / "docs" / "validation.md") -> Path:
    out = Path(out)
    report = (out / "report.md").read_text()
    body = re.sub(r"^# .*\n", "", report, count=1)
    body = re.sub(r"^(#+) ", r"#\1 ", body, flags=re.M)
    text = page.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{page} lacks the markers {BEGIN!r} … {END!r}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    note = f"\n_Tables verbatim from `{out.as_posix()}/report.md`._\n\n"
    page.write_text(head + BEGIN + note + body.strip() + "\n\n" + END + tail)
    img = ROOT / "docs" / "img" / "harness"
    img.mkdir(parents=True, exist_ok=True)
    for fig in sorted((out / "figures").glob("*.png")):
        shutil.copy(fig, img / fig.name)
    return page


if __name__ == "__main__":  # pragma: no cover
    print(refresh(sys.argv[1] if len(sys.argv) > 1 else ROOT / "data" / "harness"))
