"""`empirical-batch fit`: tables, figure, and exit status 2 on user errors."""

from __future__ import annotations

import numpy as np
import pytest

from empirical_batch.cli import main
from empirical_batch.tradeoff import Tradeoff
from tests._synth_fit import synthetic_sweep


@pytest.fixture(scope="module")
def sweep_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "sweep.csv"
    synthetic_sweep(Tradeoff(1000, 64000), 2.0 ** np.arange(2, 12), rng=0).to_csv(
        path, index=False)
    return path


def test_single_target_table_and_figure(sweep_csv, tmp_path, capsys):
    out = tmp_path / "fig.png"
    assert main(["fit", str(sweep_csv), "--target", "1.0", "--n-boot", "100",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "B_crit =" in text and "batch_size" in text and out.stat().st_size > 0


def test_several_targets_curve(sweep_csv, tmp_path, capsys):
    out = tmp_path / "curve.png"
    assert main(["fit", str(sweep_csv), "--target", "1.5", "1.0", "0.5", "--n-boot", "50",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "b_crit_low" in text and out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent.csv", "--target", "1"], "not found"),
        (["SWEEP", "--target", "1", "--metric", "nope"], "column 'nope'"),
        (["SWEEP", "--target", "-10"], "no batch size reached"),
        (["SWEEP", "--target", "1", "--column", "bad"], "SCHEMA=SOURCE"),
        (["SWEEP", "--target", "-10", "-20"], "no target was reached"),
    ],
)
def test_user_errors_exit_2(sweep_csv, capsys, args, message):
    args = [str(sweep_csv) if a == "SWEEP" else a for a in args]
    assert main(["fit", *args]) == 2
    assert message in capsys.readouterr().err


def test_accuracy_metric_needs_direction(tmp_path, capsys):
    import pandas as pd

    path = tmp_path / "acc.csv"
    pd.DataFrame({"run": ["a", "a"], "bs": [8, 8], "step": [1, 2],
                  "accuracy": [0.1, 0.2]}).to_csv(path, index=False)
    assert main(["fit", str(path), "--target", "0.5", "--metric", "accuracy"]) == 2
    assert "higher is better" in capsys.readouterr().err
