"""A sweep's shards through concurrent.futures executors (processes, Dask, Ray) equal the
sequential `run_sweep` exactly; shards of whole vmap groups; --executor parsing."""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import pickle

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.harness.config import get_config  # noqa: E402
from empirical_batch.harness.distribute import (  # noqa: E402
    ExecutorSpec,
    ShardError,
    open_executor,
    parse_executor,
    run_sweep_distributed,
    shard_jobs,
)
from empirical_batch.harness.sweep import (  # noqa: E402
    group_shards,
    merge_shards,
    run_sweep,
    shard_members,
)
from empirical_batch.harness.tasks import TeacherStudent  # noqa: E402
from empirical_batch.harness.trainer import group_members  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    """The tiny teacher_student plan and its sequential sweep (one torch thread, CPU)."""
    plan = get_config("tiny", ["teacher_student"]).plans[0]
    torch.set_num_threads(1)
    return plan, run_sweep(plan.make_task().to("cpu"), plan.sweep)


def _distributed(plan, executor, **kw):
    return run_sweep_distributed(plan.task, plan.sweep, executor, options=plan.options,
                                 device="cpu", **kw)


# ------------------------------------------------------------------ shards of groups
def test_group_shards_hold_whole_groups_balanced_by_run_steps(tiny):
    plan, _ = tiny
    members, budget = plan.sweep.members(), plan.sweep.budget
    groups = group_members(members)
    cost = {tuple(g): budget.steps(g[0].batch_size) * len(g) for g in groups}
    for n in (1, 2, 3, 4, len(groups)):
        shards = group_shards(members, budget, n)
        assert sorted(m.run for s in shards for m in s) == sorted(m.run for m in members)
        for s in shards:
            assert s == [m for m in members if m in s]  # runs keep the sweep's order
            assert all(tuple(g) in cost for g in group_members(s))  # whole groups only
        loads = [sum(cost[tuple(g)] for g in group_members(s)) for s in shards]
        # largest-first onto the least-loaded shard: no shard exceeds another by more
        # than one group
        assert max(loads) - min(loads) <= max(cost.values())
        assert shard_members(members, (0, n), split="groups", budget=budget) == shards[0]
    assert group_shards(members, budget, len(groups) + 2)[-1] == []


def test_group_shards_with_max_group_keep_the_chunks(tiny):
    plan, _ = tiny
    members, budget = plan.sweep.members(), plan.sweep.budget
    chunks = group_members(members, 2)
    for s in group_shards(members, budget, 3, max_group=2):
        assert all(c in chunks for c in group_members(s, 2))


def test_split_by_groups_reproduces_the_unsharded_sweep_bit_for_bit(tiny):
    plan, whole = tiny
    task = plan.make_task().to("cpu")
    parts = [run_sweep(task, plan.sweep, shard=(i, 3), split="groups") for i in range(3)]
    pd.testing.assert_frame_equal(merge_shards(parts), whole, check_exact=True)
    # every-n-th-run shards regroup the vmapped programs: equal only to round-off
    runs = merge_shards([run_sweep(task, plan.sweep, shard=(i, 3)) for i in range(3)])
    pd.testing.assert_frame_equal(runs, whole, check_exact=False, rtol=1e-6)


def test_merge_shards_refuses_overlapping_shards(tiny):
    _, whole = tiny
    with pytest.raises(ValueError, match="appears in more than one shard"):
        merge_shards([whole, whole.iloc[:3]])
    with pytest.raises(ValueError, match="at least one"):
        merge_shards([])


