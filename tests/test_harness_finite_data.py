"""The finite-data check of the digits gap (analysis/digits_finite_data.py) on the
committed full results: the statement in docs/validation.md, held to its command."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import digits_finite_data as fd


def test_digits_noise_scales_are_the_finite_set_values():
    # the full preset measures all D = 1437 training examples: the report's noise scales
    # (claims, averages) are the plug-in values of that set
    table = fd.ratios()
    assert set(table["optimizer"]) == {"sgd", "adam"}
    np.testing.assert_allclose(table["b_crit_over_noise_local"],
                               table["b_crit_over_noise_plugin"], rtol=1e-4)
    noise = pd.read_csv(fd.RESULTS / "noise_along_reference.csv")
    d = noise[noise["task"] == "digits"]
    assert (d["population_size"] == 1437).all() and (d["n_examples"] == 1437).all()
    np.testing.assert_allclose(d["b_noise_pop"], d["b_noise"], rtol=1e-4)


def test_averaged_finite_set_b_noise_is_within_a_factor_2_for_sgd():
    table = fd.ratios()
    sgd = table[table["optimizer"] == "sgd"].dropna(subset=["b_crit_over_noise_avg"])
    assert 0.5 <= sgd.iloc[-1]["b_crit_over_noise_avg"] <= 2
    assert "sgd: at the hardest target" in fd.verdict(table)
    assert "is within a factor 2" in fd.verdict(table).splitlines()[0]


def test_the_cpu_readme_describes_the_noise_values_the_cpu_tables_hold():
    # data/harness/README.md names, per task, the sample size and the population the
    # committed noise values are corrected for: both must be what the table records
    import re
    from pathlib import Path

    from empirical_batch.measure import HessianNoiseScale

    folder = Path(__file__).resolve().parents[1] / "data" / "harness"
    readme = (folder / "README.md").read_text()
    noise = pd.read_csv(folder / "results" / "noise_along_reference.csv")
    flat = readme.replace("\n", " ")
    pops = {t: v for names, v in re.findall(r"- ((?:`\w+`,? )+)\(`population_size` = (\w+)\)",
                                            readme)
            for t in re.findall(r"`(\w+)`", names)}
    sizes = {t: int(n) for n, names in re.findall(r"(\d+) for ((?:`\w+`(?: and )?)+)", flat)
             for t in re.findall(r"`(\w+)`", names)}
    for task, rows in noise.groupby("task"):
        pop = rows["population_size"].unique()
        assert len(pop) == 1
        assert pops[task] == ("inf" if np.isinf(pop[0]) else f"{pop[0]:.0f}"), task
        assert sizes[task] == int(rows["n_examples"].iloc[0]), task
    # digits in cpu: 512 of D = 1437 drawn without replacement, so the stored population
    # value is the finite-population one (1/n - 1/D), not the unbounded one
    d = noise[noise["task"] == "digits"].iloc[3]
    args = {k: d[k] for k in ("b_noise", "b_simple", "g2", "ghg", "trace_sigma",
                              "trace_h_sigma")}
    h = HessianNoiseScale(**args, n_examples=int(d["n_examples"]), ddof=int(d["ddof"]))
    assert d["b_noise_pop"] == pytest.approx(h.unbiased(1437.0).b_noise, rel=1e-5)
    assert d["b_noise_pop"] != pytest.approx(h.unbiased(float("inf")).b_noise, rel=1e-2)
    assert "1/n − 1/D" in readme
