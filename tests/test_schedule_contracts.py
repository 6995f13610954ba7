"""What the schedule docstrings promise: the first stage is ``base_batch``, the
scheduler's first rate is ``base_lr``, and Seesaw refuses parameters that would build a
wrong ramp (each error names the parameter)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch.errors import InputError
from empirical_batch.schedule import (
    BatchSizeScheduler,
    NoiseTrajectory,
    design_schedule,
    seesaw_schedule,
)


class _Opt:
    def __init__(self):
        self.param_groups = [{"lr": None}]


def _traj(start: float, growth: float = 20.0) -> NoiseTrajectory:
    s = np.linspace(0.0, 1e4, 200)
    return NoiseTrajectory(s, start * (1 + (growth - 1) * s / 1e4))


@pytest.mark.parametrize("policy", ["doubling", "app_d"])
def test_first_stage_is_base_batch_even_when_the_start_calls_for_more(policy):
    sch = design_schedule(_traj(100.0), policy, base_batch=16)
    assert sch.batch_sizes[0] == 16
    assert sch.stages["lr_factor"].iloc[0] == 1.0
    assert any("base_batch=16" in n for n in sch.notes)
    assert sch.batch_sizes[1] > 16  # the ramp follows at once


@settings(max_examples=30, deadline=None)
@given(start=st.floats(1.0, 1e4), base=st.sampled_from([1, 8, 16, 64, 256]),
       policy=st.sampled_from(["doubling", "app_d"]),
       optimizer=st.sampled_from(["adam", "sgd"]))
def test_first_stage_and_first_rate_property(start, base, policy, optimizer):
    sch = design_schedule(_traj(start), policy, base_batch=base, optimizer=optimizer)
    assert sch.batch_sizes[0] == base
    assert np.all(np.diff(sch.batch_sizes) > 0)
    opt = _Opt()
    sched = BatchSizeScheduler(opt, sch, base_lr=3e-4)
    assert sched.batch_size == base
    assert opt.param_groups[0]["lr"] == pytest.approx(3e-4, rel=1e-12)


def test_scheduler_first_rate_is_base_lr_for_any_first_factor():
    sch = design_schedule(_traj(100.0), "doubling", base_batch=16)
    stages = sch.stages.copy()
    stages["lr_factor"] = stages["lr_factor"] * 2.8
    from dataclasses import replace

    opt = _Opt()
    sched = BatchSizeScheduler(opt, replace(sch, stages=stages), base_lr=1e-3)
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3)
    while sched.batch_size == 16:
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 * np.sqrt(sched.batch_size / 16))


@pytest.mark.parametrize("shape, word", [
    ({"milestones": (50_000, 75_000)}, "steps"),
    ({"milestones": (0.75, 0.5)}, "increasing"),
    ({"milestones": (0.5, 0.5)}, "increasing"),
    ({"milestones": (0.0, 0.5)}, "milestones"),
    ({"milestones": ()}, "milestones"),
    ({"milestones": (0.5, float("nan"))}, "milestones"),
    ({"gamma": -0.1}, "gamma"),
    ({"gamma": 0.0}, "gamma"),
    ({"gamma": 2.0}, "gamma"),
    ({"decay_fraction": 0.2}, "decay_fraction"),  # not a step-schedule parameter
])
def test_seesaw_step_refuses_bad_parameters(shape, word):
    with pytest.raises(InputError, match=word):
        seesaw_schedule("step", total_steps=1000, base_batch=64, **shape)


@pytest.mark.parametrize("d", [0, 0.0, 1.5, -0.2, float("nan"), True])
def test_seesaw_wsd_refuses_bad_decay_fraction(d):
    with pytest.raises(InputError, match="decay_fraction"):
        seesaw_schedule("wsd", total_steps=1000, base_batch=64, decay_fraction=d)


def test_seesaw_cosine_refuses_step_parameters():
    with pytest.raises(InputError, match="milestones"):
        seesaw_schedule("cosine", total_steps=1000, base_batch=64, milestones=(0.5,))


def test_seesaw_step_ramp_follows_the_rule():
    """gamma = 1/4 at 0.5 and 0.75: two halvings at each milestone, so the batch doubles
    twice there and the rate is multiplied by (1/sqrt 2)^2 each time (Meterez et al.)."""
    sch = seesaw_schedule("step", total_steps=1000, base_batch=64, milestones=(0.5, 0.75),
                          gamma=0.25, max_batch=4096)
    st_ = sch.stages
    assert st_["batch_size"].tolist() == [64, 256, 1024]
    np.testing.assert_allclose(st_["lr_factor"], [1.0, 0.5, 0.25])
    np.testing.assert_allclose(st_["start_examples"], [0, 0.5 * 64_000, 0.75 * 64_000],
                               rtol=1e-3)
    # the examples budget is the base run's
    steps = np.diff(np.r_[st_["start_examples"], 64_000]) / st_["batch_size"]
    assert steps.sum() == pytest.approx(500 + 250 / 4 + 250 / 16, rel=1e-3)


def test_seesaw_wsd_ramp_starts_where_the_decay_halves_the_rate():
    sch = seesaw_schedule("wsd", total_steps=1000, base_batch=64, decay_fraction=0.4,
                          max_batch=128)
    # the rate 1 - (f - 0.6)/0.4 reaches 1/2 at f = 0.8
    assert sch.stages["batch_size"].tolist() == [64, 128]
    assert sch.stages["start_examples"].iloc[1] == pytest.approx(0.8 * 64_000, rel=1e-3)
