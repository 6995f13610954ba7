"""Resumable harness runs: a sweep stopped by its time budget and run again equals the
uninterrupted sweep bit for bit; the analysis's training stages are kept per task."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.cli import main  # noqa: E402
from empirical_batch.errors import InputError  # noqa: E402
from empirical_batch.harness.config import get_config  # noqa: E402
from empirical_batch.harness.files import owned_files  # noqa: E402
from empirical_batch.harness.pipeline import run_harness  # noqa: E402
from empirical_batch.harness.resume import _EXACT, TimeBudget  # noqa: E402
from empirical_batch.harness.sweep import parts_folder, run_sweep  # noqa: E402
from empirical_batch.harness.trainer import group_members  # noqa: E402
from empirical_batch.validation.experiments import noise  # noqa: E402
from empirical_batch.validation.study import run_study  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def small_config():
    """tiny teacher_student with two rates per optimizer: 6 vmap groups."""
    cfg = get_config("tiny", ["teacher_student"])
    plan = cfg.plans[0]
    sweep = replace(plan.sweep, learning_rates={"sgd": (2**-3, 2**-1), "adam": (2**-7, 2**-5)})
    return replace(cfg, plans=(replace(plan, sweep=sweep),))


def read(path):
    return pd.read_csv(path, **_EXACT)


def test_a_budgeted_sweep_run_again_equals_the_uninterrupted_sweep(tmp_path):
    cfg = small_config()
    whole = run_harness(cfg, tmp_path / "a", stage="sweep", device="cpu", progress=False)
    assert whole.complete and whole.remaining == []
    n_groups = len(group_members(cfg.plans[0].sweep.members()))
    pieces = []
    for _ in range(n_groups + 2):
        # a budget shorter than any group: every piece trains one group, then stops
        run = run_harness(cfg, tmp_path / "b", stage="sweep", device="cpu", progress=False,
                          time_budget=1e-9)
        pieces.append(run)
        if run.complete:
            break
    assert [r.complete for r in pieces] == [False] * (n_groups - 1) + [True]
    assert [len(r.remaining) for r in pieces[:-1]] == list(range(n_groups - 1, 0, -1))
    assert not (tmp_path / "b" / "sweeps" / "teacher_student.csv").exists() or pieces[-1]
    pd.testing.assert_frame_equal(read(tmp_path / "b" / "sweeps" / "teacher_student.csv"),
                                  read(tmp_path / "a" / "sweeps" / "teacher_student.csv"),
                                  check_exact=True)
    # the frames themselves (not only their 7-digit CSV): groups read back bit for bit
    task = cfg.plans[0].make_task().to("cpu")
    resumed = run_sweep(task, cfg.plans[0].sweep, parts=parts_folder(tmp_path / "b", task.name))
    pd.testing.assert_frame_equal(resumed, run_sweep(task, cfg.plans[0].sweep),
                                  check_exact=True)
    manifest = json.loads((tmp_path / "b" / "manifest.sweep.json").read_text())
    assert manifest["complete"] is True and manifest["time_budget_s"] == 1e-9
    # every piece's groups stay listed: the manifest lists every file the run wrote
    written = {p.resolve() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert owned_files(tmp_path / "b") == written


def test_a_stopped_piece_lists_what_remains_and_the_same_command_continues(tmp_path, capsys):
    out = tmp_path / "h"
    args = ["harness", "--config", "tiny", "--tasks", "teacher_student", "digits",
            "--stage", "sweep", "--out", str(out), "--device", "cpu", "--no-progress",
            "--time-budget", "0.000001"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "time budget of 1e-06 s spent" in text
    assert "teacher_student/adam+sgd B=16 (6 runs × 24 steps)" in text
    assert "digits: the whole sweep" in text
    cont = text.split("continue with: ")[1].strip()
    assert cont == ("empirical-batch harness --config tiny --tasks teacher_student digits "
                    f"--stage sweep --out {out} --device cpu --time-budget 1e-06")
    assert len(list((out / "sweeps" / "parts" / "teacher_student").iterdir())) == 1
    assert not (out / "sweeps" / "teacher_student.csv").exists()


def test_the_analysis_keeps_its_training_stages_per_task(tmp_path, monkeypatch):
    cfg = small_config()
    out = tmp_path / "h"
    first = run_study(cfg, out, stage="all", device="cpu", progress=False)
    assert first.complete
    cached = sorted(p.name.split("-")[0] for p in (out / "cache" / "teacher_student").iterdir())
    assert cached == ["branched", "branched", "fits", "one_step", "reference", "reference"]
    crit = read(out / "results" / "b_crit_vs_noise.csv")
    noise_tab = read(out / "results" / "noise_along_reference.csv")

    def no_training(*args, **kwargs):
        raise AssertionError("a cached reference run was trained again")

    monkeypatch.setattr(noise, "_run_reference", no_training)
    again = run_study(cfg, out, stage="all", device="cpu", progress=False)
    assert again.complete
    pd.testing.assert_frame_equal(read(out / "results" / "b_crit_vs_noise.csv"), crit,
                                  check_exact=True)
    pd.testing.assert_frame_equal(read(out / "results" / "noise_along_reference.csv"),
                                  noise_tab, check_exact=True)
    written = {p.resolve() for p in out.rglob("*") if p.is_file()}
    assert owned_files(out) == written


def test_time_budget_is_checked():
    for bad in (0, -1, float("nan"), float("inf"), True):
        with pytest.raises(InputError, match="--time-budget"):
            TimeBudget(bad)
    budget = TimeBudget(3600)
    assert budget.allows(10) and budget.left() <= 3600
    budget.done()
    assert not budget.allows(7200)


def test_a_second_analysis_with_the_same_inputs_refits_nothing(tmp_path, monkeypatch):
    from empirical_batch.validation import curves, report

    cfg = small_config()
    out = tmp_path / "h"
    assert run_study(cfg, out, stage="all", device="cpu", progress=False).complete
    fits = list((out / "cache" / "teacher_student").glob("fits-all-*.pt"))
    assert len(fits) == 1  # the task's fits, under a hash of their inputs
    results = sorted(p for p in (out / "results").iterdir())
    before = {p.name: p.read_bytes() for p in [*results, out / "report.md"]}

    def no_fit(*args, **kwargs):
        raise AssertionError("the task's fits were computed again")

    monkeypatch.setattr(curves, "critical_batch_curve", no_fit)
    monkeypatch.setattr(report, "fit_targets", no_fit)
    monkeypatch.setattr(noise, "_run_reference", no_fit)
    again = run_study(cfg, out, stage="analyze", device="cpu", progress=False)
    assert again.complete
    assert {p.name: p.read_bytes() for p in [*results, out / "report.md"]} == before
    assert any(str(f).endswith(fits[0].name) for f in again.files)  # listed, reused

    # a changed input (the target fractions) is fitted again, under another hash
    from empirical_batch.harness.resume import StageCache, stage_cache

    changed = replace(cfg, target_fractions=(0.5, 0.25, 0.0))
    with stage_cache(StageCache(out / "cache")), \
            pytest.raises(AssertionError, match="computed again"):
        report.compute_results(changed, out)


def test_a_finished_group_cut_short_is_trained_again_by_name(tmp_path):
    from empirical_batch.errors import EmpiricalBatchWarning
    from empirical_batch.harness.resume import DamagedPart, part_record, read_part
    from empirical_batch.harness.sweep import COLUMNS

    cfg = small_config()
    out = tmp_path / "h"
    whole = run_harness(cfg, out, stage="sweep", device="cpu", progress=False)
    assert whole.complete
    manifest = json.loads((out / "manifest.sweep.json").read_text())
    parts = sorted((out / "sweeps" / "parts" / "teacher_student").iterdir())
    assert set(manifest["parts"]) == {p.name for p in parts}
    assert all(manifest["parts"][p.name] == part_record(p) for p in parts)
    reference = read(out / "sweeps" / "teacher_student.csv")
    damaged = parts[1]
    lines = damaged.read_text().splitlines(keepends=True)
    damaged.write_text("".join(lines[:5]))  # the header and 4 rows
    with pytest.raises(DamagedPart, match=rf"{re.escape(damaged.name)}: damaged: the "
                       rf"manifest recorded {len(lines) - 1} rows .* holds 4"):
        read_part(damaged, list(COLUMNS), manifest["parts"][damaged.name])
    with pytest.warns(EmpiricalBatchWarning, match=rf"{re.escape(damaged.name)}.*training "
                      "the group again"):
        again = run_harness(cfg, out, stage="sweep", device="cpu", progress=False)
    assert again.complete
    pd.testing.assert_frame_equal(read(out / "sweeps" / "teacher_student.csv"), reference,
                                  check_exact=True)
    assert len(damaged.read_text().splitlines()) == len(lines)
    after = json.loads((out / "manifest.sweep.json").read_text())
    assert after["parts"][damaged.name] == part_record(damaged)


def test_sweep_parts_keep_the_books_of_what_they_read_and_write(tmp_path):
    from empirical_batch.errors import EmpiricalBatchWarning
    from empirical_batch.harness.resume import SweepParts

    assert SweepParts().path("g.csv") is None
    assert SweepParts().read(None, ["a"]) is None
    SweepParts().write(pd.DataFrame({"a": [1.0]}), None)  # nothing kept, nothing fails
    files, records, guarded = [], {}, []
    parts = SweepParts(tmp_path, files=files, guard=guarded.append, records=records)
    path = parts.path("g.csv")
    assert parts.read(path, ["a"]) is None  # not there yet
    frame = pd.DataFrame({"a": [0.1, 1 / 3]})
    parts.write(frame, path)
    assert guarded == [path] and files == [path] and records["g.csv"]["rows"] == 2
    pd.testing.assert_frame_equal(parts.read(path, ["a"]), frame, check_exact=True)
    assert files == [path, path]
    path.write_text("a\n0.1\n")  # damaged since its record: warned, trained again
    with pytest.warns(EmpiricalBatchWarning, match="damaged.*training the group again"):
        assert parts.read(path, ["a"]) is None


def test_a_cached_result_of_a_class_since_moved_is_computed_again(tmp_path, monkeypatch):
    """A cache file pickled with a class at a module path the library no longer has (an
    earlier layout) is recomputed and replaced with a warning, not an import error."""
    import sys
    import types

    import torch

    from empirical_batch.errors import EmpiricalBatchWarning
    from empirical_batch.harness.resume import StageCache, cached, stage_cache

    old = types.ModuleType("empirical_batch_old_layout")

    class Kept:
        pass

    Kept.__module__, Kept.__qualname__ = old.__name__, "Kept"
    old.Kept = Kept
    monkeypatch.setitem(sys.modules, old.__name__, old)
    with stage_cache(StageCache(tmp_path)):
        first = cached("t", "reference", "sgd", 1, Kept)
    assert isinstance(first, Kept)
    (path,) = (tmp_path / "t").glob("reference-sgd-*.pt")
    monkeypatch.delitem(sys.modules, old.__name__)  # the class's module is gone
    with pytest.raises(ModuleNotFoundError):
        torch.load(path, weights_only=False)
    with stage_cache(StageCache(tmp_path)), \
            pytest.warns(EmpiricalBatchWarning, match="earlier version"):
        again = cached("t", "reference", "sgd", 1, lambda: {"new": 1})
    assert again == {"new": 1}
    assert torch.load(path, weights_only=False) == {"new": 1}  # replaced
