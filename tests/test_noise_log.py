"""The noise-log schema: written by NoiseScaleLog (CSV, JSON Lines), read back
unchanged, and read by NoiseTrajectory.from_log without dropping rows silently."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from empirical_batch.errors import DataError, InputError
from empirical_batch.estimators import GNSEstimator
from empirical_batch.noise_log import BSimpleForBNoise, load_noise_log
from empirical_batch.schedule import NoiseTrajectory


def _written(tmp_path, suffix, unit="examples"):
    pytest.importorskip("torch")
    from empirical_batch.measure import NoiseScaleLog

    rng = np.random.default_rng(1)
    est, log = GNSEstimator(beta=0.8), NoiseScaleLog(level=0.9, unit=unit)
    for step in range(1, 21):
        est.update(12.0 + rng.normal(), 4, 4.5 + 0.2 * rng.normal(), 16)
        log.record(step, est, loss=1.0 / step, examples=16 * step, tokens=16 * 64 * step)
    path = tmp_path / f"gns{suffix}"
    (log.to_jsonl if suffix == ".jsonl" else log.to_csv)(path)
    return log, path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_round_trip(tmp_path, suffix):
    log, path = _written(tmp_path, suffix)
    back = load_noise_log(path)
    want = log.to_frame()
    assert list(back.columns) == list(want.columns)
    for c in ("step", "examples", "tokens", "b_simple", "b_simple_low", "b_simple_high"):
        np.testing.assert_allclose(back[c].to_numpy(float), want[c].to_numpy(float))
    assert set(back["unit"]) == {"examples"}
    traj = NoiseTrajectory.from_log(path, 16, quantity="b_simple")
    assert traj.progress.size == 20 and traj.unit == "examples"


def test_a_log_in_tokens_counts_progress_in_tokens(tmp_path):
    _, path = _written(tmp_path, ".csv", unit="tokens")
    traj = NoiseTrajectory.from_log(path, 16 * 64, quantity="b_simple")
    frame = load_noise_log(path)
    b = frame["b_simple"].to_numpy()
    rate = 1 / (16 * 64 + b)
    e = frame["tokens"].to_numpy()
    assert traj.unit == "tokens"
    assert traj.progress[1] - traj.progress[0] == pytest.approx(
        0.5 * (rate[0] + rate[1]) * (e[1] - e[0]))


def test_unresolved_rows_are_refused_or_dropped_with_a_count():
    log = pd.DataFrame({"step": [1, 2, 3, 4, 5], "b_simple": [-3.0, 50.0, np.nan, 80, 90]})
    with pytest.raises(DataError, match="2 of 5 rows"):
        NoiseTrajectory.from_log(log, 8, quantity="b_simple")
    with pytest.warns(UserWarning, match="2 of 5 rows"):
        t = NoiseTrajectory.from_log(log, 8, quantity="b_simple", unresolved="drop")
    assert t.n_dropped == 2 and t.b_noise.tolist() == [50.0, 80.0, 90.0]
    assert "2 log rows dropped" in repr(t)


def test_nan_bounds_are_refused():
    log = pd.DataFrame({"step": [1, 2, 3], "b_simple": [40.0, 50.0, 60.0],
                        "b_simple_low": [np.nan, 30.0, 45.0]})
    with pytest.raises(DataError, match=r"1 of 3 rows.*b_simple_low"):
        NoiseTrajectory.from_log(log, 8, quantity="b_simple", level_column="b_simple_low")


def test_the_quantity_is_named():
    log = pd.DataFrame({"step": [1, 2], "b_simple": [10.0, 20.0]})
    with pytest.warns(BSimpleForBNoise, match="B_simple"):
        t = NoiseTrajectory.from_log(log, 8)
    assert t.quantity == "b_simple"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NoiseTrajectory.from_log(log, 8, quantity="b_simple")
        both = log.assign(b_noise=[30.0, 40.0])
        t = NoiseTrajectory.from_log(both, 8)
    assert t.quantity == "b_noise" and t.b_noise.tolist() == [30.0, 40.0]


def test_a_log_without_examples_counts_steps_times_the_batch():
    log = pd.DataFrame({"step": [0, 10, 20], "b_simple": [4.0, 4.0, 4.0]})
    t = NoiseTrajectory.from_log(log, 8, quantity="b_simple")
    assert t.total == pytest.approx(20 * 8 / (8 + 4))


@pytest.mark.parametrize("frame, word", [
    (pd.DataFrame({"step": [1], "b_simple": [1.0], "b_simple_lo": [0.5]}), "b_simple_low"),
    (pd.DataFrame({"step": [1, 1], "b_simple": [1.0, 2.0]}), "more than once"),
    (pd.DataFrame({"step": [1, 2], "loss": [1.0, 2.0]}), "b_simple"),
    (pd.DataFrame({"step": [1, 2], "b_simple": [1.0, 2.0], "unit": ["tokens", "examples"]}),
     "several units"),
    (pd.DataFrame({"step": [1, 2], "b_simple": ["1", "x"]}), "not a number"),
    (pd.DataFrame({"step": [1, 2], "b_simple": [1.0, 2.0], "examples": [10, 5]}),
     "not decrease"),
])
def test_bad_logs(frame, word):
    with pytest.raises(DataError, match=word):
        load_noise_log(frame)


def test_trajectory_converts_units():
    t = NoiseTrajectory(np.array([0.0, 1.0]), np.array([2.0, 4.0]), unit="sequences")
    tok = t.to_unit("tokens", tokens_per_example=100)
    assert tok.b_noise.tolist() == [200.0, 400.0] and tok.unit == "tokens"
    np.testing.assert_array_equal(tok.progress, t.progress)
    with pytest.raises(ValueError, match="tokens_per_example"):
        t.to_unit("tokens")


def test_the_harness_noise_table_is_a_noise_log_per_run():
    """The harness writes one table for all its reference runs: each run, selected with
    where=, is a noise log (with B_noise, read without a warning)."""
    from pathlib import Path

    path = Path(__file__).parents[1] / "data" / "harness" / "results" / \
        "noise_along_reference.csv"
    with pytest.raises(DataError, match=r"several runs.*task, optimizer"):
        load_noise_log(path)
    where = "task == 'teacher_student' and optimizer == 'sgd'"
    frame = load_noise_log(path, where=where)
    assert frame["step"].is_monotonic_increasing and set(frame["unit"]) == {"examples"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = NoiseTrajectory.from_log(path, float(frame["batch_size"].iat[0]), where=where)
    assert t.quantity == "b_noise" and t.progress.size == len(frame)


def test_the_callbacks_log_keys_read_as_a_noise_log(tmp_path):
    """A trainer's log history (trainer_state.json) or a shared metrics CSV with the
    callbacks' prefixed keys: the noise-scale rows are the log, in sequences (the log
    has per-token values: its batches were sequences)."""
    import json

    p = "noise_scale/"
    history = [
        {"step": 10, "loss": 2.0, f"{p}b_simple": 40.0, f"{p}b_simple_low": 30.0,
         f"{p}examples": 320.0, f"{p}b_simple_tokens": 40.0 * 128},
        {"step": 10, "eval_loss": 2.1, f"{p}b_simple": 40.0, f"{p}b_simple_low": 30.0,
         f"{p}examples": 320.0, f"{p}b_simple_tokens": 40.0 * 128},  # same step, again
        {"step": 15, "eval_loss": 2.05},  # another metric's row
        {"step": 20, "loss": 1.5, f"{p}b_simple": 60.0, f"{p}b_simple_low": 45.0,
         f"{p}examples": 640.0, f"{p}b_simple_tokens": 60.0 * 128},
    ]
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"global_step": 20, "log_history": history}))
    csv = tmp_path / "metrics.csv"
    pd.DataFrame(history).to_csv(csv, index=False)
    for source in (history, state, csv):
        f = load_noise_log(source)
        assert f["step"].tolist() == [10, 20] and f["b_simple"].tolist() == [40.0, 60.0]
        assert f["examples"].tolist() == [320.0, 640.0] and set(f["unit"]) == {"sequences"}
        t = NoiseTrajectory.from_log(source, 32, quantity="b_simple",
                                     level_column="b_simple_low")
        assert t.lower.tolist() == [30.0, 45.0]
    history[1][f"{p}b_simple"] = 41.0
    with pytest.raises(DataError, match="more than once"):
        load_noise_log(history)


def test_the_callbacks_per_token_column_is_in_tokens():
    p = "noise_scale/"
    history = [{"step": s, f"{p}b_simple": 10.0 * s, f"{p}b_simple_tokens": 640.0 * s,
                f"{p}examples": 8.0 * s, f"{p}tokens": 512.0 * s} for s in (1, 2, 3)]
    seq = NoiseTrajectory.from_log(history, 8, quantity="b_simple")
    # batch_size in the log's unit (8 sequences): 512 tokens with the log's 64 a sequence
    tok = NoiseTrajectory.from_log(history, 8, column="b_simple_tokens")
    assert seq.unit == "sequences" and tok.unit == "tokens"
    np.testing.assert_allclose(tok.b_noise, 64 * seq.b_noise)
    np.testing.assert_allclose(tok.progress, seq.progress)  # same run, counted in tokens


def test_a_unit_blank_on_some_rows_is_refused_not_relabelled():
    import math

    frame = pd.DataFrame({"step": [1, 2, 3, 4], "b_simple": [5.0, 6.0, 7.0, 8.0],
                          "unit": ["sequences", math.nan, "sequences", " "]})
    with pytest.raises(DataError, match=r"row 1, column 'unit': blank"):
        load_noise_log(frame)
    assert set(load_noise_log(frame.assign(unit=math.nan))["unit"]) == {"examples"}


def test_a_callback_log_with_token_values_counts_sequences():
    frame = pd.DataFrame({"step": [1, 2], "loss": [1.0, 0.9],
                          "noise_scale/b_simple": [5.0, 6.0],
                          "noise_scale/b_simple_tokens": [500.0, 600.0]})
    assert set(load_noise_log(frame)["unit"]) == {"sequences"}
    plain = frame.drop(columns="noise_scale/b_simple_tokens")
    assert set(load_noise_log(plain)["unit"]) == {"examples"}


@pytest.mark.parametrize("col, value, word", [("b_simple_low", 7.0, "above"),
                                              ("b_simple_high", 5.0, "below")])
def test_an_interval_end_on_the_wrong_side_of_its_estimate_is_refused(col, value, word):
    frame = pd.DataFrame({"step": [1, 2], "b_simple": [5.0, 6.0], col: [4.0 if word ==
                          "above" else 6.0, value]})
    with pytest.raises(DataError, match=rf"row 1, column '{col}': 7?5?\.0 is {word} the "
                       "estimate"):
        load_noise_log(frame)
    # NaN ends (nothing measured yet) and ends equal to the estimate are fine
    ok = frame.assign(**{col: [np.nan, 6.0]})
    assert len(load_noise_log(ok)) == 2


def test_a_batch_size_the_log_contradicts_is_refused():
    frame = pd.DataFrame({"step": [1, 2, 3], "examples": [64.0, 128.0, 192.0],
                          "b_simple": [100.0, 120.0, 140.0]})
    with pytest.raises(InputError, match=r"batch_size=512 examples, but the log's "
                       r"'examples' grow by 64 a step"):
        NoiseTrajectory.from_log(frame, 512, quantity="b_simple")
    assert NoiseTrajectory.from_log(frame, 64, quantity="b_simple").unit == "examples"
    # a batch that grew along the run leaves nothing to compare with
    grown = frame.assign(examples=[64.0, 128.0, 256.0])
    NoiseTrajectory.from_log(grown, 64, quantity="b_simple")


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_json_lines_log_is_named_empty(tmp_path, text):
    path = tmp_path / "noise.jsonl"
    path.write_text(text)
    with pytest.raises(DataError, match=r"noise.jsonl: the noise log is empty"):
        load_noise_log(path)
