"""Damaged and degenerate input to the loaders is refused with an error that names the
file, the row or the column — never half-read (trust issue, "Loaders")."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch import load_sweep
from empirical_batch.sweeps import Sweep

HEADER = "run,batch_size,learning_rate,step,metric\n"
GOOD = HEADER + "".join(f"r{b},{b},0.1,{s},{1.0 / (s + 1):.6f}\n"
                        for b in (8, 16) for s in range(5))


def _write(tmp_path, text, name="sweep.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, words", [
    ("", ["empty"]),
    (HEADER, ["no rows"]),  # a header and no rows
    (GOOD.replace("r8,8,0.1,0,", ",8,0.1,0,"), ["run id", "line 2"]),
    (GOOD.replace("r8,8,0.1,3,", " ,8,0.1,3,"), ["run id", "line 5"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,eight,0.1,1,"), ["batch_size", "not a number"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,-8,0.1,1,"), ["batch size", "> 0"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,0,0.1,1,"), ["batch size", "> 0"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,inf,0.1,1,"), ["batch_size", "finite"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,8,-0.1,1,"), ["learning rate", "> 0"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,8,0.1,-1,"), ["step", ">= 0"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,8,0.1,x,"), ["step", "not a number"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,8,0.1,0,"), ["duplicated (run, step)"]),
    (GOOD.replace("r8,8,0.1,2,", "r8,9,0.1,2,"), ["several values", "batch_size"]),
    (GOOD.replace("r8,8,0.1,2,", "r8,8,0.2,2,"), ["several values", "learning_rate"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,True,0.1,1,"), ["batch_size"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,1+2j,0.1,1,"), ["batch_size", "not a number"]),
    (GOOD.replace("r8,8,0.1,1,", "r8,8,0.1,1,0.5,extra\n"), ["malformed"]),
    (GOOD.rstrip("\n")[:-2], ["newline", "truncated"]),  # cut mid-number
    (GOOD.replace("metric", "mtrc"), ["metric"]),
    (GOOD.replace("batch_size", "bsize"), ["batch_size"]),
])
def test_damaged_csv_is_refused(tmp_path, text, words):
    path = _write(tmp_path, text)
    with pytest.raises((ValueError, KeyError)) as err:
        load_sweep(path)
    msg = str(err.value)
    for w in words:
        assert w.lower() in msg.lower(), (w, msg)


def test_truncated_gzip_is_refused_naming_the_file(tmp_path):
    p = tmp_path / "sweep.csv.gz"
    p.write_bytes(gzip.compress(GOOD.encode())[:-30])
    with pytest.raises(ValueError, match=r"sweep\.csv\.gz.*(cut short|truncated)"):
        load_sweep(p)


def test_bad_encoding_keeps_the_file_name(tmp_path):
    p = tmp_path / "latin.csv"
    p.write_bytes(GOOD.replace("r8", "r\xe98").encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.csv.*UTF-8"):
        load_sweep(p)


def test_a_directory_and_a_missing_file(tmp_path):
    with pytest.raises(IsADirectoryError, match="directory"):
        load_sweep(tmp_path)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_sweep(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="unknown sweep file type"):
        load_sweep(_write(tmp_path, GOOD, "sweep.xlsx"))


def _frame(**change):
    df = pd.DataFrame({"run": ["a"] * 3 + ["b"] * 3, "batch_size": [8] * 3 + [16] * 3,
                       "learning_rate": 0.1, "step": [0, 1, 2] * 2,
                       "metric": [3.0, 2.0, 1.0] * 2})
    for k, v in change.items():
        df[k] = v
    return df


@pytest.mark.parametrize("change, words", [
    (dict(batch_size=[True, True, True, False, False, False]), ["bool"]),
    (dict(batch_size=np.array([8, 8, 8, 16, 16, 16], dtype=complex)), ["complex"]),
    (dict(step=pd.to_datetime(["2024-01-01"] * 6)), ["datetime"]),
    (dict(step=pd.to_timedelta([0, 1, 2, 0, 1, 2], unit="s")), ["timedelta"]),
    (dict(metric=[1.0, True, 0.5, 1.0, 0.5, 0.2]), ["not a number", "bool"]),
    (dict(metric=[1.0, pd.Timestamp("2024-01-01"), 0.5, 1.0, 0.5, 0.2]), ["not a number"]),
    (dict(run=[None, "a", "a", "b", "b", "b"]), ["run id"]),
    (dict(run=["", "a", "a", "b", "b", "b"]), ["run id"]),
    (dict(batch_size=[8, 8, 8, 16, 16, np.nan]), ["batch_size"]),
    (dict(learning_rate=["0.1", "0.1", "0.1", "x", "x", "x"]), ["learning_rate"]),
])
def test_damaged_frames_are_refused(change, words):
    with pytest.raises(ValueError) as err:
        load_sweep(_frame(**change))
    for w in words:
        assert w.lower() in str(err.value).lower(), (w, str(err.value))


def test_huge_integers_never_become_negative_batch_sizes(tmp_path):
    big = 2**63 + 5  # overflows int64
    path = _write(tmp_path, GOOD.replace("r8,8,0.1,", f"r8,{big},0.1,"))
    s = load_sweep(path)
    assert (s.data["batch_size"] > 0).all()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 4, 8, 16, 32]), st.floats(1e-4, 1.0),
                          st.integers(2, 6)), min_size=1, max_size=5, unique_by=lambda t: t[0]))
def test_any_valid_sweep_round_trips_through_csv(tmp_path_factory, runs):
    rows = [(f"r{b}", b, lr, s, 1.0 / (s + 1)) for b, lr, n in runs for s in range(n)]
    df = pd.DataFrame(rows, columns=["run", "batch_size", "learning_rate", "step", "metric"])
    path = tmp_path_factory.mktemp("rt") / "s.csv"
    load_sweep(df).data.to_csv(path, index=False)
    a, b = load_sweep(df).data, load_sweep(path).data
    pd.testing.assert_frame_equal(a[b.columns], b, check_dtype=False)


def test_tensorboard_run_names_match_exactly(tmp_path):
    """v0.1: run 'run1' picked up the hparams of 'run10' (a prefix match)."""
    tb = pytest.importorskip("torch.utils.tensorboard")
    from empirical_batch.loaders import load_tensorboard

    for name, bs in (("run1", 8), ("run10", 64)):
        w = tb.SummaryWriter(str(tmp_path / name))
        for s in range(0, 30, 10):
            w.add_scalar("loss", 1.0 / (s + 1), s)
        w.add_hparams({"batch_size": bs, "learning_rate": 0.1}, {"hp/x": 0.0})
        w.close()
    s = load_tensorboard(tmp_path, "loss")
    got = s.data.groupby("run")["batch_size"].first().to_dict()
    assert got == {"run1": 8.0, "run10": 64.0}


def test_loaders_return_immutable_sweeps(published):
    from empirical_batch.loaders import load_mlperf_curves

    published("mlperf_training_results_curves/evals.csv")
    s = load_mlperf_curves(published("mlperf_training_results_curves/runs.csv").parent,
                           "bert", rounds=["v4.0"])
    assert isinstance(s, Sweep) and "excluded_runs" in s.metadata
    with pytest.raises(TypeError):
        s.metadata["excluded_runs"] = []


# --------------------------------------------------------------------- MLPerf RCP / MLLOG
def _rcp(tmp_path, obj, raw=None):
    import json

    d = tmp_path / "v4.0"
    d.mkdir(exist_ok=True)
    p = d / "rcps_bert.json"
    p.write_text(raw if raw is not None else json.dumps(obj))
    return p


GOOD_ENTRY = {"Benchmark": "bert", "BS": 256, "Hyperparams": {"opt_base_learning_rate": 1e-3},
              "Epochs to converge": [1.0, 1.1, 1.2]}


@pytest.mark.parametrize("obj, raw, words", [
    ([GOOD_ENTRY], None, ["top level", "list"]),
    ({"a": {**GOOD_ENTRY, "BS": 0}}, None, ["'a'", "BS", "> 0"]),
    ({"a": {**GOOD_ENTRY, "BS": "many"}}, None, ["'a'", "BS", "number"]),
    ({"a": {**GOOD_ENTRY, "BS": True}}, None, ["BS", "number"]),
    ({"a": {**GOOD_ENTRY, "Epochs to converge": []}}, None, ["non-empty list"]),
    ({"a": {**GOOD_ENTRY, "Epochs to converge": [1.0, -2.0]}}, None, ["[1]", "> 0"]),
    ({"a": {**GOOD_ENTRY, "Epochs to converge": [1.0, None]}}, None, ["[1]", "number"]),
    ({"a": {**GOOD_ENTRY, "Epochs to converge": 3.0}}, None, ["non-empty list"]),
    ({"a": {k: v for k, v in GOOD_ENTRY.items() if k != "BS"}}, None, ["lacks 'BS'"]),
    ({"a": {k: v for k, v in GOOD_ENTRY.items() if k != "Benchmark"}}, None, ["Benchmark"]),
    ({"a": {**GOOD_ENTRY, "Hyperparams": [1]}}, None, ["Hyperparams"]),
    ({"a": 7}, None, ["'a'", "object"]),
    (None, "{not json", ["not valid JSON"]),
    (None, "[" * 100_000 + "]" * 100_000, ["not valid JSON"]),
])
def test_damaged_rcp_json_is_refused(tmp_path, obj, raw, words):
    from empirical_batch.loaders import load_mlperf_rcp

    path = _rcp(tmp_path, obj, raw)
    with pytest.raises(ValueError) as err:
        load_mlperf_rcp(path)
    msg = str(err.value)
    assert "rcps_bert.json" in msg
    for w in words:
        assert w in msg, (w, msg)


def test_a_good_rcp_entry_loads(tmp_path):
    from empirical_batch.loaders import load_mlperf_rcp

    frame = load_mlperf_rcp(_rcp(tmp_path, {"a": GOOD_ENTRY})).frame
    assert len(frame) == 3 and (frame["batch_size"] == 256).all()


def _mllog_file(path, bs, evals):
    lines = [':::MLLOG {"key": "submission_benchmark", "value": "bert", "metadata": {}}',
             f':::MLLOG {{"key": "global_batch_size", "value": {bs}, "metadata": {{}}}}',
             ':::MLLOG {"key": "opt_base_learning_rate", "value": 0.001, "metadata": {}}']
    lines += [f':::MLLOG {{"key": "eval_accuracy", "value": {a}, '
              f'"metadata": {{"epoch_num": {e}}}}}' for e, a in evals]
    path.write_text("\n".join(lines) + "\n")


def test_mllog_excludes_runs_whose_progress_goes_backwards(tmp_path):
    """v0.1 loaded them (load_mlperf_curves already excluded such runs)."""
    from empirical_batch.loaders import load_mllog

    _mllog_file(tmp_path / "result_0.txt", 256, [(1, 0.5), (2, 0.7), (3, 0.72)])
    _mllog_file(tmp_path / "result_1.txt", 512, [(1, 0.5), (2, 0.7), (1, 0.71)])
    with pytest.warns(UserWarning, match="backwards"):
        s = load_mllog(tmp_path)
    assert s.data["batch_size"].unique().tolist() == [256.0]
    assert any("result_1" in k for k in s.metadata["excluded_runs"])


@pytest.mark.parametrize("bs, word", [("0", "> 0"), ('"lots"', "not a number")])
def test_mllog_bad_batch_size(tmp_path, bs, word):
    from empirical_batch.loaders import load_mllog

    _mllog_file(tmp_path / "result_0.txt", bs, [(1, 0.5), (2, 0.7)])
    with pytest.raises(ValueError, match=word):
        load_mllog(tmp_path)


def test_truncated_tensorboard_event_file_is_refused(tmp_path):
    """v0.1 (through tbparse) dropped the cut tail without a word."""
    tb = pytest.importorskip("torch.utils.tensorboard")
    from empirical_batch.loaders import load_tensorboard

    for name in ("a", "b"):
        w = tb.SummaryWriter(str(tmp_path / name))
        for s in range(0, 100, 10):
            w.add_scalar("loss", 1.0 / (s + 1), s)
        w.add_scalar("batch_size", 8, 0)
        w.close()
    assert len(load_tensorboard(tmp_path, "loss").data) == 20
    (f,) = (tmp_path / "b").glob("events*")
    f.write_bytes(f.read_bytes()[:-37])
    with pytest.raises(ValueError, match="truncated or corrupt event file"):
        load_tensorboard(tmp_path, "loss")


@pytest.mark.parametrize("which, drop, word", [
    ("runs.csv", "division", "division"),
    ("runs.csv", "global_batch_size", "global_batch_size"),
    ("evals.csv", "samples_count", "samples_count"),
])
def test_curve_tables_missing_a_column(tmp_path, published, which, drop, word):
    """v0.1: KeyError deep inside pandas; now the file and the key are named."""
    from empirical_batch.loaders import load_mlperf_curves

    published("mlperf_training_results_curves/evals.csv")
    src = published("mlperf_training_results_curves/runs.csv").parent
    for name in ("runs.csv", "evals.csv"):
        frame = pd.read_csv(src / name, nrows=2000)
        if name == which:
            frame = frame.drop(columns=[drop])
        frame.to_csv(tmp_path / name, index=False)
    with pytest.raises(ValueError, match=rf"{which}: missing column.*{word}"):
        load_mlperf_curves(tmp_path, "bert")
