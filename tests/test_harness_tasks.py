"""Task plugins: one interface, deterministic data, and clear configuration errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from empirical_batch.cli import main  # noqa: E402
from empirical_batch.harness.config import get_config  # noqa: E402
from empirical_batch.harness.tasks import TASKS, TaskConfigError, make_task  # noqa: E402
from empirical_batch.harness.tasks.sequence import grammar_text  # noqa: E402

OPTS = {
    "teacher_student": {"hidden": 8, "eval_size": 64, "objective_size": 64},
    "digits": {"hidden": 8},
    "sequence": {"context": 8, "d_model": 8, "corpus_chars": 4000, "eval_windows": 8,
                 "objective_windows": 8},
}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("name", list(TASKS))
def test_interface_and_determinism(name, tmp_path):
    opts = OPTS.get(name)
    if name == "text_lm":  # any text file will do here (tests/test_harness_text_lm.py)
        (tmp_path / "t.txt").write_text(grammar_text(3000, 1))
        opts = {"path": str(tmp_path / "t.txt"), "context": 8, "d_model": 8, "n_heads": 2,
                "n_layers": 1, "eval_windows": 8, "objective_windows": 8}
    task = make_task(name, **opts).to("cpu")
    model = task.init_model(1)
    x, y = task.sample(task.generator(5, 4), 4)
    x2, y2 = task.sample(task.generator(5, 4), 4)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    x3, _ = task.sample(task.generator(6, 4), 4)
    assert not torch.equal(x, x3)
    loss = task.loss_fn(model(x), y)
    assert loss.ndim == 0 and torch.isfinite(loss)
    for xs, ys in (task.eval_data(), task.objective_data()):
        assert xs.shape[0] == ys.shape[0] > 0
    m2 = task.init_model(1)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), m2.parameters(),
                                                 strict=True))


def test_label_noise_sets_the_floor():
    # the teacher itself achieves exactly the noise variance on fresh data
    task = make_task("teacher_student", label_noise=0.5, eval_size=20000).to("cpu",
                                                                                torch.float64)
    x, y = task.eval_data()
    floor = float(((task._teacher(x) - y) ** 2).mean())
    # 20,000 squared N(0, 0.25) draws: standard error 0.25·sqrt(2/20000) = 0.0025; 4 SE
    assert abs(floor - 0.25) < 0.01


def test_grammar_is_deterministic_and_agrees():
    a, b = grammar_text(500, 3), grammar_text(500, 3)
    assert a == b and a != grammar_text(500, 4)
    assert set(a) <= set("abcdefghijklmnopqrstuvwxyz .")


@pytest.mark.parametrize("name, opts, match", [
    ("digits", {"hiden": 3}, "has no option 'hiden'; its options are"),
    ("digits", {"hidden": -3}, "option 'hidden' must be a positive integer, got -3"),
    ("digits", {"eval_fraction": 1.5}, "'eval_fraction' must be a number strictly between"),
    ("teacher_student", {"label_noise": -0.1}, "'label_noise' must be a finite number >= 0"),
    ("sequence", {"d_model": 10, "n_heads": 3}, "must be divisible by 'n_heads'"),
    ("sequence", {"corpus_chars": 50}, "'corpus_chars' \\(50\\) is too small"),
    ("mnist", {}, "unknown task 'mnist'; available tasks: teacher_student, digits, sequence, "
                  "text_lm"),
])
def test_config_errors_are_clear(name, opts, match):
    with pytest.raises(TaskConfigError, match=match):
        make_task(name, **opts)


@pytest.mark.parametrize("name", ["teacher_student", "digits", "sequence", "text_lm"])
def test_every_option_declares_its_constraint_and_a_wrong_type_is_named(name):
    """Each task's options are declared once (``option_constraints``): every field of its
    ``Options`` has a constraint, and a bool or a float for an integer option, or a string
    for a number, is refused naming the task, the option and the value received."""
    import dataclasses

    cls = TASKS[name]
    fields = {f.name: f.type for f in dataclasses.fields(cls.Options)}
    assert set(cls.option_constraints) == set(fields), name
    for field, kind in fields.items():
        bad = {"int": [True, 2.0], "float": ["0.5", True], "str": [3]}[kind]
        for value in bad:
            with pytest.raises(TaskConfigError, match=rf"^task {name!r}: option {field!r} "
                                                       rf"must be .*, got "):
                make_task(name, **{field: value})


def test_cli_reports_bad_task_in_one_line(tmp_path, capsys):
    code = main(["harness", "--config", "tiny", "--tasks", "mnist", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0
    assert "unknown task 'mnist'" in err


def test_cli_reports_bad_shard(tmp_path, capsys):
    assert main(["harness", "--shard", "3/2", "--out", str(tmp_path)]) == 2
    assert "--shard" in capsys.readouterr().err


def test_presets_have_the_required_grids(text_corpus):
    full = get_config("full")
    for plan in full.plans:
        sizes = plan.sweep.batch_sizes
        assert len(sizes) >= 8 and all(b & (b - 1) == 0 for b in sizes)  # powers of two
        assert set(plan.sweep.optimizers) == {"sgd", "adam"}
        assert len(plan.sweep.seeds) >= 2
        assert plan.noise.batch_size in sizes
    for name in ("tiny", "cpu"):
        for plan in get_config(name).plans:
            assert plan.noise.batch_size in plan.sweep.batch_sizes
    assert get_config("tiny", ["digits"]).tasks == ("digits",)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without CUDA")
def test_cli_cuda_without_cuda_is_a_clear_error(tmp_path, capsys):
    assert main(["harness", "--config", "tiny", "--tasks", "digits", "--device", "cuda",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no CUDA device" in err and "Traceback" not in err


def test_resolve_device_takes_strings_and_torch_devices():
    from empirical_batch.harness.device import resolve_device

    assert resolve_device("cpu") == resolve_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ValueError, match="auto, cpu or cuda"):
        resolve_device(torch.device("meta"))
    with pytest.raises(TypeError, match="device must be"):
        resolve_device(0)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            resolve_device(torch.device("cuda", 0))


def test_use_device_is_the_one_check_and_sets_the_threads():
    from empirical_batch.harness.device import device_name, use_device
    from empirical_batch.harness.threads import restores_torch_threads

    @restores_torch_threads
    def threads_after(device, threads):
        return use_device(device, threads), torch.get_num_threads()

    before = torch.get_num_threads()
    assert threads_after("cpu", None) == (torch.device("cpu"), 1)
    assert threads_after(torch.device("cpu"), 2) == (torch.device("cpu"), 2)
    assert torch.get_num_threads() == before
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="threads must be an integer >= 1"):
            use_device("cpu", bad)
    with pytest.raises(ValueError, match="auto, cpu or cuda"):
        use_device("tpu")
    assert device_name("cpu") == "cpu" and device_name("cpu", otherwise="x") == "x"


def test_plan_summary_counts_by_hand():
    from empirical_batch.harness.config import plan_summary

    s = plan_summary(get_config("tiny", ["teacher_student", "sequence"])).set_index("task")
    # teacher_student: B 4, 16, 64 × 3 SGD + 3 Adam rates × 1 seed; steps
    # clip(ceil(192 / B), 24, 64) = 48, 24, 24 per run
    assert s.loc["teacher_student", "runs"] == 18
    assert s.loc["teacher_student", "run_steps"] == 6 * (48 + 24 + 24)
    # SGD and Adam of a batch size in one group: 3 groups of 6
    assert s.loc["teacher_student", "vmapped_steps"] == 48 + 24 + 24
    # one 16-16-1 tanh MLP: 16·16 + 16 + 16 + 1 parameters
    assert s.loc["teacher_student", "parameters"] == 16 * 16 + 16 + 16 + 1
    # sequence: clip(ceil(96 / B), 12, 24) = 24, 12, 12
    assert s.loc["sequence", "run_steps"] == 6 * (24 + 12 + 12)
    assert s.loc["sequence", "vmapped_steps"] == 24 + 12 + 12


def test_plan_summary_with_a_bench_scale(text_corpus):
    from empirical_batch.harness.config import plan_summary, scale_budget

    s = plan_summary(get_config("tiny", ["teacher_student"]), scale=0.5).set_index("task")
    # budget × 0.5: clip(ceil(96 / B), 12, 32) = 24, 12, 12 for B = 4, 16, 64
    assert s.loc["teacher_student", "run_steps"] == 6 * (24 + 12 + 12)
    budget = get_config("tiny").plans[0].sweep.budget
    assert scale_budget(budget, 1e-9).steps(1) == 1  # never below one step
    with pytest.raises(ValueError, match="scale"):
        scale_budget(budget, 0.0)


def test_output_folder_of_another_configuration_is_refused(tmp_path, capsys):
    import json

    out = tmp_path / "o"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"harness_config": {"name": "full"}}))
    argv = ["harness", "--config", "tiny", "--tasks", "teacher_student", "--stage", "sweep",
            "--no-progress", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "another harness configuration" in err and "--overwrite" in err
    assert main([*argv, "--overwrite"]) == 0
    # the same configuration again: reused (resume, or analysis of existing sweeps)
    assert main(argv) == 0


def test_output_folder_with_foreign_files_or_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["harness", "--config", "tiny", "--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["harness", "--config", "tiny", "--out", str(f)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_harness_options_are_checked_once_and_frozen():
    import dataclasses

    from empirical_batch.harness.config import get_config
    from empirical_batch.harness.options import HarnessOptions

    opts = HarnessOptions(stage="sweep", shard=(1, 4), split="groups")
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.stage = "all"  # type: ignore[misc]
    for bad, match in ((dict(stage="train"), "stage must be one of"),
                       (dict(stage="all"), "needs an analysis"),
                       (dict(stage="sweep", split="rows"), "--shard-by"),
                       (dict(stage="sweep", time_budget=-1.0), "--time-budget"),
                       (dict(stage="analyze", shard=(0, 2), analysis=object()),
                        "splits the sweep only")):
        with pytest.raises(ValueError, match=match):
            HarnessOptions(**bad)
    tiny = get_config("tiny", ["teacher_student"])
    HarnessOptions(stage="sweep", shard=(0, 2), split="groups").check_shards(tiny)
    with pytest.raises(ValueError, match="vmap groups"):
        HarnessOptions(stage="sweep", shard=(0, 10_000), split="groups").check_shards(tiny)
