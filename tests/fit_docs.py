"""`empirical-batch fit --json` documents for the tests of the commands that read them
(`plan --fit`, `schedule --fit`): fits with given values, written as `fit` writes them."""

from __future__ import annotations

import math

from empirical_batch.fit import TradeoffFit
from empirical_batch.result import Interval, dumps, json_safe


def fit_entry(s_min=1000.0, e_min=None, *, b_crit=None, status="identified", target=None,
              unit="examples", group=None):
    """One fit of the document (``e_min`` or ``b_crit`` given), as a plain dict."""
    e_min = s_min * b_crit if e_min is None else e_min
    b = e_min / s_min
    ends = {"identified": (0.8 * b, 1.25 * b), "lower_bound": (b, math.inf),
            "upper_bound": (0.0, b)}.get(status, (math.nan, math.nan))
    fit = TradeoffFit(
        s_min=s_min, e_min=e_min, b_crit=b, b_crit_interval=Interval(*ends, 0.95),
        s_min_interval=Interval(0.9 * s_min, 1.1 * s_min, 0.95),
        e_min_interval=Interval(0.9 * e_min, 1.1 * e_min, 0.95), bootstrap="seeds",
        n_boot=100, batch_sizes=(), steps=(), log_residuals=(), log_rmse=0.01,
        n_batch_sizes=6, n_below=3, n_above=3, extrapolation=False, bound="none",
        target=target, status=status, unit=unit)
    return json_safe(fit) | ({} if group is None else {"group": group})


def fit_document(*entries, unit=None) -> str:
    """The JSON of a document holding ``entries`` (`fit_entry` dicts, or None)."""
    doc = {"source": "test", "fits": list(entries)}
    return dumps(doc if unit is None else {**doc, "unit": unit})
