"""`empirical-batch transfer`, called in-process through main(argv)."""

from __future__ import annotations

import json

import pytest

from empirical_batch.cli import main
from empirical_batch.tradeoff import Tradeoff
from empirical_batch.transfer import transfer

BASE = ["transfer", "--from-batch", "256", "--to-batch", "2048"]


def test_table_old_new_rule_regime(capsys):
    rc = main([*BASE, "--optimizer", "adamw", "--lr", "3e-4", "--beta2", "0.95",
               "--weight-decay", "0.1", "--total-steps", "100000", "--b-noise", "4000"])
    out, err = capsys.readouterr()
    assert rc == 0
    ref = transfer({"lr": 3e-4}, 256, 2048, optimizer="adamw", b_noise=4000)["lr"].new
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert float(lines["lr"][2]) == pytest.approx(ref, rel=1e-5)
    assert lines["lr"][3:] == ["surge", "yes"]
    assert float(lines["beta2"][2]) == pytest.approx(0.95 ** 8, rel=1e-5)
    assert lines["total_steps"][1:] == ["100000", "12500", "constant_examples", "NO"]
    assert "arXiv:2405.14578" in out and "arXiv:2507.07101" in out
    # the regime warning goes to stderr, one line per hyperparameter, no traceback
    assert "warning: total_steps: rule 'constant_examples' outside its regime" in err
    assert "Traceback" not in err


def test_json_round_trips_to_the_library_result(capsys):
    rc = main([*BASE, "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9",
               "--rule", "linear", "--b-noise", "1e6", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    d = json.loads(out)
    assert d.pop("unit") == "examples"  # the CLI adds the unit of the batch sizes
    ref = transfer({"lr": 0.1, "momentum": 0.9}, 256, 2048, optimizer="sgd", rule="linear",
                   b_noise=1e6).to_dict()
    assert d == json.loads(json.dumps(ref))
    assert d["values"][0]["new"] == pytest.approx(0.8)


def test_tradeoff_and_per_hyperparameter_rules(capsys):
    rc = main([*BASE, "--optimizer", "adam", "--lr", "1e-3", "--beta2", "0.999",
               "--total-steps", "50000", "--b-crit", "1000", "--s-min", "5000",
               "--rule", "sqrt", "--set-rule", "beta2=half_life", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0
    rules = {v["name"]: v["rule"] for v in d["values"]}
    assert rules == {"lr": "sqrt", "beta2": "half_life", "total_steps": "tradeoff_steps"}
    t = Tradeoff.from_b_crit(1000, s_min=5000)
    steps = next(v["new"] for v in d["values"] if v["name"] == "total_steps")
    assert steps == pytest.approx(50000 * t.steps(2048) / t.steps(256), abs=1)


@pytest.mark.parametrize("argv,message", [
    ([*BASE, "--optimizer", "adam", "--lr", "1e-3", "--beta2", "1.2"], "beta2 must be in"),
    ([*BASE, "--optimizer", "sgd", "--beta2", "0.9"], "do not apply to optimizer='sgd'"),
    ([*BASE, "--optimizer", "adam"], "give at least one hyperparameter"),
    (["transfer", "--from-batch", "0", "--to-batch", "8", "--optimizer", "adam", "--lr", "1"],
     "from_batch must be > 0"),
    ([*BASE, "--optimizer", "adam", "--lr", "1e-3", "--rule", "surge"], "needs b_noise"),
    ([*BASE, "--optimizer", "adam", "--lr", "1e-3", "--set-rule", "lr=ema"],
     "for the learning rate"),
    ([*BASE, "--optimizer", "adam", "--lr", "1e-3", "--b-crit", "100"], "give exactly two"),
])
def test_user_errors_one_line_exit_2(capsys, argv, message):
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and message in err
    assert err.startswith("empirical-batch transfer: error:")


def test_bad_flag_value_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main([*BASE, "--optimizer", "lion", "--lr", "1e-3"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("extra, word", [
    (["--rule", "linear", "--set-rule", "lr=sqrt"], "two learning-rate rules: --rule linear"),
    (["--set-rule", "lr=linear", "--set-rule", "lr=sqrt"], "two rules for lr"),
])
def test_two_rules_for_one_hyperparameter_are_refused(capsys, extra, word):
    assert main([*BASE, "--optimizer", "sgd", "--lr", "0.1", *extra]) == 2
    err = capsys.readouterr().err
    assert word in err and "Traceback" not in err
    assert main([*BASE, "--optimizer", "sgd", "--lr", "0.1", "--rule", "sqrt",
                 "--set-rule", "lr=sqrt"]) == 0
