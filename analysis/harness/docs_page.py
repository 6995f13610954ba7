"""Refresh docs/validation.md from a harness output folder (tables verbatim, figures copied).

    python -m analysis.harness.docs_page data/harness
    python -m analysis.harness.docs_page data/harness-full --section full

Replaces the text between ``<!-- BEGIN harness report -->`` and ``<!-- END harness
report -->`` in ``docs/validation.md`` with the folder's ``report.md`` (headings one
level down) and copies its figures to ``docs/img/harness/``. The prose around the
markers quotes these tables; it is written by hand.

With ``--section NAME`` the markers are ``<!-- BEGIN harness report NAME -->`` …
``<!-- END harness report NAME -->``, the figures go to ``img/harness-NAME/`` beside
the page and links to them are written into the section (the ``full`` GPU run has
a section of its own, so it does not overwrite the committed ``cpu`` tables that the
hand-written prose quotes). ``--page`` refreshes another copy of the page (the
runbook's CPU smoke mode uses one, so a smoke run leaves ``docs/`` alone).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- BEGIN harness report -->", "<!-- END harness report -->"


def markers(section: str | None = None) -> tuple[str, str]:
    """The BEGIN/END comments of ``section`` (None: the default section)."""
    if section is None:
        return BEGIN, END
    if not re.fullmatch(r"[A-Za-z0-9_-]+", section):
        raise ValueError(f"section must be letters, digits, '-' or '_', got {section!r}")
    return f"<!-- BEGIN harness report {section} -->", f"<!-- END harness report {section} -->"


def refresh(out: str | Path, page: Path = ROOT / "docs" / "validation.md",
            section: str | None = None) -> Path:
    out, page = Path(out), Path(page)
    begin, end = markers(section)
    report = (out / "report.md").read_text()
    body = re.sub(r"^# .*\n", "", report, count=1)
    body = re.sub(r"^(#+) ", r"#\1 ", body, flags=re.M)
    text = page.read_text()
    if begin not in text or end not in text:
        raise ValueError(f"{page} lacks the markers {begin!r} … {end!r}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    img = page.parent / "img" / ("harness" if section is None else f"harness-{section}")
    img.mkdir(parents=True, exist_ok=True)
    figures = sorted((out / "figures").glob("*.png"))
    for fig in figures:
        shutil.copy(fig, img / fig.name)
    try:  # a folder inside the checkout is named relative to it (no local paths on the page)
        shown = out.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        shown = out.as_posix()
    note = f"\n_Tables verbatim from `{shown}/report.md`._\n\n"
    links = ""
    if section is not None and figures:
        rel = Path(os.path.relpath(img, page.parent)).as_posix()
        links = "\n\n" + "\n".join(f"![{f.stem}]({rel}/{f.name})" for f in figures)
    page.write_text(head + begin + note + body.strip() + links + "\n\n" + end + tail)
    return page


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default=str(ROOT / "data" / "harness"),
                   help="harness output folder (holds report.md and figures/)")
    p.add_argument("--section", default=None,
                   help="refresh the section marked 'harness report SECTION' (e.g. full)")
    p.add_argument("--page", default=str(ROOT / "docs" / "validation.md"),
                   help="the page to refresh (default docs/validation.md)")
    args = p.parse_args(argv)
    print(refresh(args.out, Path(args.page), args.section))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
