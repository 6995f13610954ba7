"""The transcribed tables in data/: well-formed, cited, and consistent with the
statements made about them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from empirical_batch.fit import fit_power_law

DATA = Path(__file__).resolve().parents[1] / "data"


def test_paper_table1():
    t = pd.read_csv(DATA / "paper_table1.csv")
    assert len(t) == 6 and t["source"].str.contains("McCandlish et al. 2018").all()
    ratio = t["b_simple_average"] / t["b_crit_average"]
    # "B_simple predicts B_crit within about an order of magnitude"
    assert ((ratio > 0.1) & (ratio < 10)).all()
    start = t.dropna(subset=["b_crit_start"])
    assert ((start["b_simple_start"] / start["b_crit_start"]).between(0.1, 10)).all()
    # both grow over training (CIFAR-10 by only 3x and 5x)
    assert (start["b_crit_average"] > start["b_crit_start"]).all()
    assert (t["b_simple_average"] > t["b_simple_start"]).all()
    cifar = t.set_index("task").loc["CIFAR10"]
    assert cifar["b_crit_average"] / cifar["b_crit_start"] == 3


def test_kaplan_constants_doubling_per_13_percent():
    k = pd.read_csv(DATA / "kaplan2020_constants.csv").set_index("name")["value"]
    b_star, alpha = k["B_star"], k["alpha_B"]
    assert b_star == 2e8 and alpha == 0.21
    # "B_crit roughly doubles for every 13 % fall in loss"
    assert (1 / 0.87) ** (1 / alpha) == pytest.approx(2, rel=0.05)
    # fit_power_law recovers the law from points sampled on it
    loss = np.linspace(2, 4, 7)
    law = fit_power_law(loss, b_star / loss ** (1 / alpha))
    assert law.coefficient == pytest.approx(b_star, rel=1e-9)
    assert law.alpha_from_exponent == pytest.approx(alpha, rel=1e-9)
