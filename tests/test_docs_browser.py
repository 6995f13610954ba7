"""The built documentation site, loaded page by page in a real (headless) browser.

`make test` builds the site after the test suite and then runs this file with
``EMPIRICAL_BATCH_SITE`` pointing at it. The site is served on 127.0.0.1 and every
page is loaded in Debian's Chromium (``/usr/bin/chromium``, driven by the
``playwright`` package through ``executable_path``: no browser is downloaded). A page
fails on

* an equation left as raw TeX in the text (``$…$``, ``\\(…\\)``, ``\\[…\\]``) or a
  MathJax error, and pages whose source has math must render at least one equation;
* a console error or an uncaught page exception;
* a broken image, or a link to a page or file of the site that does not exist;
* a code cell wider than its box that cannot be scrolled (cut off).

Without the site or without Chromium the tests skip and say why.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

SITE = os.environ.get("EMPIRICAL_BATCH_SITE")
CHROMIUM = os.environ.get("EMPIRICAL_BATCH_CHROMIUM") or shutil.which("chromium")

pytestmark = [
    pytest.mark.skipif(
        not SITE, reason="no built site: `make test` builds it and sets EMPIRICAL_BATCH_SITE"
    ),
    pytest.mark.skipif(
        not CHROMIUM,
        reason="no Chromium: install Debian's `chromium` package (`.ci/run` does) "
        "or set EMPIRICAL_BATCH_CHROMIUM",
    ),
]

# Text (outside code, outputs and rendered math) that still looks like TeX delimiters.
RAW_TEX = re.compile(r"\$[^$\s][^$\n]*?\$|\\\(|\\\)|\\\[|\\\]|\\frac|\\mathrm")

# In the page: MathJax finished? then what is left of the text once code, outputs and
# typeset math are removed; the equations typeset; errors; images; links; cut-off code.
INSPECT = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  const content = document.querySelector("article") || document.body;
  const clone = content.cloneNode(true);
  clone.querySelectorAll(
    "pre, code, mjx-container, .jp-OutputArea, .jp-CodeCell .jp-InputArea, " +
    "script, style, .headerlink"
  ).forEach((n) => n.remove());
  // wider than its box with no scrollable box around it: cut off. (Headless Chromium
  // hides scrollbars, so "scrollable" is what can be tested.) Notebook code cells must
  // not overflow at all: their scrollbars are hidden by the theme (extra.css wraps them).
  const scrolls = (el) =>
    ["auto", "scroll"].includes(getComputedStyle(el).overflowX) &&
    el.scrollWidth > el.clientWidth;
  const cut = [...document.querySelectorAll("article pre, article mjx-container")]
    .filter((p) => {
      if (p.scrollWidth <= p.clientWidth + 1) return false;
      if (p.closest(".highlight-ipynb, .jp-OutputArea")) return true;
      for (let el = p; el && el !== document.body; el = el.parentElement) {
        if (scrolls(el)) return false;
      }
      return true;
    });
  return {
    text: clone.innerText,
    equations: document.querySelectorAll("article mjx-container").length,
    merrors: document.querySelectorAll("mjx-merror").length,
    images: [...document.images].filter((i) => !(i.complete && i.naturalWidth > 0))
      .map((i) => i.getAttribute("src")),
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
    cut: cut.length,
  };
}
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass


@pytest.fixture(scope="module")
def site():
    root = Path(SITE)
    if not (root / "index.html").is_file():
        pytest.fail(f"EMPIRICAL_BATCH_SITE={SITE} holds no built site (no index.html)")
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def _pages(root: Path) -> list[str]:
    pages = []
    for html in sorted(root.rglob("index.html")):
        rel = html.relative_to(root).parent.as_posix()
        if rel.startswith(("assets", "search")):
            continue
        pages.append("" if rel == "." else rel + "/")
    return pages


def _source_has_math(root: Path, page: str) -> bool:
    """Does the page's source (markdown or notebook) contain math markup?"""
    repo = Path(__file__).resolve().parents[1]
    name = page.rstrip("/") or "index"
    if name.startswith("notebooks/") and name != "notebooks":
        src = repo / (name + ".ipynb")
    else:
        src = repo / "docs" / (name + ".md")
    if not src.is_file():
        return False
    text = src.read_text(encoding="utf-8")
    # code is not math: fenced blocks and inline code may hold shell variables ($VAR)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return bool(re.search(r"\$[^$\s]", text))


def _exists(root: Path, url: str) -> bool:
    path = unquote(urlsplit(url).path).lstrip("/")
    target = root / path
    return target.is_file() or (target / "index.html").is_file()


def test_every_page_renders_cleanly(site, browser):
    root, base = site
    pages = _pages(root)
    assert len(pages) >= 10, f"only {len(pages)} pages found under {root}"
    problems: list[str] = []
    counts: dict[str, int] = {}
    for page in pages:
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        console: list[str] = []
        tab.on("console", lambda m, c=console: c.append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e, c=console: c.append(f"uncaught: {e}"))
        tab.goto(urljoin(base, page), wait_until="load")
        found = tab.evaluate(INSPECT)
        tab.close()
        counts[page or "/"] = found["equations"]
        where = page or "index"
        raw = RAW_TEX.findall(found["text"])
        if raw:
            problems.append(f"{where}: raw TeX left in the text: {raw[:3]}")
        if found["merrors"]:
            problems.append(f"{where}: {found['merrors']} MathJax errors")
        if _source_has_math(root, page) and found["equations"] == 0:
            problems.append(f"{where}: its source has math but no equation was typeset")
        problems += [f"{where}: console error: {c}" for c in console]
        problems += [f"{where}: broken image {src}" for src in found["images"]]
        for link in found["links"]:
            if link.startswith(base) and not _exists(root, link):
                problems.append(f"{where}: broken link {link[len(base) - 1:]}")
        if found["cut"]:
            problems.append(f"{where}: {found['cut']} code blocks or equations cut off")
    print("\nequations typeset per page:")
    for page, n in counts.items():
        print(f"  {n:5d}  {page}")
    assert not problems, "\n".join(problems)
    assert sum(counts.values()) > 0
