"""load_sweep: column recognition, metadata, derived examples, every validation error."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empirical_batch.sweeps import Sweep, load_sweep


def _frame(**over):
    df = pd.DataFrame({
        "name": ["a", "a", "a", "b", "b", "b"],
        "bs": [8, 8, 8, 32, 32, 32],
        "lr": [0.1, 0.1, 0.1, 0.2, 0.2, 0.2],
        "global_step": [0, 10, 20, 0, 5, 10],
        "val_loss": [3.0, 2.0, 1.0, 3.0, 2.0, 1.5],
        "seed": [0, 0, 0, 1, 1, 1],
    })
    for k, v in over.items():
        df[k] = v
    return df


def test_recognises_common_names_and_derives_examples():
    s = load_sweep(_frame())
    assert isinstance(s, Sweep)
    assert list(s.data.columns[:6]) == ["run", "batch_size", "learning_rate", "step",
                                        "examples", "metric"]
    assert s.metric_name == "val_loss" and s.higher_is_better is False
    np.testing.assert_array_equal(s.data["examples"], s.data["step"] * s.data["batch_size"])
    assert "seed" in s.data.columns  # extras pass through
    assert s.batch_sizes.tolist() == [8.0, 32.0]
    assert s.to_dict()["n_runs"] == 2


def test_column_map_and_wandb_prefix():
    df = _frame().rename(columns={"bs": "config.batch_size", "val_loss": "ce"})
    s = load_sweep(df, metric="ce", metric_name="cross-entropy")
    assert s.metric_name == "cross-entropy"
    assert s.data["batch_size"].tolist()[:1] == [8.0]


def test_examples_column_kept_when_present():
    s = load_sweep(_frame(samples=[0, 1, 2, 0, 1, 2]))
    assert s.data["examples"].tolist() == [0, 1, 2, 0, 1, 2]


def test_accuracy_needs_direction():
    df = _frame().rename(columns={"val_loss": "accuracy"})
    with pytest.raises(ValueError, match="higher_is_better"):
        load_sweep(df, metric="accuracy")
    s = load_sweep(df, metric="accuracy", higher_is_better=True)
    assert s.higher_is_better and s.direction == "higher"


def test_nonfinite_metric_marks_diverged_not_error():
    s = load_sweep(_frame(val_loss=[3.0, np.nan, np.inf, 3.0, 2.0, 1.5]))
    assert s.diverged_runs == ["a"]
    assert s.runs.set_index("run").loc["b", "diverged"] == np.False_


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"drop": "bs"}, r"missing column\(s\) \['batch_size'\]"),
        ({"bs": [8, 8, "x", 32, 32, 32]}, r"line 4, column 'bs': not a number: 'x'"),
        ({"bs": [8, 8, 8, 0, 0, 0]}, r"line 5, column 'bs': batch size must be > 0"),
        ({"bs": [8, 8, 8, -32, -32, -32]}, r"line 5, column 'bs': batch size must be > 0"),
        ({"global_step": [0, 10, 10, 0, 5, 10]},
         r"duplicated \(run, step\) = \('a', 10\) at line 3"),
        ({"bs": [8, 8, 16, 32, 32, 32]}, r"run 'a' has several values of 'batch_size'.*line 4"),
        ({"lr": [0.1, 0.1, 0.1, 0.2, 0.3, 0.2]}, r"run 'b' has several values of 'learning_rate'"),
        ({"global_step": [0, 10, 20, 0, -5, 10]},
         r"line 6, column 'global_step': step must be >= 0"),
        ({"lr": [0.1, 0.1, 0.1, 0.0, 0.0, 0.0]}, r"learning rate must be > 0"),
        ({"val_loss": [1, 2, "nan?", 1, 2, 3]}, r"line 4, column 'val_loss': not a number"),
    ],
)
def test_validation_errors_name_file_line_and_column(tmp_path, change, pattern):
    df = _frame()
    if "drop" in change:
        df = df.drop(columns=change.pop("drop"))
    for k, v in change.items():
        df[k] = v
    path = tmp_path / "sweep.csv"
    df.to_csv(path, index=False)
    with pytest.raises(ValueError, match=pattern) as err:
        load_sweep(path)
    assert "sweep.csv" in str(err.value)


def test_dataframe_errors_name_row():
    with pytest.raises(ValueError, match=r"<DataFrame>, row 3, column 'bs'"):
        load_sweep(_frame(bs=[8, 8, 8, 0, 0, 0]))


def test_bad_sources():
    with pytest.raises(FileNotFoundError):
        load_sweep("/nonexistent/sweep.csv")
    with pytest.raises(TypeError):
        load_sweep(42)
    with pytest.raises(ValueError, match="no rows"):
        load_sweep(_frame().iloc[:0])
    with pytest.raises(ValueError, match="not found"):
        load_sweep(_frame(), metric="nope")
    with pytest.raises(ValueError, match="unknown schema column"):
        load_sweep(_frame(), colour="bs")


def test_ambiguous_columns_refused():
    df = _frame(batch_size=[8, 8, 8, 32, 32, 32], BATCH_SIZE=[8, 8, 8, 32, 32, 32])
    with pytest.raises(ValueError, match="several columns could be 'batch_size'"):
        load_sweep(df)


def test_parquet_roundtrip(tmp_path):
    path = tmp_path / "s.parquet"
    _frame().to_parquet(path)
    a, b = load_sweep(path), load_sweep(_frame())
    pd.testing.assert_frame_equal(a.data, b.data)
    assert a.source.endswith("s.parquet")


def test_reload_sweep_keeps_metadata():
    s = load_sweep(_frame().rename(columns={"val_loss": "acc"}), metric="acc",
                   higher_is_better=True)
    again = load_sweep(s)
    assert again.higher_is_better and again.metric_name == "acc"
    assert "2 runs" in repr(again)


def test_sweep_is_immutable():
    """v0.1: a loader updated sweep.metadata in place, and sweep.data could be edited."""
    import pytest

    from empirical_batch import load_sweep

    df = pd.DataFrame({"run": ["a"] * 3, "batch_size": 8, "learning_rate": 0.1,
                       "step": [1, 2, 3], "metric": [3.0, 2.0, 1.0]})
    s = load_sweep(df)
    s.data.loc[0, "metric"] = 99.0  # edits a copy
    s.data["extra"] = 1
    assert s.data["metric"].tolist() == [3.0, 2.0, 1.0] and "extra" not in s.data
    with pytest.raises(AttributeError, match="immutable"):
        s.metric_name = "loss"
    with pytest.raises(TypeError):
        s.metadata["x"] = 1  # a read-only mapping
    t = s.with_metadata(note="n").with_source("file.csv")
    assert t.metadata["note"] == "n" and t.source == "file.csv" and "note" not in s.metadata
    df.loc[0, "metric"] = -5.0  # the caller's frame is not the sweep's
    assert s.data["metric"].iloc[0] == 3.0
