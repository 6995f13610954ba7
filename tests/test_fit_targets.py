"""The target-choosing rule (`empirical_batch.fit.targets`): what it promises, on random
sweeps, checked by brute force over the sweep's configurations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch.fit import choose_targets
from empirical_batch.fit.targets import (
    TARGET_CLEARANCE,
    TARGET_MARGIN,
    clear_of,
    common_target,
    reach_count,
)


def _sweep(rng, n_b, n_lr, n_seed, n_steps=6):
    rows = []
    for b in 2.0 ** np.arange(n_b):
        for lr in 10.0 ** -np.arange(1, n_lr + 1):
            for seed in range(n_seed):
                curve = 3.0 * np.cumprod(rng.uniform(0.6, 1.0, n_steps))
                curve[0] = 3.0
                rows += [{"batch_size": b, "learning_rate": lr, "seed": seed, "step": s,
                          "metric": v} for s, v in enumerate(curve)]
    return pd.DataFrame(rows)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_b=st.integers(3, 9), n_lr=st.integers(1, 3),
       n_seed=st.integers(1, 3))
def test_the_rule_holds_on_random_sweeps(seed, n_b, n_lr, n_seed):
    frame = _sweep(np.random.default_rng(seed), n_b, n_lr, n_seed)
    fractions = [0.5, 0.25, 0.0]
    targets = choose_targets(frame, fractions)
    assert np.all(np.diff(targets) < 0) and 1 <= len(targets) <= 3
    # brute force: per (B, lr), the worst seed's minimum; a batch size reaches a target
    # when some learning rate's worst seed does
    worst = frame.groupby(["batch_size", "learning_rate", "seed"])["metric"].min() \
        .groupby(level=["batch_size", "learning_rate"]).max()
    best = worst.groupby(level="batch_size").min()
    k = reach_count(n_b)
    hard = targets[-1]
    assert (best <= hard / (1 + TARGET_MARGIN) + 1e-12).sum() >= k
    # no target within the clearance of any configuration's best loss
    for t in targets:
        assert np.all(np.abs(t - worst.to_numpy()) > TARGET_CLEARANCE * worst.to_numpy()
                      * (1 - 1e-9))
    assert hard < 3.0


def test_clear_of_moves_up_past_close_losses_only():
    assert clear_of(1.0, [2.0, 0.5]) == 1.0
    assert clear_of(1.0005, [1.0]) == pytest.approx(1.002)
    # moving past 1.0 lands near 1.0015: moved again
    assert clear_of(1.0, [1.0, 1.0025]) == pytest.approx(1.0025 * 1.002)


def test_common_target_is_the_easiest_hardest_target():
    rng = np.random.default_rng(1)
    frames = [_sweep(rng, 6, 2, 2), _sweep(rng, 6, 2, 2)]
    hardest = [choose_targets(f, [0.0])[-1] for f in frames]
    assert common_target(frames, hardest) >= max(hardest)


def test_bad_rules_and_sweeps_are_named():
    frame = _sweep(np.random.default_rng(0), 4, 1, 1)
    with pytest.raises(ValueError, match="margin > 2 × clearance"):
        choose_targets(frame, [0.0], margin=0.001)
    with pytest.raises(ValueError, match="NaN/inf"):
        choose_targets(frame.assign(metric=np.nan), [0.0])
    with pytest.raises(ValueError, match="lacks columns"):
        choose_targets(frame.drop(columns="step"), [0.0])
    flat = frame.assign(metric=3.0)
    with pytest.raises(ValueError, match="no training progress"):
        choose_targets(flat, [0.0])
