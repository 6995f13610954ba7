"""docs_page: the report's tables land between the right markers, figures beside the page."""

from __future__ import annotations

import pytest

from analysis.harness.docs_page import main, refresh

PAGE = """# Validation
hand-written prose
<!-- BEGIN harness report -->
cpu tables
<!-- END harness report -->
## Running the GPU validation
<!-- BEGIN harness report full -->
pending
<!-- END harness report full -->
tail
"""


@pytest.fixture
def out(tmp_path):
    folder = tmp_path / "run"
    (folder / "figures").mkdir(parents=True)
    (folder / "report.md").write_text("# Harness report\n## B_crit\n| a |\n|---|\n| 1 |\n")
    (folder / "figures" / "digits_one_step.png").write_bytes(b"png")
    return folder


def test_section_full_leaves_the_default_section_alone(tmp_path, out):
    page = tmp_path / "docs" / "validation.md"
    page.parent.mkdir()
    page.write_text(PAGE)
    assert main([str(out), "--section", "full", "--page", str(page)]) == 0
    text = page.read_text()
    default = text.split("<!-- BEGIN harness report -->")[1].split("<!-- END harness report -->")
    assert default[0] == "\ncpu tables\n"
    full = text.split("<!-- BEGIN harness report full -->")[1].split(
        "<!-- END harness report full -->")[0]
    assert "pending" not in full and "### B_crit" in full  # headings one level down
    assert "![digits_one_step](img/harness-full/digits_one_step.png)" in full
    assert (page.parent / "img" / "harness-full" / "digits_one_step.png").read_bytes() == b"png"
    assert text.endswith("tail\n")


def test_default_section_and_missing_markers(tmp_path, out):
    page = tmp_path / "validation.md"
    page.write_text(PAGE)
    refresh(out, page)
    text = page.read_text()
    assert "cpu tables" not in text and "pending" in text  # only the default section
    assert (tmp_path / "img" / "harness" / "digits_one_step.png").exists()
    with pytest.raises(ValueError, match="lacks the markers"):
        refresh(out, page, section="other")
    with pytest.raises(ValueError, match="section must be"):
        refresh(out, page, section="a b")
