"""The finite-data check of the digits gap (analysis/digits_finite_data.py) on the
committed full results: the statement in docs/validation.md, held to its command."""

from __future__ import annotations

import numpy as np

from analysis import digits_finite_data as fd


def test_finite_set_values_do_not_close_the_digits_gap():
    table = fd.ratios()
    assert set(table["optimizer"]) == {"sgd", "adam"}
    for _, rows in table.groupby("optimizer"):
        last = rows.dropna(subset=["b_crit_over_noise_finite"]).iloc[-1]
        assert last["b_crit_over_noise_finite"] < 0.25  # B_crit stays far below B_noise
        assert last["b_crit_over_simple_finite"] < 0.25
    factor = table["b_crit_over_noise_finite"] / table["b_crit_over_noise_pop"]
    assert 1.0 <= np.nanmin(factor) and np.nanmax(factor) < 2.0
    assert "does not close" in fd.verdict(table) and "closes the gap" not in fd.verdict(table)
