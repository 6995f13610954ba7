"""The rule registry: every learning-rate and hyperparameter rule is one object, and the
transfer, the schedules, branched training and the command line read it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from empirical_batch.errors import InputError, NotFoundError
from empirical_batch.rules import (
    HPARAMS,
    RULES,
    Rule,
    default_lr_rule,
    lr_rules,
    ratio_rules,
    rule,
)


def test_every_rule_has_a_formula_a_citation_and_a_regime():
    assert {"linear", "sqrt", "sgd_optimal", "surge", "half_life", "ema", "timescale",
            "tradeoff_steps", "constant_examples", "unchanged"} == set(RULES)
    for name, r in RULES.items():
        assert isinstance(r, Rule) and r.name == name
        assert r.formula and r.citation and r.regime
        assert set(r.applies_to) <= set(HPARAMS)
        if name != "unchanged":
            assert "arXiv:" in r.citation
        assert "lr_factor" not in r.to_dict()


@given(st.floats(1 / 64, 64))
def test_ratio_factors_are_the_published_ones(kappa):
    assert RULES["linear"].factor(kappa) == pytest.approx(kappa)
    assert RULES["sqrt"].factor(kappa) == pytest.approx(math.sqrt(kappa))
    assert RULES["unchanged"].factor(kappa) == 1.0
    k = np.array([kappa, 2 * kappa])
    np.testing.assert_allclose(RULES["sqrt"].factor(k), np.sqrt(k))


def test_rules_that_need_the_noise_scale_have_no_ratio_factor():
    assert ratio_rules() == ("linear", "sqrt")
    assert lr_rules() == ("linear", "sgd_optimal", "sqrt", "surge")
    with pytest.raises(InputError, match="sgd_optimal"):
        RULES["sgd_optimal"].factor(2.0)
    with pytest.raises(NotFoundError, match="known"):
        rule("cubic")


def test_defaults_per_optimizer():
    assert default_lr_rule("sgd") == "linear" and default_lr_rule("adam") == "sqrt"
    assert default_lr_rule("sgd", b_noise_known=True) == "sgd_optimal"
    assert default_lr_rule("adamw", b_noise_known=True) == "surge"


def test_the_users_of_the_registry_read_it():
    from empirical_batch import branched, transfer
    from empirical_batch.cli import build_parser
    from empirical_batch.schedule import policies

    assert transfer.RULES is RULES  # its v0.2 names TRANSFER_RULES and TransferRule: removed
    assert not hasattr(transfer, "TRANSFER_RULES") and not hasattr(transfer, "TransferRule")
    assert set(policies.LR_RULES) == set(ratio_rules())
    assert set(branched._LR_RULES) == {*ratio_rules(), "constant"}
    sub = build_parser()._subparsers._group_actions[0].choices["transfer"]
    choices = next(a.choices for a in sub._actions if a.dest == "rule")
    assert tuple(choices) == lr_rules()
    # transfer() picks the registry's default rule
    res = transfer.transfer({"lr": 0.1}, 256, 1024, optimizer="adam")
    assert res["lr"].rule == default_lr_rule("adam")


def test_every_rule_moves_values_and_names_what_it_needs():
    from empirical_batch.rules import NEEDS, Move

    m = Move(256, 1024, "sgd", b_noise=1e4)
    for r in RULES.values():
        assert r.move is not None and set(r.needs) <= set(NEEDS)
        assert "move" not in r.to_dict()
    assert RULES["linear"].apply("lr", 0.1, m)[0] == pytest.approx(0.4)
    assert RULES["ema"].apply("ema_decay", 0.99, m)[0] == pytest.approx(0.99 ** 4)
    with pytest.raises(InputError, match="does not apply to beta2"):
        RULES["linear"].apply("beta2", 0.9, m)
    with pytest.raises(InputError, match="needs b_noise"):
        RULES["surge"].apply("lr", 0.1, Move(256, 1024, "adam"))
    with pytest.raises(InputError, match="needs tradeoff"):
        RULES["tradeoff_steps"].apply("total_steps", 100, m)


@given(st.sampled_from((*lr_rules(), "unchanged")), st.booleans())
def test_default_rules_follow_the_lr_rule(lr_rule, tradeoff_known):
    from empirical_batch.rules import default_rules

    d = default_rules(lr_rule, tradeoff_known=tradeoff_known)
    assert set(d) == set(HPARAMS) and d["lr"] == lr_rule
    for k, r in d.items():
        assert k in RULES[r].applies_to
    assert d["beta2"] == ("sqrt" if lr_rule == "sqrt" else "half_life")
    assert d["total_steps"] == ("tradeoff_steps" if tradeoff_known else "constant_examples")


def test_transfer_applies_whatever_rule_the_registry_holds(monkeypatch):
    """transfer() has no rule of its own: a rule swapped in the registry is the one applied."""
    import dataclasses
    from types import MappingProxyType

    from empirical_batch import transfer as tr

    seven = dataclasses.replace(RULES["linear"],
                                move=lambda m, name, x: (7 * x, True, "times seven"))
    monkeypatch.setattr(tr, "RULES", MappingProxyType({**RULES, "linear": seven}))
    res = tr.transfer({"lr": 0.1, "momentum": 0.9}, 256, 1024, optimizer="sgd", rule="linear")
    assert res["lr"].new == pytest.approx(0.7) and res["lr"].note == "times seven"
    assert res["momentum"].new == 0.9
