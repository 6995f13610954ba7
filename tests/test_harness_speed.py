"""The sweep's fast paths against the plain loop: the batched/loop rule, the member-by-member
evaluation, the foreach optimizer updates and the device-side logging."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.harness import trainer  # noqa: E402
from empirical_batch.harness.tasks import make_task  # noqa: E402
from empirical_batch.harness.trainer import (  # noqa: E402
    Member,
    StepBudget,
    log_steps,
    prefer_batched,
    step_matmul_flops,
    train_batched,
    train_group,
    train_plain,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SEQ = {"context": 8, "d_model": 8, "corpus_chars": 4000, "eval_windows": 16,
       "objective_windows": 16}


def _metrics(rows):
    return np.array([r["metric"] for r in sorted(rows, key=lambda r: (r["run"], r["step"]))])


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_member_by_member_evaluation_equals_the_plain_loop(monkeypatch, optimizer):
    task = make_task("sequence", **SEQ).to("cpu", torch.float64)
    lrs = (0.05, 0.2) if optimizer == "sgd" else (1e-3, 1e-2)
    members = [Member(optimizer, 4, lr, s) for lr in lrs for s in (0, 1)]
    logged = log_steps(12, 5)
    vmapped = _metrics(train_batched(task, members, 12, logged))
    monkeypatch.setattr(trainer, "CPU_BATCH_FLOPS", 0.0)  # every evaluation member by member
    looped = _metrics(train_batched(task, members, 12, logged))
    plain = _metrics([r for m in members for r in train_plain(task, m, 12, logged)])
    rtol = 1e-6 if optimizer == "adam" else 1e-10  # see test_batched_equals_plain_loop
    np.testing.assert_allclose(looped, plain, rtol=rtol, atol=0)
    np.testing.assert_allclose(vmapped, plain, rtol=rtol, atol=0)


def test_step_flops_count_the_model_and_scale_with_the_batch():
    task = make_task("teacher_student", hidden=8, eval_size=64, objective_size=64).to("cpu")
    model = task.init_model(0)
    fc1, fc2 = model.fc1, model.fc2
    # forward 2·in·out per layer and example, backward twice that (input and weight
    # gradients), except the first layer's input gradient, which is not needed
    per_example = 2 * fc1.in_features * fc1.out_features * 2 + \
        2 * fc2.in_features * fc2.out_features * 3
    assert step_matmul_flops(task, 1) == per_example
    assert step_matmul_flops(task, 64) == 64 * per_example


def test_the_rule_batches_small_steps_and_loops_large_ones_on_the_cpu(monkeypatch):
    task = make_task("sequence", **SEQ).to("cpu")
    group = [Member("sgd", 16, lr, 0) for lr in (0.1, 0.2)]
    flops = step_matmul_flops(task, 16)
    monkeypatch.setattr(trainer, "CPU_BATCH_FLOPS", flops)
    assert prefer_batched(task, group)
    monkeypatch.setattr(trainer, "CPU_BATCH_FLOPS", flops / 2)
    assert not prefer_batched(task, group)


def test_train_group_follows_the_rule(monkeypatch):
    task = make_task("sequence", **SEQ).to("cpu", torch.float64)
    group = [Member("adam", 8, lr, 0) for lr in (1e-3, 1e-2)]
    budget = StepBudget(examples=64, min_steps=6, max_steps=8, n_log=4)
    calls = []
    real_batched = trainer.train_batched
    monkeypatch.setattr(trainer, "train_batched",
                        lambda *a, **k: calls.append("batched") or real_batched(*a, **k))
    monkeypatch.setattr(trainer, "CPU_BATCH_FLOPS", 0.0)
    looped = _metrics(train_group(task, group, budget))
    assert calls == []
    monkeypatch.setattr(trainer, "CPU_BATCH_FLOPS", float("inf"))
    batched = _metrics(train_group(task, group, budget))
    assert calls == ["batched"]
    np.testing.assert_allclose(batched, looped, rtol=1e-6, atol=0)


@pytest.mark.parametrize("name", ["sequence", "digits"])
def test_the_flop_count_equals_torch_flop_counter(name):
    from torch.utils.flop_counter import FlopCounterMode

    opts = SEQ if name == "sequence" else {"hidden": 8}
    task = make_task(name, **opts).to("cpu")
    model = task.init_model(0)
    x, y = task.sample(task.generator(0, 5), 5)
    with FlopCounterMode(display=False) as ref:
        task.loss_fn(model(x), y).backward()
    assert step_matmul_flops(task, 5) == ref.get_total_flops() > 0
    x_ev, y_ev = task.eval_data()
    with FlopCounterMode(display=False) as ref, torch.no_grad():
        task.loss_fn(model(x_ev), y_ev)
    assert trainer.eval_matmul_flops(task) == ref.get_total_flops() > 0


def test_distributed_shards_choose_the_mode_as_the_sequential_sweep(monkeypatch):
    """A shard job trains each group in the mode `run_sweep` would (the rule), so the
    merged frame equals the sequential one also where the rule loops."""
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    from empirical_batch.harness.config import get_config
    from empirical_batch.harness.distribute import run_sweep_distributed
    from empirical_batch.harness.sweep import run_sweep

    monkeypatch.setattr(trainer, "CPU_BATCH_FLOPS", 0.0)  # every group looped
    plan = get_config("tiny", ["teacher_student"]).plans[0]
    spec = replace(plan.sweep, batch_sizes=(4, 16), learning_rates={"sgd": (0.1, 0.4)})
    task = plan.make_task().to("cpu")
    with ThreadPoolExecutor(2) as pool:
        merged = run_sweep_distributed(task, spec, pool, threads=1)
    pd = pytest.importorskip("pandas")
    pd.testing.assert_frame_equal(merged, run_sweep(task, spec), check_exact=True)
