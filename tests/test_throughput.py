"""The step-time model (Pollux) fitted to timings, and the planner that uses it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empirical_batch import Hardware, Tradeoff, plan
from empirical_batch.throughput import ThroughputModel, fit_throughput

TRUTH = ThroughputModel(0.02, 0.001, 0.05, 0.002, 2.5, 0.0, 0)


def timings(model=TRUTH, ms=(8, 32, 128), ns=(1, 2, 8, 32), ks=(1, 4), noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    rows = [{"micro_batch": m, "devices": n, "accumulation": k,
             "step_seconds": model.step_seconds(m, n, k) * np.exp(noise * rng.normal())}
            for m in ms for n in ns for k in ks]
    return pd.DataFrame(rows)


def test_recovers_the_parameters_from_exact_timings():
    f = fit_throughput(timings())
    for name in ("alpha_grad", "beta_grad", "alpha_sync", "beta_sync", "gamma"):
        assert getattr(f, name) == pytest.approx(getattr(TRUTH, name), rel=1e-3), name
    assert f.rms_relative_error < 1e-6 and f.notes == ()


def test_noisy_timings_predict_within_the_noise():
    f = fit_throughput(timings(noise=0.03, seed=1))
    grid = timings()
    pred = f.step_seconds(grid.micro_batch, grid.devices, grid.accumulation)
    assert np.max(np.abs(pred / grid.step_seconds - 1)) < 0.06


def test_what_the_settings_cannot_identify_is_fixed_and_named():
    one = fit_throughput(timings(ns=(1,)))
    assert one.alpha_sync == 0 and "one device only" in one.notes[0]
    single_n = fit_throughput(timings(ns=(1, 8)))
    assert single_n.beta_sync == 0 and any("constant" in n for n in single_n.notes)


def test_saturating_micro_batch_is_where_throughput_reaches_the_fraction():
    m = TRUTH.saturating_micro_batch(0.9)
    assert m / TRUTH.grad_seconds(m) == pytest.approx(0.9 / TRUTH.beta_grad)
    with pytest.raises(ValueError, match="fraction"):
        TRUTH.saturating_micro_batch(1.0)


def test_plan_with_a_linear_model_matches_the_fixed_throughput_plan():
    """No fixed compute time, communication a constant: the model is Hardware's formula."""
    hw = Hardware(throughput=500.0, max_device_batch=64, allreduce_s=0.0)
    linear = ThroughputModel(0.0, 1 / 500.0, 0.0, 0.0, 1.0, 0.0, 0)
    t = Tradeoff.from_b_crit(200.0, s_min=1000)
    a = plan(t, hw, batch_sizes=[64, 128, 256], devices=[1, 2, 4]).frame
    b = plan(t, hw, batch_sizes=[64, 128, 256], devices=[1, 2, 4], throughput_model=linear).frame
    assert set(b.columns) - set(a.columns) == {"accumulation", "saturated"}
    merged = a.merge(b, on=["batch_size", "devices"], suffixes=("", "_m"))
    np.testing.assert_allclose(merged.step_seconds, merged.step_seconds_m, rtol=1e-12)
    # beyond max_device_batch the model plan accumulates instead of dropping the pair
    assert (b.accumulation > 1).any() and len(b) > len(a)


@pytest.mark.parametrize(
    "frame, word",
    [
        (pd.DataFrame({"micro_batch": [8, 16]}), "step_seconds"),
        (pd.DataFrame({"micro_batch": [8, 8], "step_seconds": [0.1, 0.2]}), "2 different"),
        (pd.DataFrame({"micro_batch": [8, 16], "step_seconds": [0.1, -0.2]}), "> 0"),
        (pd.DataFrame({"micro_batch": [8, 16.5], "step_seconds": [0.1, 0.2]}), "integers"),
        (pd.DataFrame({"micro_batch": ["a", "b"], "step_seconds": [0.1, 0.2]}), "numeric"),
        (pd.DataFrame({"micro_batch": [8, 16], "step_seconds": [0.1, np.nan]}), "finite"),
    ],
)
def test_bad_timings_are_refused(frame, word):
    with pytest.raises(ValueError, match=word):
        fit_throughput(frame)
