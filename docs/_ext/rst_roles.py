"""Griffe extension for the docs build: render the RST markup some docstrings use.

Several modules write math and cross-references the Sphinx way (``:math:`x```,
``.. math::`` blocks, ``:func:`name```). The API pages are Markdown with arithmatex,
so before mkdocstrings renders a docstring this extension rewrites, in the docstring
text only (the source files are untouched):

- ``:math:`x``` → ``$x$``;
- a ``.. math::`` directive (inline argument and/or indented block) → ``$$ … $$``;
- ``:func:`~a.b.c``` (also ``class``, ``meth``, ``mod``, ``attr``, ``data``, ``obj``,
  ``exc``) → ```c``` (the last component with ``~``, else the whole name).

Registered in mkdocs.yml under the python handler's ``extensions``.
"""

from __future__ import annotations

import re

import griffe

_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_XREF_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc):`(~?)([^`]+)`")


def _xref(match: re.Match) -> str:
    tilde, target = match.groups()
    if "<" in target and target.endswith(">"):  # `text <target>`
        return f"`{target.split('<')[0].strip()}`"
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def _math_blocks(text: str) -> str:
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(\s*)\.\. math::\s*(.*)$", line)
        if not m:
            out.append(line)
            i += 1
            continue
        indent, first = m.groups()
        body = [first] if first.strip() else []
        i += 1
        # the block: following lines indented deeper than the directive, or blank
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            body.append(lines[i].strip())
            i += 1
        while body and not body[-1]:
            body.pop()
        content = "\n".join(b for b in body if b)
        out.extend([f"{indent}$$", *(f"{indent}{b}" for b in content.splitlines()),
                    f"{indent}$$", ""])
    return "\n".join(out)


def convert(text: str) -> str:
    """The docstring ``text`` with RST math and cross-reference roles made Markdown."""
    if ".. math::" in text:
        text = _math_blocks(text)
    text = _MATH_ROLE.sub(lambda m: f"${m.group(1)}$", text)
    return _XREF_ROLE.sub(_xref, text)


class RSTRoles(griffe.Extension):
    """Rewrite RST math/cross-reference markup in every docstring of the package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        seen: set[int] = set()

        def visit(obj) -> None:
            if id(obj) in seen or obj.is_alias:
                return
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = convert(obj.docstring.value)
            for member in obj.members.values():
                visit(member)

        visit(pkg)
