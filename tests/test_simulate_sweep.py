"""simulate_sweep emits the sweep schema and agrees with the exact dynamics."""

from __future__ import annotations

import numpy as np
import pytest

from empirical_batch.simulate import NoisyQuadratic, log_steps, simulate_sweep

SCHEMA = ["run", "batch_size", "learning_rate", "step", "examples", "metric"]


def test_exact_sweep_schema_and_values():
    nq = NoisyQuadratic.zhang(50)
    bs, lrs = [1, 4, 64], [0.05, 0.5, 2.5]
    df = simulate_sweep(nq, bs, lrs, max_steps=1000, n_points=20).frame
    assert list(df.columns[:6]) == SCHEMA and {"seed", "method"} <= set(df.columns)
    assert df["run"].nunique() == 9
    assert (df["examples"] == df["step"] * df["batch_size"]).all()
    assert df["batch_size"].dtype.kind == "i" and df["step"].dtype.kind == "i"
    assert df["seed"].isna().all() and (df["method"] == "exact").all()
    steps = log_steps(1000, 20)
    for (b, lr), g in df.groupby(["batch_size", "learning_rate"]):
        np.testing.assert_array_equal(g["step"].to_numpy(), steps)
        want = nq.expected_loss(lr, b, steps)
        np.testing.assert_allclose(g["metric"].to_numpy(), want, rtol=1e-12)
    # lr = 2.5 > 2/h_max diverges: recorded as inf, not dropped
    assert np.isinf(df[df.learning_rate == 2.5]["metric"].iloc[-1])


def test_steps_to_target_from_the_table_matches_exact():
    """A user reading the first logged step below the target brackets the exact answer."""
    nq = NoisyQuadratic.zhang(50)
    df = simulate_sweep(nq, [8], [0.3], max_steps=5000, n_points=60).frame
    target = 0.2 * nq.initial_loss()
    k = nq.steps_to_target(target, 0.3, 8)
    logged = df[df.metric <= target]["step"].min()
    before = df[df.step < logged]["step"].max()
    assert before < k <= logged


def test_monte_carlo_sweep():
    pytest.importorskip("torch")
    nq = NoisyQuadratic.zhang(20)
    df = simulate_sweep(nq, [2, 16], [0.2], max_steps=50, n_points=5, method="monte_carlo",
                        n_seeds=3, seed=4).frame
    assert df["run"].nunique() == 6
    assert sorted(df["seed"].unique().tolist()) == [0, 1, 2]
    assert (df["method"] == "monte_carlo").all()
    start = df[df.step == 0]["metric"]
    assert np.all(start > 0)


def test_bad_inputs():
    nq = NoisyQuadratic.zhang(5)
    with pytest.raises(ValueError, match="method"):
        simulate_sweep(nq, [1], [0.1], 10, method="magic")
    with pytest.raises(ValueError, match="batch_sizes"):
        simulate_sweep(nq, [1.5], [0.1], 10)
    with pytest.raises(ValueError, match="max_steps"):
        simulate_sweep(nq, [1], [0.1], 0)
    with pytest.raises(TypeError, match="NoisyQuadratic"):
        simulate_sweep("zhang", [1], [0.1], 10)
