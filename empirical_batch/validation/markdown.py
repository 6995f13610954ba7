"""The harness report's Markdown: one number format and one table writer."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["fmt", "md_table"]


def fmt(x, digits: int = 3) -> str:
    """A cell: strings as they are, booleans as yes/no, missing or non-finite numbers as
    "–", other numbers to ``digits`` significant digits."""
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    if isinstance(x, bool | np.bool_):
        return "yes" if x else "no"
    return f"{x:.{digits}g}"


def md_table(frame: pd.DataFrame, cols: dict) -> str:
    """The columns ``cols`` (name → heading) of ``frame`` that it has, as a Markdown table."""
    cols = {c: name for c, name in cols.items() if c in frame.columns}
    head = "| " + " | ".join(cols.values()) + " |\n|" + "---|" * len(cols) + "\n"
    body = "".join("| " + " | ".join(fmt(r[c]).replace("|", "\\|") for c in cols) + " |\n"
                   for _, r in frame.iterrows())
    return head + body
