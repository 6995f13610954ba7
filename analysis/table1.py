"""Table 1 of McCandlish et al. (2018): how far B_simple sits from B_crit, and how much
each grows over training, computed from the paper's table as the library ships it
(`empirical_batch.datasets.mccandlish2018_table1`).

    python -m analysis.table1

Ranges (Atari: over games) are summarised by their geometric midpoint; the printed
``*_low``/``*_high`` ratios give the extremes a range allows. This is the command behind the
statements in `data/README.md` (tests/test_fit_data.py holds them to it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from empirical_batch.datasets import mccandlish2018_table1


def _mid(t: pd.DataFrame, col: str) -> pd.Series:
    return np.sqrt(t[f"{col}_low"] * t[f"{col}_high"])


def summary(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per row: B_simple/B_crit at the start and averaged, and the growth of each."""
    t = mccandlish2018_table1().frame if table is None else table
    out = pd.DataFrame({"task": t["task"], "unit": t["unit"]})
    out["simple_over_crit_start"] = _mid(t, "b_simple_start") / _mid(t, "b_crit_start")
    out["simple_over_crit_average"] = _mid(t, "b_simple_average") / _mid(t, "b_crit_average")
    out["crit_average_is_lower_bound"] = t["b_crit_average_is_lower_bound"]
    out["crit_growth"] = _mid(t, "b_crit_average") / _mid(t, "b_crit_start")
    out["simple_growth"] = _mid(t, "b_simple_average") / _mid(t, "b_simple_start")
    return out


if __name__ == "__main__":
    with pd.option_context("display.width", 120, "display.precision", 3):
        print(summary().to_string(index=False))
