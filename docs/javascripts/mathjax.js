// MathJax 3 configuration; loaded before assets/mathjax/tex-mml-chtml.js.
// Markdown pages: pymdownx.arithmatex (generic) wraps math in .arithmatex as \( \) and
// \[ \]. Notebook pages: mkdocs-jupyter leaves markdown cells' math as $ $ and $$ $$
// inside .jp-MarkdownOutput, as Jupyter does. The sidebar links (.md-nav__link) repeat
// headings, some with math. Only these three classes are typeset, so a literal "$"
// anywhere else (prose, code, cell outputs) is never read as math.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex|jp-MarkdownOutput|md-nav__link",
  },
};
