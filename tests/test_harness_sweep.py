"""Sweeps in the schema, and --shard: shards concatenate (through load_sweep) to the whole."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from empirical_batch import load_sweep  # noqa: E402
from empirical_batch.harness.config import get_config  # noqa: E402
from empirical_batch.harness.sweep import (  # noqa: E402
    load_sweeps,
    parse_shard,
    run_sweep,
    sweep_files,
    sweep_path,
    write_sweep,
)

KEY = ["run", "step"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def plan_task():
    plan = get_config("tiny", ["teacher_student"]).plans[0]
    spec = replace(plan.sweep, learning_rates={"sgd": (0.1, 0.4), "adam": (0.01,)})
    return spec, plan.make_task().to("cpu")


def test_sweep_is_in_the_schema(plan_task):
    spec, task = plan_task
    frame = run_sweep(task, spec)
    sweep = load_sweep(frame)
    assert len(sweep.runs) == len(spec.members())
    assert (frame["examples"] == frame["step"] * frame["batch_size"]).all()
    assert {"seed", "optimizer", "task"} <= set(sweep.to_frame().columns)


def test_shards_concatenate_to_the_unsharded_sweep(plan_task, tmp_path):
    spec, task = plan_task
    whole = run_sweep(task, spec)
    n = 3
    paths = [write_sweep(run_sweep(task, spec, shard=(i, n)), sweep_path(tmp_path, task.name,
                                                                         (i, n)))
             for i in range(n)]
    sizes = [len(pd.read_csv(p)) for p in paths]
    assert all(s > 0 for s in sizes) and sum(sizes) == len(whole)
    found = sweep_files(tmp_path, task.name)
    assert found == paths
    merged = load_sweeps(found).to_frame().sort_values(KEY).reset_index(drop=True)
    ref = whole.sort_values(KEY).reset_index(drop=True)
    assert merged["run"].tolist() == ref["run"].tolist()
    assert (merged["step"].to_numpy() == ref["step"].to_numpy()).all()
    # a run's result does not depend on which shard (vmap group) trained it; CSVs keep
    # 7 significant digits, hence rtol 1e-6
    np.testing.assert_allclose(merged["metric"], ref["metric"], rtol=1e-6)


def test_missing_shard_is_an_error(plan_task, tmp_path):
    spec, task = plan_task
    write_sweep(run_sweep(task, spec, shard=(0, 2)), sweep_path(tmp_path, task.name, (0, 2)))
    with pytest.raises(FileNotFoundError, match=r"shard\(s\) \[1\] of 2 missing"):
        sweep_files(tmp_path, task.name)
    with pytest.raises(FileNotFoundError, match="no sweep for task 'digits'"):
        sweep_files(tmp_path, "digits")


@pytest.mark.parametrize("text, expect", [(None, (0, 1)), ("0/4", (0, 4)), (" 3/4", (3, 4))])
def test_parse_shard(text, expect):
    assert parse_shard(text) == expect


@pytest.mark.parametrize("text", ["4/4", "1/0", "a/b", "1-2", "-1/3"])
def test_parse_shard_rejects(text):
    with pytest.raises(ValueError, match="--shard"):
        parse_shard(text)


def test_gzipped_sweeps_are_found_and_loaded(plan_task, tmp_path):
    import gzip
    import shutil

    spec, task = plan_task
    path = write_sweep(run_sweep(task, spec), sweep_path(tmp_path, task.name))
    with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    found = sweep_files(tmp_path, task.name)
    assert [p.name for p in found] == [f"{task.name}.csv.gz"]
    assert len(load_sweeps(found).runs) == len(spec.members())


def test_sweep_files_prefer_fresh_shards_and_never_mix_sweeps(tmp_path):
    import os
    import warnings

    from empirical_batch.harness.sweep import sweep_files

    d = tmp_path / "sweeps"
    d.mkdir()
    whole = d / "t.csv"
    whole.write_text("x\n")
    for i in range(2):
        (d / f"t.shard-{i}-of-2.csv").write_text("x\n")
    os.utime(whole, (1, 1))  # the whole-sweep file is stale
    with pytest.warns(UserWarning, match="shard files, newer"):
        assert [p.name for p in sweep_files(tmp_path, "t")] == [
            "t.shard-0-of-2.csv", "t.shard-1-of-2.csv"]
    for p in d.glob("t.shard-*"):
        os.utime(p, (1, 1))
    os.utime(whole, None)
    with pytest.warns(UserWarning, match="shard files are older"):
        assert sweep_files(tmp_path, "t") == [whole]
    (d / "t.shard-0-of-3.csv").write_text("x\n")
    with pytest.raises(ValueError, match="mix shard counts"):
        sweep_files(tmp_path, "t")
    (d / "t.shard-0-of-3.csv").unlink()
    whole.unlink()
    (d / "t.shard-1-of-2.csv").unlink()
    with pytest.raises(FileNotFoundError, match="missing"):
        sweep_files(tmp_path, "t")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (d / "t.shard-1-of-2.csv").write_text("x\n")
        assert len(sweep_files(tmp_path, "t")) == 2
