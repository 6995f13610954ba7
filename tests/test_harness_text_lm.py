"""The ``text_lm`` task: a causal character-level transformer on a real text file."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

torch = pytest.importorskip("torch")

from empirical_batch.cli import main  # noqa: E402
from empirical_batch.datasets import EXCERPT_CHARS, FILES, bundled  # noqa: E402
from empirical_batch.harness.config import get_config  # noqa: E402
from empirical_batch.harness.tasks import TaskConfigError, make_task  # noqa: E402
from empirical_batch.harness.tasks.sequence import grammar_text  # noqa: E402
from empirical_batch.harness.tasks.text_lm import TEXT_ENV, default_text_path  # noqa: E402
from empirical_batch.harness.trainer import Member, train_batched, train_plain  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = {"context": 16, "d_model": 16, "n_heads": 2, "n_layers": 1, "eval_windows": 32,
         "objective_windows": 32}


@pytest.fixture
def shakespeare(published):
    return published("tinyshakespeare/input.txt")


@pytest.fixture
def small_text(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text(grammar_text(6000, 2))
    return path


def test_tiny_shakespeare_is_named_by_file_and_sha256(shakespeare):
    task = make_task("text_lm", path=str(shakespeare), **SMALL)
    info = task.describe()
    # the datasets registry records its size and sha256
    entry = FILES["tinyshakespeare/input.txt"]
    assert info["text_sha256"] == hashlib.sha256(shakespeare.read_bytes()).hexdigest()
    assert info["text_sha256"] == entry.sha256 and shakespeare.stat().st_size == entry.size
    assert info["text_file"] == "input.txt" and info["text_chars"] == 1_115_394
    assert info["vocab_size"] == 65 and info["task"] == "text_lm"
    # the sha256 option accepts the right file (upper case too) and refuses any other
    make_task("text_lm", path=str(shakespeare), sha256=info["text_sha256"].upper()).to("cpu")
    with pytest.raises(TaskConfigError, match=r"has sha256 .* not the"):
        make_task("text_lm", path=str(shakespeare), sha256="0" * 64, **SMALL).to("cpu")


def test_default_path_is_the_published_corpus(monkeypatch, shakespeare):
    monkeypatch.delenv(TEXT_ENV, raising=False)
    monkeypatch.setenv("EMPIRICAL_BATCH_DATA", str(shakespeare.parents[1]))
    assert default_text_path() == shakespeare
    assert make_task("text_lm", **SMALL).path == shakespeare
    # the first characters come from the shipped excerpt: the same text, no download
    excerpt = bundled("tinyshakespeare/excerpt.txt")
    assert default_text_path(20_000) == excerpt == default_text_path(EXCERPT_CHARS)
    assert default_text_path(EXCERPT_CHARS + 1) == shakespeare
    whole = shakespeare.read_text(encoding="utf-8")
    assert excerpt.read_text(encoding="utf-8") == whole[:EXCERPT_CHARS]
    small = make_task("text_lm", max_chars=20_000, **SMALL)
    assert small.path == excerpt and small.text == whole[:20_000]


def test_tiny_preset_needs_no_download(monkeypatch, tmp_path):
    """Nothing in the data folder and downloads off: the tiny preset's text_lm still has
    its text (the shipped excerpt), the whole corpus is one clear error."""
    monkeypatch.delenv(TEXT_ENV, raising=False)
    monkeypatch.setenv("EMPIRICAL_BATCH_DATA", str(tmp_path))
    tiny = get_config("tiny", ["text_lm"]).plans[0]
    task = make_task("text_lm", **tiny.options)
    assert task.path == bundled("tinyshakespeare/excerpt.txt")
    with pytest.raises(TaskConfigError, match=r"tinyshakespeare/input.txt .* not in the data "
                                              r"folder .* downloads are off"):
        make_task("text_lm")


def test_split_is_fixed_and_by_position(shakespeare):
    task = make_task("text_lm", path=str(shakespeare), **SMALL).to("cpu")
    text, vocab = task.text, task.vocab
    cut = int(len(text) * 0.9)

    def decode(row):
        return "".join(vocab[int(i)] for i in row)

    x_ev, y_ev = task.eval_data()
    assert x_ev.shape == y_ev.shape == (32, 16)
    assert torch.equal(x_ev[:, 1:], y_ev[:, :-1])  # targets are the next characters
    for row in x_ev[:: 8]:
        assert decode(row) in text[cut:]
    x, _ = task.sample(task.generator(0, 8), 8)
    for row in x:
        assert decode(row) in text[:cut]
    again = make_task("text_lm", path=str(shakespeare), **SMALL).to("cpu")
    assert torch.equal(again.eval_data()[0], x_ev)
    assert torch.equal(again.objective_data()[0], task.objective_data()[0])


def test_adam_learns_the_text(shakespeare):
    """Twenty Adam steps take the loss from about log(65) (uniform) to well below it: the
    character frequencies alone are worth about 1.0 nat here."""
    task = make_task("text_lm", path=str(shakespeare), max_chars=200_000, **SMALL).to("cpu")
    rows = train_plain(task, Member("adam", 16, 0.01, 0), 20, [0, 20])
    first, last = rows[0]["metric"], rows[-1]["metric"]
    assert abs(first - math.log(len(task.vocab))) < 0.3
    assert last < first - 0.8


def test_batched_matches_plain(small_text):
    task = make_task("text_lm", path=str(small_text), **SMALL).to("cpu", torch.float64)
    members = [Member("sgd", 4, lr, s) for lr in (0.1, 0.5) for s in (0, 1)]
    batched = train_batched(task, members, 6, [0, 3, 6])
    for m in members:
        plain = [r["metric"] for r in train_plain(task, m, 6, [0, 3, 6])]
        mine = [r["metric"] for r in batched if r["run"] == m.run]
        assert mine == pytest.approx(plain, rel=1e-10)


def test_environment_variable_and_max_chars(monkeypatch, small_text):
    monkeypatch.setenv(TEXT_ENV, str(small_text))
    task = make_task("text_lm", max_chars=3000, **SMALL)
    assert task.path == small_text and len(task.text) == 3000
    assert task.describe()["text_chars"] == 3000
    assert task.describe()["text_sha256"] == hashlib.sha256(small_text.read_bytes()).hexdigest()


def test_missing_file_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(TEXT_ENV, str(tmp_path / "nope.txt"))
    with pytest.raises(TaskConfigError, match=rf"nope.txt not found.*{TEXT_ENV}"):
        make_task("text_lm")
    with pytest.raises(TaskConfigError, match=r"other.txt not found \(option 'path'"):
        make_task("text_lm", path=str(tmp_path / "other.txt"))
    monkeypatch.delenv(TEXT_ENV)
    monkeypatch.setenv("EMPIRICAL_BATCH_DATA", str(tmp_path))
    with pytest.raises(TaskConfigError, match=rf"no text: .*input.txt.*https://.*put it at "
                                              rf"{tmp_path}.*set {TEXT_ENV}"):
        make_task("text_lm")


def test_missing_file_fails_the_command_before_training(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(TEXT_ENV, str(tmp_path / "nope.txt"))
    assert main(["harness", "--config", "tiny", "--tasks", "text_lm", "--out",
                 str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "nope.txt not found" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("opts, match", [
    ({"d_model": 10, "n_heads": 3}, "must be divisible by 'n_heads'"),
    ({"max_chars": -1}, "'max_chars' must be >= 0"),
    ({"sha256": "abc"}, "'sha256' must be '' or 64 hex digits"),
    ({"eval_fraction": 0.0}, "'eval_fraction' must be a number strictly between"),
    ({"context": 0}, "'context' must be a positive integer"),
])
def test_bad_options_are_named(opts, match, small_text):
    with pytest.raises(TaskConfigError, match=match):
        make_task("text_lm", path=str(small_text), **opts)


def test_too_short_text_is_named(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("to be or not to be")
    with pytest.raises(TaskConfigError, match="gives 18 characters: too few"):
        make_task("text_lm", path=str(path), context=8).to("cpu")
    path.write_bytes(b"\xff\xfe not utf-8" * 100)
    with pytest.raises(TaskConfigError, match="is not UTF-8 text"):
        make_task("text_lm", path=str(path), context=8).to("cpu")


def test_presets(text_corpus):
    for name in ("tiny", "cpu", "full"):
        plan = get_config(name, ["text_lm"]).plan("text_lm")
        assert plan.noise.batch_size in plan.sweep.batch_sizes
    full = get_config("full", ["text_lm"]).plan("text_lm")
    # batch sizes from 1 or 2 to at least 4096 sequences, both optimizers
    assert min(full.sweep.batch_sizes) <= 2 and max(full.sweep.batch_sizes) >= 4096
    assert set(full.sweep.optimizers) == {"sgd", "adam"}


def test_tiny_harness_names_the_corpus(tmp_path, small_text, monkeypatch):
    """The tiny preset end to end on a small file: the manifest and the report name the
    file and its sha256, and the B_crit(L) table has a row per optimizer."""
    monkeypatch.setenv(TEXT_ENV, str(small_text))
    out = tmp_path / "o"
    assert main(["harness", "--config", "tiny", "--tasks", "text_lm", "--out", str(out),
                 "--no-progress"]) == 0
    sha = hashlib.sha256(small_text.read_bytes()).hexdigest()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tasks"]["text_lm"]["text_sha256"] == sha
    report = (out / "report.md").read_text()
    assert "B_crit(L) = B*/L^(1/α_B)" in report and f"small.txt ({sha[:12]}…)" in report
    import pandas as pd

    law = pd.read_csv(out / "results" / "b_crit_law.csv")
    assert sorted(law["optimizer"]) == ["adam", "sgd"]
    assert (law["kaplan_alpha_b"] == 0.21).all() and (law["text_sha256"] == sha).all()
