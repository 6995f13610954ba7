"""`empirical-batch simulate` end to end."""

from __future__ import annotations

import pandas as pd
import pytest

from empirical_batch.cli import main


def test_cli_exact_writes_sweep(tmp_path, capsys):
    out = tmp_path / "sweep.csv"
    rc = main(["simulate", "--dims", "50", "--batch-sizes", "pow2:0:4", "--lrs",
               "geom:0.01:1.5:8", "--steps", "2000", "--n-points", "10", "--out", str(out)])
    assert rc == 0
    df = pd.read_csv(out)
    assert {"run", "batch_size", "learning_rate", "step", "examples", "metric"} <= set(df)
    assert df["run"].nunique() == 5 * 8
    text = capsys.readouterr().out
    assert "exact steps to target" in text and "B_noise" in text


def test_cli_monte_carlo(capsys):
    pytest.importorskip("torch")
    rc = main(["simulate", "--dims", "20", "--batch-sizes", "1,8", "--lrs", "0.1,0.5",
               "--steps", "200", "--n-points", "8", "--method", "monte_carlo", "--n-seeds", "2",
               "--quiet"])
    assert rc == 0
    assert "Monte Carlo" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--dims", "0"],
        ["simulate", "--lrs", "abc"],
        ["simulate", "--noise", "-1"],
        ["simulate", "--target-fraction", "2"],
        ["simulate", "--lrs", "0,-1"],
    ],
)
def test_cli_bad_input_exits_2(argv, capsys):
    assert main(argv) == 2
    assert "error" in capsys.readouterr().err


def test_plot_steps_examples():
    import matplotlib

    matplotlib.use("Agg")
    from empirical_batch.plot.simulate import plot_steps_examples
    from empirical_batch.simulate import NoisyQuadratic

    nq = NoisyQuadratic.zhang(20)
    best = nq.best_lr(0.2 * nq.initial_loss(), [1, 4, 16], [0.05, 0.5, 1.5])
    ax = plot_steps_examples(best)
    assert len(ax.lines) == 4
    with pytest.raises(ValueError, match="reaches"):
        plot_steps_examples(nq.best_lr(1e-12, [1], [0.1]))


def test_simulate_json_and_monte_carlo_uses_the_library_steps(capsys):
    import json

    from empirical_batch.cli import main

    assert main(["simulate", "--json", "--quiet", "--dims", "50", "--steps", "2000"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "exact" and out["steps_to_target"][0]["steps"] > 0
    assert main(["simulate", "--json", "--quiet", "--dims", "50", "--steps", "2000",
                 "--method", "monte_carlo", "--n-seeds", "2", "--batch-sizes", "4,16,64"]) == 0
    mc = json.loads(capsys.readouterr().out)
    assert [r["batch_size"] for r in mc["steps_to_target"]] == [4.0, 16.0, 64.0]
