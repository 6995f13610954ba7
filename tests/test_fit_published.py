"""Fits on published sweeps (`empirical_batch.datasets`; the fetched ones skip when absent)."""

from __future__ import annotations

import numpy as np
import pytest

from empirical_batch import datasets
from empirical_batch.fit import critical_batch_curve, fit_power_law, fit_tradeoff


def test_zhang2024_b_crit_grows_with_model_size():
    z = datasets.zhang2024().frame
    fits = {}
    for model, g in z.groupby("model", sort=False):
        fits[model] = fit_tradeoff(g[["batch_size"]].assign(steps=g["steps_to_target"]),
                                   n_boot=300, seed=0)
    n = z.groupby("model", sort=False)["n_params"].first()
    b = np.array([fits[m].b_crit for m in n.index])
    assert np.all(np.diff(b) > 0)  # grows with every doubling of model size
    for f in fits.values():
        assert f.b_crit_interval[0] < f.b_crit < f.b_crit_interval[1] and not f.extrapolation
        assert f.log_rmse < 0.1  # the hyperbola describes each model's sweep
    law = fit_power_law(n.to_numpy(), b)
    assert law.exponent_interval[0] > 0
    # independent cross-check: SOURCE.md's quick fit, 2.2e3 (85M) … 1.1e4 (1.2B)
    assert b[0] == pytest.approx(2.2e3, rel=0.15) and b[-1] == pytest.approx(1.1e4, rel=0.15)


def test_mlperf_rcp_b_crit_with_intervals():
    t = datasets.mlperf_rcp().frame
    latest = t[t["ruleset"].str.startswith("training")].groupby("benchmark")["ruleset"].max()
    fitted = {}
    for bench, ruleset in latest.items():
        sub = t[(t["benchmark"] == bench) & (t["ruleset"] == ruleset)]
        if sub["batch_size"].nunique() < 4:
            continue
        col = "steps" if sub["steps"].notna().all() else "steps_rel"
        fitted[bench] = fit_tradeoff(sub[["batch_size"]].assign(steps=sub[col]),
                                     combine="median", n_boot=300, seed=0)
    assert {"bert", "resnet", "gpt3"} <= set(fitted)
    for f in fitted.values():
        assert f.bootstrap == "seeds"
        assert f.b_crit_interval[0] <= f.b_crit <= f.b_crit_interval[1]
    # SOURCE.md quick fit (trimmed means): BERT ≈ 1.3e4, ResNet ≈ 4.7e4
    assert fitted["bert"].b_crit == pytest.approx(1.3e4, rel=0.3)
    assert fitted["resnet"].b_crit == pytest.approx(4.7e4, rel=0.5)


def test_mlperf_curves_bert_b_crit_grows_with_target(published):
    published("mlperf_training_results_curves/evals.csv")  # skips when not at hand
    sweep = datasets.mlperf_curves("bert", rounds=["v3.0", "v3.1", "v4.0", "v4.1", "v5.0"],
                                   download=False)
    curve = critical_batch_curve(sweep, [0.60, 0.70, 0.72], config="submission",
                                 combine="min", n_boot=200, seed=0)
    assert (curve["n_batch_sizes"] >= 20).all()
    b = curve["b_crit"].to_numpy()
    assert b[0] < b[1] < b[2]
    # the growth from 0.60 to 0.72 is larger than the intervals' overlap allows by chance
    assert curve["b_crit_high"].iloc[0] < curve["b_crit_low"].iloc[2]
