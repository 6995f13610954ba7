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

    assert transfer.TRANSFER_RULES is RULES and transfer.TransferRule is Rule
    assert set(policies.LR_RULES) == set(ratio_rules())
    assert set(branched._LR_RULES) == {*ratio_rules(), "constant"}
    sub = build_parser()._subparsers._group_actions[0].choices["transfer"]
    choices = next(a.choices for a in sub._actions if a.dest == "rule")
    assert tuple(choices) == lr_rules()
    # transfer() picks the registry's default rule
    res = transfer.transfer({"lr": 0.1}, 256, 1024, optimizer="adam")
    assert res["lr"].rule == default_lr_rule("adam")
