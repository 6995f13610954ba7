"""The time/cost planner (planning.py) and its plot."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch.planning import Hardware, frontier, frontier_bend, pareto_mask, plan
from empirical_batch.tradeoff import Tradeoff


def brute_pareto(t, c):
    n = len(t)
    return np.array([
        not any((t[j] <= t[i] and c[j] <= c[i] and (t[j] < t[i] or c[j] < c[i]))
                for j in range(n))
        for i in range(n)
    ])


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=40))
def test_pareto_mask_matches_brute_force(points):
    # small integer grids force many ties
    t = np.array([p[0] for p in points], dtype=float)
    c = np.array([p[1] for p in points], dtype=float)
    np.testing.assert_array_equal(pareto_mask(t, c), brute_pareto(t, c))


@settings(max_examples=20)
@given(st.floats(1.0, 1e5), st.floats(1.0, 1e4), st.floats(0.0, 0.05), st.floats(0.0, 0.5),
       st.floats(0.0, 0.01), st.integers(1, 512))
def test_plan_pareto_flags_match_brute_force(s_min, b_crit, ov, ar, lat, max_dev):
    t = Tradeoff(s_min, s_min * b_crit)
    hw = Hardware(throughput=500.0, max_device_batch=32, step_overhead_s=ov, allreduce_s=ar,
                  latency_s=lat, max_devices=max_dev)
    df = plan(t, hw).frame
    np.testing.assert_array_equal(
        df["pareto"].to_numpy(), brute_pareto(df["wall_hours"].to_numpy(), df["cost"].to_numpy())
    )
    # the columns are consistent with the model
    np.testing.assert_allclose(df["steps"], t.steps(df["batch_size"].to_numpy(float)))
    np.testing.assert_allclose(df["examples"], df["steps"] * df["batch_size"])
    np.testing.assert_allclose(df["device_hours"], df["wall_hours"] * df["devices"])
    assert (df["devices"] <= df["batch_size"]).all()
    assert (df["device_batch"] <= hw.max_device_batch).all()
    assert (df["devices"] <= max_dev).all()


@given(st.floats(1.0, 1e5), st.floats(1.0, 1e4), st.floats(10.0, 1e4), st.floats(0.1, 10.0))
def test_no_overhead_limit(s_min, b_crit, thr, price):
    """No overheads: cost = price·E/throughput; at fixed per-device batch, time ∝ S."""
    t = Tradeoff(s_min, s_min * b_crit)
    df = plan(t, Hardware(throughput=thr, max_device_batch=16, price_per_device_hour=price,
                          max_devices=4096)).frame
    np.testing.assert_allclose(df["cost"], price * df["examples"] / thr / 3600, rtol=1e-12)
    for _, grp in df.groupby("device_batch"):
        ratio = grp["wall_hours"] / grp["steps"]
        np.testing.assert_allclose(ratio, ratio.iloc[0], rtol=1e-12)


@pytest.mark.parametrize("b_crit", [64.0, 100.0, 300.0, 1000.0])
def test_bend_is_at_critical_batch_without_overheads(b_crit):
    t = Tradeoff(1e4, 1e4 * b_crit)
    df = plan(t, Hardware(max_device_batch=8, max_devices=2**16)).frame
    bend = frontier_bend(df)
    # time × cost ∝ (1 + Bc/B)(1 + B/Bc) is symmetric in log(B/Bc): on a powers-of-two
    # grid the bend is the grid point nearest B_crit in log2, within half an octave
    assert abs(np.log2(bend.batch_size / b_crit)) <= 0.5
    # and exactly B_crit when it is on the grid
    if np.log2(b_crit) == int(np.log2(b_crit)):
        assert bend.batch_size == b_crit


def test_overheads_make_large_batches_slower_per_example():
    t = Tradeoff(1e4, 1e6)
    fast = plan(t, Hardware(max_devices=64)).frame
    slow = plan(t, Hardware(max_devices=64, allreduce_s=0.1, latency_s=0.01,
                            step_overhead_s=0.01)).frame
    assert (slow["wall_hours"].to_numpy() > fast["wall_hours"].to_numpy()).all()


def test_hardware_comm_model():
    hw = Hardware(allreduce_s=0.4, latency_s=0.01)
    assert hw.comm_seconds(1) == 0.0
    assert hw.comm_seconds(2) == pytest.approx(0.4 * 0.5 + 0.01)
    assert hw.comm_seconds(1024) == pytest.approx(0.4 * 1023 / 1024 + 0.1)
    assert hw.step_seconds(100, 1) == pytest.approx(100 / hw.throughput)


def test_custom_grids_and_frontier():
    t = Tradeoff(100, 6400)
    df = plan(t, Hardware(max_device_batch=64, max_devices=8), batch_sizes=[8, 64, 512],
              devices=[1, 2, 8, 16]).frame
    assert set(df["batch_size"]) <= {8, 64, 512}
    assert df["devices"].max() <= 8
    f = frontier(df)
    assert f["pareto"].all() and f["wall_hours"].is_monotonic_increasing


def test_bad_planner_input():
    with pytest.raises(ValueError, match="throughput must be > 0"):
        Hardware(throughput=0.0)
    with pytest.raises(ValueError, match="allreduce_s must be >= 0"):
        Hardware(allreduce_s=-1.0)
    with pytest.raises(TypeError, match="max_devices must be an integer"):
        Hardware(max_devices=2.5)
    with pytest.raises(ValueError, match="max_device_batch must be an integer >= 1"):
        Hardware(max_device_batch=0)
    t = Tradeoff(10, 100)
    with pytest.raises(TypeError, match="tradeoff must be a Tradeoff"):
        plan(3.0)
    with pytest.raises(ValueError, match="no feasible"):
        plan(t, Hardware(max_device_batch=1, max_devices=1), batch_sizes=[4])
    with pytest.raises(ValueError, match=r"batch_sizes must be an integer >= 1, got 1.5"):
        plan(t, batch_sizes=[1.5])
    with pytest.raises(ValueError, match="devices must not be empty"):
        plan(t, devices=[])
    with pytest.raises(ValueError, match="not a plan"):
        frontier_bend(t)


def test_plot_frontier_marks_bend_and_b_crit():
    from empirical_batch.plot.planning import plot_frontier

    t = Tradeoff(1e4, 1e6)
    df = plan(t, Hardware(max_device_batch=8, max_devices=4096)).frame
    ax = plot_frontier(df, tradeoff=t)
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(lab.startswith("bend") and "B=128" in lab for lab in labels)
    assert any("B_crit=100" in lab for lab in labels)
    assert ax.get_xscale() == "log"
    import matplotlib.pyplot as plt

    plt.close(ax.figure)


def test_theory_plots_mark_the_scales():
    import matplotlib.pyplot as plt

    from empirical_batch.plot.theory import plot_step_model, plot_tradeoff
    from empirical_batch.theory import anisotropic_quadratic

    m = anisotropic_quadratic(20, noise=10.0)
    ax = plot_step_model(m)
    xs = {round(float(line.get_xdata()[0]), 9) for line in ax.get_lines()[2:]}
    assert {round(m.b_noise, 9), round(m.b_simple, 9)} <= xs
    # the curves cross one half at B_noise
    b = np.asarray(ax.get_lines()[0].get_xdata())
    y = np.asarray(ax.get_lines()[0].get_ydata())
    assert np.interp(0.5, y, b) == pytest.approx(m.b_noise, rel=0.05)  # 200-point grid
    t = Tradeoff(10, 640)
    ax2 = plot_tradeoff(t)
    point = ax2.get_lines()[1]
    assert point.get_xdata()[0] == 2 * t.e_min and point.get_ydata()[0] == 2 * t.s_min
    plt.close("all")


def test_a_per_device_batch_is_whole():
    from empirical_batch.planning import Hardware, plan
    from empirical_batch.tradeoff import Tradeoff

    t = Tradeoff(s_min=1000, e_min=100_000)
    df = plan(t, Hardware(max_device_batch=64), batch_sizes=[96, 100, 128],
              devices=[1, 2, 3, 8]).frame
    assert (df["device_batch"] == df["device_batch"].round()).all()
    assert ((df["batch_size"] % df["devices"]) == 0).all()
    assert {(100, 3), (100, 8)}.isdisjoint(zip(df["batch_size"], df["devices"], strict=True))
    assert (96, 3) in set(zip(df["batch_size"], df["devices"], strict=True))
    with pytest.raises(ValueError, match="multiple of devices"):
        plan(t, Hardware(max_device_batch=64), batch_sizes=[100], devices=[3])
