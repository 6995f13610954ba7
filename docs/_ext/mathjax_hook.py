"""MkDocs hook: serve MathJax from the built site instead of a CDN.

MathJax 3 comes from the PyPI package ``django-static-mathjax`` (the unmodified
MathJax 3.2.2 distribution as static files; it does not depend on Django, and no
Django code runs). At build time this hook adds the files the ``tex-mml-chtml``
component can load to the site under ``assets/mathjax/``: the component itself, its
CommonHTML output and woff-v2 fonts, and the input extensions, menu and
accessibility modules it loads on demand. The other combined bundles and the SVG
output are left out. The built site then renders equations with no network access,
and the repository vendors no JavaScript.

Registered in mkdocs.yml under ``hooks``; the page loads
``assets/mathjax/tex-mml-chtml.js`` (``extra_javascript``), configured by
``docs/javascripts/mathjax.js``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

DIST = "django-static-mathjax"
SITE_DIR = "assets/mathjax"
COMPONENT = "tex-mml-chtml.js"
# output/svg.js and output/svg/: the CommonHTML component never loads them
SKIP_PREFIX = "output/svg"


def _es5_dir() -> Path:
    try:
        dist = distribution(DIST)
    except PackageNotFoundError as exc:
        raise PluginError(
            f"the docs need the {DIST} package (MathJax assets): "
            "pip install -e '.[docs]'"
        ) from exc
    es5 = Path(str(dist.locate_file("mathjax/static/mathjax/es5")))
    if not (es5 / COMPONENT).is_file():
        raise PluginError(f"{es5 / COMPONENT} not found in {DIST} {dist.version}")
    return es5


def _wanted(rel: Path) -> bool:
    if len(rel.parts) == 1:  # top level: only the one combined component
        return rel.name == COMPONENT
    return not rel.as_posix().startswith(SKIP_PREFIX)


def on_files(files, config):
    es5 = _es5_dir()
    for path in sorted(p for p in es5.rglob("*") if p.is_file()):
        rel = path.relative_to(es5)
        if _wanted(rel):
            files.append(
                File.generated(config, f"{SITE_DIR}/{rel.as_posix()}", abs_src_path=str(path))
            )
    return files
