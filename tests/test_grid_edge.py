"""The grid-edge check knows the other side of the edge: a best rate at the top of its
grid is bracketed when the next grid value would reach the divergence limit, or a run
at it diverged. The demo and the README's simulated sweep then warn about nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch.errors import InputError
from empirical_batch.fit import fit_tradeoff, steps_to_target
from empirical_batch.simulate import NoisyQuadratic, simulate_sweep
from empirical_batch.sweeps import load_sweep

ROOT = Path(__file__).resolve().parents[1]
B = 2 ** np.arange(0, 11)


def _sweep(lrs, **kw):
    return simulate_sweep(NoisyQuadratic.zhang(200, **kw), B, lrs, max_steps=20_000,
                          n_points=40).frame


@pytest.mark.parametrize("options", [{}, {"momentum": 0.5}, {"precondition": 0.5}])
def test_max_stable_lr_is_the_divergence_limit(options):
    nq = NoisyQuadratic.zhang(50, **options)
    limit = nq.max_stable_lr
    for b in (1, 64, 4096):
        assert np.isfinite(nq.stationary_loss(0.999 * limit, b))
        assert np.isinf(nq.stationary_loss(1.001 * limit, b))


def test_a_grid_stopping_under_the_limit_is_no_edge():
    df = _sweep(np.geomspace(1e-2, 1.9, 16))
    np.testing.assert_allclose(df["max_stable_lr"], 2.0)
    table = steps_to_target(df, 0.37)
    top = table.frame["learning_rate"] == 1.9
    assert top.any()  # the large batches take the grid's largest rate ...
    assert not table.frame["lr_at_grid_edge"].any()  # ... which is bracketed
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_tradeoff(table, seed=0, n_boot=400)


def test_the_limit_survives_a_csv_file(tmp_path):
    _sweep(np.geomspace(1e-2, 1.9, 16)).to_csv(tmp_path / "sweep.csv", index=False)
    table = steps_to_target(load_sweep(tmp_path / "sweep.csv"), 0.37)
    assert not table.frame["lr_at_grid_edge"].any()


def test_without_the_limit_the_top_is_an_edge():
    df = _sweep(np.geomspace(1e-2, 1.9, 16)).drop(columns="max_stable_lr")
    table = steps_to_target(df, 0.37)
    assert table.frame.loc[table.frame["learning_rate"] == 1.9, "lr_at_grid_edge"].all()
    # the limit given by hand brackets it again
    assert not steps_to_target(df, 0.37, max_stable_lr=2.0).lr_at_grid_edge.any()


def test_a_grid_stopping_far_below_the_limit_is_still_an_edge():
    table = steps_to_target(_sweep(np.geomspace(1e-3, 0.2, 10)), 0.37)
    assert table.frame["lr_at_grid_edge"].iloc[-1]
    with pytest.warns(UserWarning, match="edge of its grid"):
        fit_tradeoff(table, seed=0, n_boot=400)


def test_a_diverged_larger_rate_brackets_the_top():
    """Batch 8 tried rates up to 0.4; batch 16 also tried 0.8, which diverged: at
    batch 8 the next grid value (0.8) is known to diverge, so 0.4 is bracketed."""
    rows = []
    for b, lrs in ((8, (0.1, 0.2, 0.4)), (16, (0.1, 0.2, 0.4, 0.8))):
        for lr in lrs:
            for step in (0, 10, 100):
                loss = np.inf if lr == 0.8 and step else 1.0 / (1 + lr * step)
                rows.append({"run": f"{b}_{lr}", "batch_size": b, "learning_rate": lr,
                             "step": step, "metric": loss})
    table = steps_to_target(pd.DataFrame(rows), 0.5)
    assert table.frame["learning_rate"].tolist() == [0.4, 0.4]
    assert not table.frame["lr_at_grid_edge"].any()
    # without the diverged run, batch 8's best rate is at the top of an open grid
    ok = pd.DataFrame([r for r in rows if r["learning_rate"] != 0.8])
    assert steps_to_target(ok, 0.5).frame["lr_at_grid_edge"].all()


def test_the_limit_is_checked():
    df = _sweep([0.5, 1.0])
    for bad in (0.0, -1.0, float("nan"), "x"):
        with pytest.raises(InputError, match="max_stable_lr"):
            steps_to_target(df, 0.37, max_stable_lr=bad)
    for bad in (0.0, -2.0, "x"):
        with pytest.raises(InputError, match="max_stable_lr"):
            steps_to_target(df.assign(max_stable_lr=bad), 0.37)
    # empty where unknown: the top of the grid is an edge there
    table = steps_to_target(df.assign(max_stable_lr=np.nan), 0.37)
    assert table.frame["lr_at_grid_edge"].any()


def test_the_demo_prints_no_warning_about_its_own_data(tmp_path):
    res = subprocess.run([sys.executable, "-m", "empirical_batch.cli", "demo", "--no-figure"],
                         capture_output=True, text=True, cwd=tmp_path, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "warning" not in res.stdout.lower() and "warning" not in res.stderr.lower()
    assert res.stderr == ""


@settings(max_examples=40, deadline=None)
@given(top=st.floats(1e-3, 10.0), ratio=st.floats(1.05, 4.0), n=st.integers(2, 6),
       limit=st.floats(1e-3, 100.0))
def test_top_of_the_grid_is_an_edge_unless_the_next_value_reaches_the_limit(
        top, ratio, n, limit):
    """Property: the best rate is the grid's largest; it is an edge exactly when the
    grid's next value, top * ratio, stays under the divergence limit."""
    lrs = top / ratio ** np.arange(n)[::-1]
    rows = [{"run": f"r{k}", "batch_size": 8, "learning_rate": lr, "step": s,
             "metric": 1.0 / (1.0 + lr * s / top)} for k, lr in enumerate(lrs)
            for s in (0, 10, 100)]
    frame = pd.DataFrame(rows)
    table = steps_to_target(frame, 0.5, max_stable_lr=limit)
    assert table.frame["learning_rate"].iloc[0] == pytest.approx(top)
    nxt = lrs[-1] * lrs[-1] / lrs[-2]
    assert bool(table.frame["lr_at_grid_edge"].iloc[0]) is bool(nxt < limit)
    with_column = steps_to_target(frame.assign(max_stable_lr=limit), 0.5)
    assert with_column.frame["lr_at_grid_edge"].iloc[0] == table.frame["lr_at_grid_edge"].iloc[0]
