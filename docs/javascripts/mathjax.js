// MathJax 3 configuration; loaded before assets/mathjax/tex-mml-chtml.js.
// Markdown pages: pymdownx.arithmatex (generic) wraps math in .arithmatex as \( \) and
// \[ \]. Notebook pages: mkdocs-jupyter leaves markdown cells' math as $ $ and $$ $$
// inside .jp-MarkdownOutput, as Jupyter does. The sidebar links (.md-nav__link) repeat
// headings, some with math.
//
// The page content (.md-content) is ignored, and only those classes inside it are
// typeset, so a literal "$" in prose, code or cell outputs is never read as math.
// MathJax re-tests ignoreHtmlClass on every element below a processed one: the pattern
// must name a class (a pattern that matches every class, or none, such as ".*", would
// switch typesetting off again on each <p> inside a notebook cell).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: "md-content",
    processHtmlClass: "arithmatex|jp-MarkdownOutput|md-nav__link",
  },
};