def test_shard_job_pickles_and_rebuilds_its_task(tiny):
    plan, whole = tiny
    jobs = shard_jobs(plan.task, plan.sweep, options=plan.options, n_shards=2, device="cpu")
    assert [j.shard for j in jobs] == [(0, 2), (1, 2)]
    job = pickle.loads(pickle.dumps(jobs[1]))
    frame, host, device, seconds = job()
    assert host and device == "cpu (cpu)" and seconds > 0
    assert 0 < len(frame) < len(whole) and set(frame["run"]) < set(whole["run"])
    # a Task instance: its class, options, device and dtype travel
    task = plan.make_task().to("cpu", torch.float64)
    (job64,) = shard_jobs(task, plan.sweep, n_shards=1)
    assert job64.dtype == torch.float64 and job64.device == "cpu"
    assert job64.options["hidden"] == plan.options["hidden"]


def test_bad_arguments_are_clear(tiny):
    plan, _ = tiny
    with pytest.raises(ValueError, match="n_shards must be an integer >= 1"):
        shard_jobs(plan.task, plan.sweep, options=plan.options, n_shards=0)
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        shard_jobs("nope", plan.sweep)
    with pytest.raises(ValueError, match="has no option 'width'"):
        shard_jobs(plan.task, plan.sweep, options={"width": 3})
    with pytest.raises(TypeError, match="executor must have submit"):
        run_sweep_distributed(plan.task, plan.sweep, object(), options=plan.options)
    # more shards than vmap groups: one shard per group
    n_groups = len(group_members(plan.sweep.members()))
    assert len(shard_jobs(plan.task, plan.sweep, options=plan.options, n_shards=99)) == n_groups


class _FailsAtB64(TeacherStudent):
    def _sample(self, generator, batch_size):
        if batch_size == 64:
            raise RuntimeError("boom at B=64")
        return super()._sample(generator, batch_size)


def test_a_failed_shard_raises_naming_the_shard(tiny):
    plan, _ = tiny
    task = _FailsAtB64(**plan.options).to("cpu")
    with (cf.ThreadPoolExecutor(1) as pool,
          pytest.raises(ShardError, match=r"shard \d/3 \(\d runs\) of task 'teacher_student' "
                                          r"failed: RuntimeError: boom at B=64") as info):
        run_sweep_distributed(task, plan.sweep, pool)
    assert isinstance(info.value.__cause__, RuntimeError)


# ------------------------------------------------------------------------- engines
def test_thread_pool_equals_sequential(tiny):
    plan, whole = tiny
    with cf.ThreadPoolExecutor(2) as pool:
        pd.testing.assert_frame_equal(_distributed(plan, pool, n_shards=3), whole,
                                      check_exact=True)


@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
def test_process_pool_equals_sequential(tiny):
    plan, whole = tiny
    log: list[dict] = []
    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        got = _distributed(plan, pool, progress=True, log=log)
    pd.testing.assert_frame_equal(got, whole, check_exact=True)
    assert [e["shard"] for e in log] == [f"{i}/3" for i in range(3)]  # one per batch size
    assert sum(e["runs"] for e in log) == len(plan.sweep.members())


@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
@pytest.mark.slow  # starting two Dask worker processes: ~8 s on 2 shared cores
def test_dask_cluster_equals_sequential(tiny):
    distributed = pytest.importorskip("distributed")
    plan, whole = tiny
    with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   dashboard_address=None) as cluster,
          distributed.Client(cluster) as client):
        got = _distributed(plan, client.get_executor())
    pd.testing.assert_frame_equal(got, whole, check_exact=True)


@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
@pytest.mark.slow  # starting a local Ray cluster: ~10 s on 2 shared cores
def test_ray_cluster_equals_sequential(tiny):
    ray = pytest.importorskip("ray")
    plan, whole = tiny
    if ray.is_initialized():  # pragma: no cover - another test left Ray running
        pytest.skip("Ray is already initialised in this process")
    with open_executor("ray:local:2") as executor:  # starts a local Ray cluster, stops it
        got = _distributed(plan, executor)
    assert not ray.is_initialized()
    pd.testing.assert_frame_equal(got, whole, check_exact=True)


