"""The batched trainer against the plain per-run loop (same seeds → same losses)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.harness import trainer  # noqa: E402
from empirical_batch.harness.tasks import make_task  # noqa: E402
from empirical_batch.harness.trainer import (  # noqa: E402
    Member,
    StepBudget,
    group_members,
    log_steps,
    train_batched,
    train_grid,
    train_plain,
)

SMALL = {
    "teacher_student": {"hidden": 8, "eval_size": 256, "objective_size": 64},
    "digits": {"hidden": 8},
    "sequence": {"context": 8, "d_model": 8, "corpus_chars": 4000, "eval_windows": 16,
                 "objective_windows": 16},
}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _curves(rows):
    rows = sorted(rows, key=lambda r: (r["run"], r["step"]))
    return [r["run"] for r in rows], np.array([r["metric"] for r in rows])


@pytest.mark.parametrize("task_name", list(SMALL))
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_batched_equals_plain_loop(task_name, optimizer):
    task = make_task(task_name, **SMALL[task_name]).to("cpu", torch.float64)
    lrs = (0.05, 0.2) if optimizer == "sgd" else (1e-3, 1e-2)
    members = [Member(optimizer, 4, lr, s) for lr in lrs for s in (0, 3)]
    logged = log_steps(15, 5)
    runs_b, batched = _curves(train_batched(task, members, 15, logged))
    runs_p, plain = _curves([r for m in members for r in train_plain(task, m, 15, logged)])
    assert runs_b == runs_p
    assert np.all(np.isfinite(plain))
    # the runs really differ (a trainer ignoring lr or seed would not)
    assert len({round(float(v), 6) for v in batched}) > len(logged)
    # float64: the two programs differ only in summation order (~1e-16 relative per op).
    # Adam divides by sqrt(v): gradient components that are zero in exact arithmetic
    # (the attention key bias of the transformer: softmax is shift-invariant) are pure
    # round-off, which Adam rescales to O(lr) steps that differ between the programs;
    # they move the loss only at second order, measured ~4e-8 relative, hence 1e-6 there.
    rtol = 1e-6 if (optimizer == "adam" and task_name == "sequence") else 1e-10
    np.testing.assert_allclose(batched, plain, rtol=rtol, atol=0)


@pytest.mark.parametrize("task_name", list(SMALL))
def test_sgd_and_adam_in_one_group_equal_the_plain_loop(task_name):
    """A batch size's SGD and Adam runs trained as one program (interleaved on input):
    each run as in the plain loop, rows in the members' order."""
    task = make_task(task_name, **SMALL[task_name]).to("cpu", torch.float64)
    members = [Member(o, 4, lr, s) for s in (0, 3)
               for o, lr in (("adam", 1e-2), ("sgd", 0.1), ("adam", 1e-3), ("sgd", 0.05))]
    logged = log_steps(12, 4)
    rows = train_batched(task, members, 12, logged)
    assert [r["run"] for r in rows[:len(members)]] == [m.run for m in members]
    runs_b, batched = _curves(rows)
    runs_p, plain = _curves([r for m in members for r in train_plain(task, m, 12, logged)])
    assert runs_b == runs_p
    rtol = 1e-6 if task_name == "sequence" else 1e-10  # as above: Adam on the transformer
    np.testing.assert_allclose(batched, plain, rtol=rtol, atol=0)
    # and as the two optimizers' own groups
    alone = [r for o in ("sgd", "adam")
             for r in train_batched(task, [m for m in members if m.optimizer == o], 12, logged)]
    np.testing.assert_allclose(batched, _curves(alone)[1], rtol=rtol, atol=0)


def test_float32_batched_close_to_plain():
    task = make_task("digits", hidden=8).to("cpu", torch.float32)
    members = [Member("sgd", 8, lr, 0) for lr in (0.1, 0.5)]
    _, a = _curves(train_batched(task, members, 20, [0, 20]))
    _, b = _curves([r for m in members for r in train_plain(task, m, 20, [0, 20])])
    # float32 round-off (~1e-7 per op) accumulated over 20 steps of a 64-8-10 MLP
    np.testing.assert_allclose(a, b, rtol=1e-4)


