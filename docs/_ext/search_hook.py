"""Keep notebook outputs (tables, printed arrays) out of the search index.

mkdocs-jupyter renders each output in a ``jp-OutputArea`` block; Material's search
plugin skips any element marked ``data-search-exclude``. The code and the prose of the
notebooks stay searchable."""

from __future__ import annotations

import re

_OUTPUT = re.compile(r'<div class="jp-OutputArea(?=[ "])')


def on_page_content(html, page, config, files):
    if page.file.src_uri.endswith(".ipynb"):
        return _OUTPUT.sub('<div data-search-exclude class="jp-OutputArea', html)
    return html
