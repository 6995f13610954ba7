"""No lost user file: ``--overwrite`` removes only what the harness's manifests list, and a
file of the user's that the harness would write is refused."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from empirical_batch.cli import main  # noqa: E402
from empirical_batch.errors import InputError  # noqa: E402
from empirical_batch.harness.config import get_config  # noqa: E402
from empirical_batch.harness.files import owned_files  # noqa: E402
from empirical_batch.harness.pipeline import run_harness  # noqa: E402
from empirical_batch.validation.study import run_study  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def config(name="tiny"):
    cfg = get_config("tiny", ["teacher_student"])
    plan = cfg.plans[0]
    sweep = replace(plan.sweep, batch_sizes=(4, 16), learning_rates={"sgd": (0.25,)})
    return replace(cfg, name=name, plans=(replace(plan, sweep=sweep),))


def sweep(out, name="tiny", **kw):
    return run_harness(config(name), out, stage="sweep", device="cpu", progress=False, **kw)


def test_overwrite_removes_only_the_files_the_other_run_listed(tmp_path):
    out = tmp_path / "h"
    first = sweep(out, "first")
    # the user's files, in the harness's folders and beside them
    (out / "results").mkdir()
    notebook = out / "results" / "notebook.ipynb"
    notebook.write_text("{}")
    mine = out / "sweeps" / "my_notes.csv"
    mine.write_text("a,b\n1,2\n")
    webapp = out / "manifest.json"
    webapp.write_text(json.dumps({"name": "my web app", "icons": []}))
    with pytest.raises(InputError, match="another harness configuration"):
        sweep(out, "second")
    run = sweep(out, "second", overwrite=True)
    assert notebook.read_text() == "{}" and mine.read_text() == "a,b\n1,2\n"
    assert json.loads(webapp.read_text())["name"] == "my web app"
    manifests = sorted(p.name for p in out.glob("manifest*.json"))
    assert manifests == ["manifest.json", "manifest.sweep.json"]
    new = json.loads((out / "manifest.sweep.json").read_text())
    assert new["harness_config"]["name"] == "second"
    # the new run's files are listed, the first run's manifest is gone with its files
    assert (out / "sweeps" / "teacher_student.csv").resolve() in owned_files(out)
    assert all(not p.exists() or p.resolve() in owned_files(out) for p in first.files)
    assert owned_files(out) == {p.resolve() for p in run.files} | {
        (out / "manifest.sweep.json").resolve()}


def test_a_users_report_is_refused_with_and_without_overwrite(tmp_path):
    out = tmp_path / "h"
    sweep(out)
    report = out / "report.md"
    report.write_text("# my own notes\n")
    for overwrite in (False, True):
        with pytest.raises(InputError, match=r"report\.md exists and is not a file of this "
                                             r"harness"):
            run_study(config(), out, stage="analyze", device="cpu", progress=False,
                        overwrite=overwrite)
        assert report.read_text() == "# my own notes\n"


def test_a_web_apps_manifest_is_never_taken_for_a_harness_run(tmp_path, capsys):
    out = tmp_path / "h"
    out.mkdir()
    webapp = out / "manifest.json"
    webapp.write_text(json.dumps({"name": "my web app"}))
    # no harness manifest: a folder of someone else's files needs --overwrite to write in
    with pytest.raises(InputError, match="holds no harness manifest"):
        sweep(out)
    sweep(out, overwrite=True)  # writes beside it (manifest.sweep.json), keeps it
    assert json.loads(webapp.read_text()) == {"name": "my web app"}
    # stage all would write manifest.json itself: refused, the file kept
    code = main(["harness", "--config", "tiny", "--tasks", "teacher_student", "--out",
                 str(out), "--device", "cpu", "--no-progress", "--overwrite"])
    assert code == 2 and "manifest.json exists and is not a file of this harness" in \
        capsys.readouterr().err
    assert json.loads(webapp.read_text()) == {"name": "my web app"}


def test_old_manifests_that_list_files_from_the_working_directory_are_understood(tmp_path):
    out = tmp_path / "data" / "harness"
    run = sweep(out, "first")
    m = out / "manifest.sweep.json"
    info = json.loads(m.read_text())
    info["files"] = [f"data/harness/{f}" for f in info["files"]]  # an older manifest
    m.write_text(json.dumps(info))
    assert owned_files(out) == {p.resolve() for p in run.files} | {m.resolve()}
    sweep(out, "second", overwrite=True)
    assert json.loads(m.read_text())["harness_config"]["name"] == "second"


def test_sweeps_without_a_manifest_are_analysed_and_their_outputs_guarded(tmp_path):
    src = tmp_path / "src"
    sweep(src)
    out = tmp_path / "copy"
    (out / "sweeps").mkdir(parents=True)
    for f in (src / "sweeps").glob("*.csv"):
        (out / "sweeps" / f.name).write_bytes(f.read_bytes())
    (out / "README.md").write_text("sweeps from elsewhere\n")
    (out / "results").mkdir()
    mine = out / "results" / "table1.csv"
    mine.write_text("mine\n")
    with pytest.raises(InputError, match=r"table1\.csv exists and is not a file of this"):
        run_study(config(), out, stage="analyze", device="cpu", progress=False)
    mine.unlink()
    run = run_study(config(), out, stage="analyze", device="cpu", progress=False)
    assert run.complete and (out / "report.md").is_file()
    assert (out / "README.md").read_text() == "sweeps from elsewhere\n"


def test_the_engine_runs_no_analysis_of_its_own(tmp_path):
    # the engine (layer 6) never imports the study (layer 7): its analysis is passed in
    with pytest.raises(InputError, match="needs an analysis"):
        run_harness(config(), tmp_path / "h", stage="analyze", device="cpu", progress=False)
    assert not (tmp_path / "h").exists()


def test_a_copied_folder_whose_manifest_lists_absolute_paths_is_still_owned(tmp_path):
    # a manifest written where the folder used to be lists absolute paths there; the
    # files of the copy are read from those paths' last parts
    out = tmp_path / "copy"
    run = sweep(out)
    m = out / "manifest.sweep.json"
    info = json.loads(m.read_text())
    info["files"] = [f"/elsewhere/data/harness/{f}" for f in info["files"]]
    m.write_text(json.dumps(info))
    assert owned_files(out) == {p.resolve() for p in run.files} | {m.resolve()}