def test_same_seed_same_data_and_init_across_learning_rates():
    task = make_task("teacher_student", **SMALL["teacher_student"]).to("cpu")
    rows = train_batched(task, [Member("sgd", 4, 0.01, 0), Member("sgd", 4, 0.1, 0),
                                Member("sgd", 4, 0.1, 1)], 3, [0, 3])
    at0 = {r["run"]: r["metric"] for r in rows if r["step"] == 0}
    assert at0["sgd-b4-lr0.01-s0"] == at0["sgd-b4-lr0.1-s0"] != at0["sgd-b4-lr0.1-s1"]


def test_train_grid_batched_and_plain_agree_on_a_mixed_grid():
    task = make_task("teacher_student", **SMALL["teacher_student"]).to("cpu", torch.float64)
    members = [Member(o, b, lr, 0) for o, lr in (("sgd", 0.1), ("adam", 0.01)) for b in (2, 8)]
    budget = StepBudget(examples=32, min_steps=4, max_steps=16, n_log=4)
    _, a = _curves(train_grid(task, members, budget))
    _, b = _curves(train_grid(task, members, budget, batched=False))
    np.testing.assert_allclose(a, b, rtol=1e-10)
    assert budget.steps(2) == 16 and budget.steps(8) == 4


def test_divergence_stays_inside_its_run():
    task = make_task("teacher_student", **SMALL["teacher_student"]).to("cpu")
    rows = train_batched(task, [Member("sgd", 4, 0.05, 0), Member("sgd", 4, 1e4, 0)], 30,
                         [30])
    last = {r["learning_rate"]: r["metric"] for r in rows}
    assert not np.isfinite(last[1e4])
    assert np.isfinite(last[0.05])


def test_groups_and_schedules():
    ms = [Member("sgd", b, 0.1, s) for b in (4, 2) for s in range(5)] + [Member("adam", 2, 1e-3,
                                                                             0)]
    groups = group_members(ms, max_group=3)
    # B = 2: 5 SGD runs and 1 Adam run, one group cut in 3 + 3; B = 4: 5 SGD runs, 3 + 2
    assert [len(g) for g in groups] == [3, 3, 3, 2]
    assert all(len({m.batch_size for m in g}) == 1 for g in groups)
    assert {m.optimizer for m in groups[1]} == {"sgd", "adam"}
    # past GROUP_EXAMPLES examples a step, each optimizer's runs form their own group
    big = trainer.GROUP_EXAMPLES // 4
    wide = [Member(o, big, 0.1, s) for o in ("sgd", "adam") for s in range(3)]
    assert [{m.optimizer for m in g} for g in group_members(wide)] == [{"adam"}, {"sgd"}]
    assert [len(g) for g in group_members(wide[:4])] == [4]  # 4 × big fits
    s = log_steps(1000, 10)
    assert s[0] == 0 and s[-1] == 1000 and np.all(np.diff(s) > 0)


@pytest.mark.parametrize("kwargs, match", [
    ({"optimizer": "lbfgs", "batch_size": 4, "learning_rate": 0.1, "seed": 0}, "optimizer"),
    ({"optimizer": "sgd", "batch_size": 0, "learning_rate": 0.1, "seed": 0}, "batch_size"),
    ({"optimizer": "sgd", "batch_size": 4, "learning_rate": -1.0, "seed": 0}, "learning_rate"),
])
def test_member_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Member(**kwargs)


def test_train_batched_refuses_mixed_groups():
    task = make_task("teacher_student", **SMALL["teacher_student"])
    with pytest.raises(ValueError, match="one batch size"):
        train_batched(task, [Member("sgd", 4, 0.1, 0), Member("sgd", 8, 0.1, 0)], 2, [2])


@pytest.mark.gpu
def test_batched_equals_plain_on_cuda():
    task = make_task("digits", hidden=16).to("cuda", torch.float64)
    members = [Member(o, 8, lr, s) for o, lr in (("sgd", 0.1), ("adam", 1e-3)) for s in (0, 1)]
    for group in group_members(members):
        _, a = _curves(train_batched(task, group, 20, [0, 10, 20]))
        _, b = _curves([r for m in group for r in train_plain(task, m, 20, [0, 10, 20])])
        # float64 on the GPU: summation order only (see the CPU test)
        np.testing.assert_allclose(a, b, rtol=1e-9)
