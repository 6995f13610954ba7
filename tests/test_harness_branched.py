"""The harness's branched-training stage on the tiny teacher–student sweep: the bracket
and the noise scales, one row per checkpoint; the validation study puts the fitted B_crit
(and B_crit + 2B) beside it."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.harness.config import get_config  # noqa: E402
from empirical_batch.harness.sweep import run_sweep  # noqa: E402
from empirical_batch.validation.curves import select  # noqa: E402
from empirical_batch.validation.experiments.branched import BranchSpec, run_branched  # noqa: E402
from empirical_batch.validation.experiments.noise import run_reference  # noqa: E402
from empirical_batch.validation.fits import branched_vs_fit  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def reference():
    plan = get_config("tiny").plan("teacher_student")
    task = plan.make_task()
    frame = run_sweep(task, plan.sweep)
    from empirical_batch import load_sweep

    sweep = select(load_sweep(frame, metric_name="eval_loss"), optimizer="sgd")
    return task, plan, frame, sweep, run_reference(task, plan, frame, "sgd")


def test_branched_rows_bracket_and_compare(reference):
    task, _, _, sweep, ref = reference
    spec = BranchSpec(factors=(1, 2, 4, 8), steps_at_base=16, n_checkpoints=2, seeds=(0, 1, 2))
    measured = run_branched(task, spec, ref)
    assert not any(c.startswith("b_crit") for c in measured.columns)  # the study's part
    table = branched_vs_fit(measured, {("teacher_student", "sgd"): sweep})
    assert len(table) == 2 and (table["step"] > 0).all()
    for row in table.itertuples():
        assert row.b_branched_low in {16.0, 32.0, 64.0, 128.0}
        hi = row.b_branched_high
        assert math.isinf(hi) == (row.branched_status == "lower_bound")
        if not math.isinf(hi):
            assert hi == 2 * row.b_branched_low
        assert row.tolerance >= 0
        assert np.isfinite(row.b_simple) and np.isfinite(row.eval_loss)
        assert row.b_crit_status in {"identified", "lower_bound", "upper_bound", "unidentified",
                                     "unknown", "not fitted"}
        if np.isfinite(row.b_crit):  # the model's keep-up point: B_crit + 2B
            assert row.b_crit_plus_2b == pytest.approx(row.b_crit + 2 * row.base_batch)
            assert row.b_crit_plus_2b_low <= row.b_crit_plus_2b <= row.b_crit_plus_2b_high
        assert row.b_noise_plus_2b == pytest.approx(row.b_noise + 2 * row.base_batch)
    # the checkpoints are the reference run's snapshots, losses falling
    assert table["eval_loss"].is_monotonic_decreasing
    assert (table["optimizer"] == "sgd").all()


def test_branched_adam_from_its_optimizer_state_and_bad_specs(reference):
    task, plan, frame, _, _ = reference
    with pytest.raises(ValueError, match="no step"):
        BranchSpec(factors=(1, 2, 64), steps_at_base=16)

    adam = run_reference(task, plan, frame, "adam")
    assert set(adam.optimizer_snapshots) == set(adam.snapshots)
    assert all(o["state"] for s, o in adam.optimizer_snapshots.items() if s > 0)
    table = run_branched(task, BranchSpec(factors=(1, 2, 4), steps_at_base=8,
                                          n_checkpoints=1, seeds=(0, 1)), adam)
    assert list(table["optimizer"]) == ["adam"] and len(table) == 1
