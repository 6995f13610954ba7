"""Branches and reference runs trained as vmapped groups from saved states, held to the plain
``torch.optim`` loop: `GroupStep` started from (weights, optimizer state), its
`member_state`, `branch_losses` and the reference run's batched replay."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.harness.config import get_config  # noqa: E402
from empirical_batch.harness.group_step import GroupStep, run_group  # noqa: E402
from empirical_batch.harness.sweep import run_sweep  # noqa: E402
from empirical_batch.harness.tasks import make_task  # noqa: E402
from empirical_batch.harness.trainer import Member, train_plain  # noqa: E402
from empirical_batch.validation.experiments.branched import (  # noqa: E402
    BranchSpec,
    _plain_branch,
    branch_losses,
)
from empirical_batch.validation.experiments.noise import run_reference  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _task():
    return make_task("teacher_student", hidden=8, eval_size=64, objective_size=64).to("cpu")


def _plain_states(task, member, at):
    """(weights, optimizer state dict) of a plain run after each step in ``at``."""
    states = {}

    def keep(step, model, loss, opt):
        if step in at:
            import copy

            states[step] = ({k: v.detach().clone() for k, v in model.state_dict().items()},
                            copy.deepcopy(opt.state_dict()))

    train_plain(task, member, max(at), sorted(at), callback=keep, with_optimizer=True)
    return states


@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.1), ("adam", 3e-3)])
def test_branches_from_checkpoints_equal_the_plain_loop(optimizer, lr):
    task = _task()
    # checkpoints at different steps: Adam's bias corrections differ between the runs of
    # one program
    starts = _plain_states(task, Member(optimizer, 4, lr, 0), {3, 7, 12})
    spec = BranchSpec(factors=(1, 2, 4), steps_at_base=8, n_checkpoints=3, seeds=(1, 2))
    got = branch_losses(task, optimizer, starts, 4, lr, spec, batched=True)
    factor = {"sgd": lambda k: k, "adam": lambda k: k**0.5}[optimizer]
    keys = {(c, k, s) for c in starts for k in (1, 2, 4) for s in (1, 2)} | {
        (c, 1, 0) for c in starts}  # the tolerance's branch, though seed 0 is not swept
    assert set(got) == keys
    for (c, k, s), losses in got.items():
        want = _plain_branch(task, optimizer, starts[c], 4 * k, lr * factor(k), 8 // k, s)
        assert losses.shape == (8 // k,)
        np.testing.assert_allclose(losses, want, rtol=2e-6, atol=0)
    # the plain path of branch_losses is the same loop
    plain = branch_losses(task, optimizer, starts, 4, lr, spec, batched=False)
    assert all(np.array_equal(plain[key], _plain_branch(
        task, optimizer, starts[key[0]], 4 * key[1], lr * factor(key[1]), 8 // key[1],
        key[2])) for key in list(plain)[:3])


def test_a_diverging_branch_is_nan_from_its_first_bad_loss_and_spares_the_others():
    task = _task()
    starts = _plain_states(task, Member("sgd", 4, 0.1, 0), {2})
    spec = BranchSpec(factors=(1, 2), steps_at_base=12, n_checkpoints=1, seeds=(0, 1))
    got = branch_losses(task, "sgd", starts, 4, 5e3, spec, batched=True)
    calm = branch_losses(task, "sgd", starts, 4, 0.05, spec, batched=True)
    wild = got[2, 2, 0]
    first = int(np.flatnonzero(np.isnan(wild))[0])
    assert 0 < first < wild.size and np.all(np.isnan(wild[first:]))
    want = _plain_branch(task, "sgd", starts[2], 8, 1e4, 6, 0)
    np.testing.assert_array_equal(np.isnan(wild), np.isnan(want))
    assert all(np.all(np.isfinite(v)) for v in calm.values())


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "both"])
def test_member_state_restarts_a_group_where_it_stopped(optimizer):
    task = _task()
    opts = ("adam", "sgd") if optimizer == "both" else (optimizer, optimizer)
    members = [Member(o, 4, lr, s) for o, lr in zip(opts, (1e-2, 5e-2), strict=True)
               for s in (0, 1)]
    whole = GroupStep(task, members, record_loss=True)
    losses_whole = run_group(whole, 9, graphed=False)
    first = GroupStep(task, members, record_loss=True)
    run_group(first, 5, graphed=False)
    # the group's own order (SGD first); the states back in the members' order
    states = [None] * len(members)
    for j, i in enumerate(first.order):
        states[i] = first.member_state(j, 5)
    for m, (_, opt_state) in zip(members, states, strict=True):
        if m.optimizer == "adam":
            assert int(opt_state["state"][0]["step"]) == 5
            torch.optim.Adam(task.init_model(0).parameters()).load_state_dict(opt_state)
        else:
            assert not opt_state["state"]
    # the second half draws the same batches as the whole run's steps 6..9
    second = GroupStep(task, members, start=states, record_loss=True)
    assert second.order == whole.order
    for g in second.gens:
        for _ in range(5):
            task.sample(g, 4)
    losses_second = run_group(second, 4, graphed=False)
    np.testing.assert_array_equal(losses_second.numpy(), losses_whole[5:].numpy())


def test_a_bad_start_is_refused():
    task = _task()
    members = [Member("adam", 4, 1e-3, 0)] * 2
    state = _plain_states(task, Member("adam", 4, 1e-3, 0), {2})[2]
    with pytest.raises(ValueError, match="start has 1 states for 2 runs"):
        GroupStep(task, members, start=[state])
    broken = (state[0], {"state": {0: state[1]["state"][0]}, "param_groups": []})
    with pytest.raises(ValueError, match="entries for parameters"):
        GroupStep(task, members, start=[broken, broken])


def test_the_reference_run_is_replayed_by_the_sweeps_program():
    plan = get_config("tiny").plan("teacher_student")
    task = plan.make_task()
    frame = run_sweep(task, plan.sweep)
    for optimizer in ("sgd", "adam"):
        ref = run_reference(task, plan, frame, optimizer)
        # the sweep trained this member in a vmapped group: the replay (a group of one)
        # reproduces its curve to round-off
        assert ref.replay_error < 1e-6
        step = max(ref.snapshots)
        model = task.init_model(0)
        model.load_state_dict(ref.snapshots[step])
        opt = (torch.optim.SGD(model.parameters(), lr=1.0) if optimizer == "sgd"
               else torch.optim.Adam(model.parameters()))
        opt.load_state_dict(ref.optimizer_snapshots[step])
        if optimizer == "adam":
            assert int(opt.state_dict()["state"][0]["step"]) == step


@pytest.mark.gpu
@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.1), ("adam", 3e-3)])
def test_graphed_branches_equal_eager_branches_on_cuda(optimizer, lr):
    task = make_task("teacher_student", hidden=8, eval_size=64, objective_size=64).to("cuda")
    starts = _plain_states(task, Member(optimizer, 4, lr, 0), {3, 7})
    spec = BranchSpec(factors=(1, 2), steps_at_base=16, n_checkpoints=2, seeds=(0, 1))
    graphed = branch_losses(task, optimizer, starts, 4, lr, spec, cuda_graphs=True)
    eager = branch_losses(task, optimizer, starts, 4, lr, spec, cuda_graphs=False)
    for key, losses in eager.items():
        assert np.all(np.isfinite(losses))
        np.testing.assert_allclose(graphed[key], losses, rtol=1e-6, atol=0)
