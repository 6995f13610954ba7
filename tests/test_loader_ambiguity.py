"""Loaders say which column they use or ask; a directory where a file is expected, and
MLLOG records that are not objects, are refused with a clear error."""

from __future__ import annotations

import pandas as pd
import pytest

from empirical_batch.errors import InputError
from empirical_batch.loaders import load_mllog
from empirical_batch.sweeps import load_sweep


def _frame(**extra):
    base = {"run": ["a", "a", "b", "b"], "batch_size": [8, 8, 16, 16],
            "step": [0, 10, 0, 10], "loss": [2.0, 1.0, 2.0, 0.8]}
    return pd.DataFrame(base | extra)


def test_loss_and_val_loss_ask_which_one():
    df = _frame(val_loss=[2.1, 1.2, 2.1, 0.9])
    with pytest.raises(InputError, match=r"several columns could be the metric.*metric="):
        load_sweep(df)
    s = load_sweep(df, metric="val_loss")
    assert s.metric_name == "val_loss" and s.data["metric"].tolist() == [2.1, 1.2, 2.1, 0.9]
    assert load_sweep(df, metric="loss").data["metric"].tolist() == [2.0, 1.0, 2.0, 0.8]


def test_batch_size_and_bs_must_agree():
    with pytest.raises(InputError, match=r"'batch_size' and 'bs'.*differ"):
        load_sweep(_frame(bs=[8, 8, 32, 32]))
    assert load_sweep(_frame(bs=[8, 8, 16, 16])).batch_sizes.tolist() == [8, 16]
    assert load_sweep(_frame(bs=[8, 8, 32, 32]), batch_size="bs").batch_sizes.tolist() == [
        8, 32]


def test_a_directory_where_a_file_is_expected(tmp_path):
    (tmp_path / "result_0.txt").mkdir()
    with pytest.raises(IsADirectoryError, match="is a directory, not a MLLOG file"):
        load_mllog([tmp_path / "result_0.txt"], benchmark="bert")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        load_sweep(tmp_path)


@pytest.mark.parametrize("record", ['[1, 2]', '"text"', '{"key": "x", "metadata": [1]}'])
def test_mllog_records_that_are_not_objects(tmp_path, record):
    f = tmp_path / "result_0.txt"
    f.write_text(f':::MLLOG {{"key": "global_batch_size", "value": 8}}\n:::MLLOG {record}\n')
    with pytest.raises(InputError, match="line 2"):
        load_mllog(f, benchmark="bert", higher_is_better=True)
