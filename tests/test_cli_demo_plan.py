"""`empirical-batch demo` and `empirical-batch plan`."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import re

import pytest

from empirical_batch.cli import demo as demo_cli
from empirical_batch.cli import main
from empirical_batch.cli.plan import tradeoff_from_args
from empirical_batch.theory import anisotropic_quadratic


def test_demo_prints_theory_tradeoff_and_plan(capsys, tmp_path):
    out = tmp_path / "fig" / "demo.png"
    rc = main(["demo", "--n", "40", "--max-log2-batch", "6", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    m = anisotropic_quadratic(40, noise=100.0)
    assert f"B_noise = tr(HΣ)/GᵀHG = {m.b_noise:.4g}" in text
    assert f"B_simple = tr(Σ)/|G|² = {m.b_simple:.4g}" in text
    # the table runs over B = 1..2^6 and prints eps_opt(B) as computed by the model
    rows = [line.split() for line in text.splitlines() if re.match(r"^\s*64\s", line)]
    assert any(float(r[1]) == pytest.approx(m.eps_opt(64.0), rel=1e-3) for r in rows)
    assert "γ = E[√𝓑]²/E[𝓑] = 0.9600" in text
    assert "Pareto frontier" in text and "Bend of the frontier" in text
    assert out.is_file() and out.stat().st_size > 10_000


def test_demo_no_figure_and_sections_are_extensible(capsys, tmp_path, monkeypatch):
    calls = []

    def extra(ctx):
        calls.append(ctx.model.b_noise)
        ctx.echo("extra section ran")

    monkeypatch.setattr(demo_cli, "SECTIONS", [*demo_cli.SECTIONS, ("extra", extra)])
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--n", "10", "--max-log2-batch", "3", "--no-figure"]) == 0
    assert "extra section ran" in capsys.readouterr().out
    assert calls and not (tmp_path / "out").exists()


def test_demo_bad_argument(capsys):
    assert main(["demo", "--n", "0", "--no-figure"]) == 2
    assert "--n must be >= 1" in capsys.readouterr().err


def test_plan_prints_frontier_and_writes_figure(capsys, tmp_path):
    out = tmp_path / "plan.png"
    rc = main(["plan", "--s-min", "1e4", "--b-crit", "500", "--step-overhead", "0.002",
               "--allreduce", "0.01", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "B_crit = 500" in text and "Pareto frontier" in text and "bend" in text
    assert out.is_file()


def test_plan_all_rows_and_grids(capsys):
    assert main(["plan", "--e-min", "6400", "--b-crit", "64", "--batch-sizes", "16,64,256",
                 "--devices", "1,4", "--all"]) == 0
    text = capsys.readouterr().out
    assert "S_min = 100 steps, E_min = 6400 examples, B_crit = 64 examples" in text
    assert "6 feasible candidates" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "--s-min", "10"], "give exactly two"),
        (["plan", "--s-min", "10", "--e-min", "100", "--b-crit", "10"], "give exactly two"),
        (["plan", "--s-min", "-1", "--e-min", "100"], "--s-min must be > 0"),
        (["plan", "--s-min", "10", "--e-min", "100", "--throughput", "0"], "throughput"),
    ],
)
def test_plan_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_tradeoff_from_args_all_pairs():
    a = tradeoff_from_args(s_min=10, e_min=640)
    b = tradeoff_from_args(s_min=10, b_crit=64)
    c = tradeoff_from_args(e_min=640, b_crit=64)
    assert a == b == c