# ------------------------------------------------------------------------ --executor
@pytest.mark.parametrize("text, expect", [
    ("process:4", ExecutorSpec("process", None, 4)),
    ("dask:tcp://10.0.0.1:8786", ExecutorSpec("dask", "tcp://10.0.0.1:8786")),
    ("dask:local", ExecutorSpec("dask", "local")),
    ("dask:local:3", ExecutorSpec("dask", "local", 3)),
    ("ray:auto", ExecutorSpec("ray", "auto")),
    ("RAY:local:2", ExecutorSpec("ray", "local", 2)),
    ("ray:ray://head:10001", ExecutorSpec("ray", "ray://head:10001")),
])
def test_parse_executor(text, expect):
    assert parse_executor(text) == expect
    assert parse_executor(str(expect)) == expect


@pytest.mark.parametrize("text, match", [
    ("process", "must look like"), ("process:0", "N >= 1"), ("process:two", "N >= 1"),
    ("spark:local", "unknown engine 'spark'"), ("dask:", "needs an address"),
    ("dask:auto", "give the scheduler's address"), ("ray:local:0", "N >= 1"),
])
def test_parse_executor_rejects(text, match):
    with pytest.raises(ValueError, match=match):
        parse_executor(text)


@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
def test_cli_executor_writes_the_sequential_sweep(tmp_path):
    from empirical_batch.cli import main

    common = ["harness", "--config", "tiny", "--tasks", "teacher_student", "--stage", "sweep",
              "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "seq")]) == 0
    # one worker process (the 2-worker pool is tested above): 3 shards, one at a time
    assert main([*common, "--out", str(tmp_path / "par"), "--executor", "process:1"]) == 0
    name = "sweeps/teacher_student.csv"
    assert (tmp_path / "par" / name).read_bytes() == (tmp_path / "seq" / name).read_bytes()
    manifest = json.loads((tmp_path / "par" / "manifest.sweep.json").read_text())
    assert "--executor process:1" in manifest["command"]
    assert manifest["executor"] == "ProcessPoolExecutor" and manifest["split"] == "groups"
    assert len(manifest["shards"]["teacher_student"]) == 3
    for bad in (["--shard", "0/2"], ["--stage", "analyze"]):
        args = [*common[:5], *bad, "--executor", "process:2", "--out", str(tmp_path / "x")]
        assert main(args) == 2
    assert main([*common, "--executor", "process:0", "--out", str(tmp_path / "y")]) == 2


def test_cli_shard_by_groups_merges_to_the_sequential_sweep(tmp_path, capsys):
    """Slurm-style: one process per shard (--shard i/n --shard-by groups), the shard files
    read back through sweep_files/load_sweeps equal the unsharded sweep file."""
    from empirical_batch.cli import main
    from empirical_batch.harness.sweep import load_sweeps, sweep_files

    common = ["harness", "--config", "tiny", "--tasks", "teacher_student", "--no-progress"]
    assert main([*common, "--stage", "sweep", "--out", str(tmp_path / "seq")]) == 0
    for i in range(3):
        assert main([*common, "--shard", f"{i}/3", "--shard-by", "groups",
                     "--out", str(tmp_path / "arr")]) == 0
    files = sweep_files(tmp_path / "arr", "teacher_student")
    assert [f.name for f in files] == [f"teacher_student.shard-{i}-of-3.csv" for i in range(3)]
    merged = merge_shards([load_sweeps(files).to_frame()])
    whole = merge_shards([load_sweeps([tmp_path / "seq" / "sweeps" / "teacher_student.csv"])
                          .to_frame()])
    pd.testing.assert_frame_equal(merged, whole, check_exact=True)
    capsys.readouterr()
    assert main([*common, "--shard", "0/4", "--shard-by", "groups",
                 "--out", str(tmp_path / "four")]) == 2
    assert "only 3 vmap groups" in capsys.readouterr().err
    assert not (tmp_path / "four").exists()  # refused before anything was written
