"""Units of batch sizes and critical batches: conversion, mixing refused, fits carry
their unit (a sweep in tokens gives B_crit in tokens)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from empirical_batch.fit import critical_batch_curve, fit_tradeoff, steps_to_target
from empirical_batch.sweeps import load_sweep
from empirical_batch.tradeoff import Tradeoff
from empirical_batch.units import UNITS, UnitMismatch, check_unit, convert, same_unit


@given(st.floats(1e-3, 1e9), st.floats(1, 1e5))
def test_tokens_round_trip(value, t):
    tokens = convert(value, "sequences", "tokens", tokens_per_example=t)
    assert tokens == pytest.approx(value * t)
    assert convert(tokens, "tokens", "examples", tokens_per_example=t) == pytest.approx(value)


def test_examples_and_sequences_are_one_unit():
    assert convert(7.0, "examples", "sequences") == 7.0
    assert same_unit("examples", "sequences", "x") == "examples"
    assert check_unit("Token") == "tokens" and set(UNITS) == {"examples", "sequences",
                                                               "tokens"}


@pytest.mark.parametrize("call, word", [
    (lambda: convert(1.0, "examples", "tokens"), "tokens_per_example"),
    (lambda: convert(1.0, "tokens", "examples", tokens_per_example=0), "> 0"),
    (lambda: convert(1.0, "bytes", "tokens", tokens_per_example=2), "bytes"),
    (lambda: same_unit("tokens", "examples", "the fit and the log"), "tokens and examples"),
])
def test_mixing_is_refused_with_both_named(call, word):
    with pytest.raises(ValueError, match=word):
        call()


def _sweep(b_crit=64.0, t=1.0):
    """Runs whose loss reaches 1.0 after exactly S(B) steps of the tradeoff."""
    tr = Tradeoff.from_b_crit(b_crit, s_min=100.0)
    rows = []
    for b in (8, 16, 32, 64, 128, 256, 512):
        s = float(tr.steps(b))
        for step in np.linspace(0, 3 * s, 40):
            rows.append({"run": f"b{b}", "batch_size": b * t, "learning_rate": 0.1,
                         "step": step, "loss": 2.0 - step / s})
    return pd.DataFrame(rows)


def test_a_sweep_in_tokens_gives_b_crit_in_tokens():
    seq = fit_tradeoff(steps_to_target(load_sweep(_sweep()), 1.0), n_boot=0)
    tok_sweep = load_sweep(_sweep(t=512.0), unit="tokens")
    tok = fit_tradeoff(steps_to_target(tok_sweep, 1.0), n_boot=0)
    assert seq.unit == "examples" and tok.unit == "tokens"
    assert tok.b_crit == pytest.approx(512 * seq.b_crit, rel=1e-6)
    assert "tokens" in tok.summary() and tok.to_dict()["unit"] == "tokens"
    curve = critical_batch_curve(tok_sweep, [1.0, 1.2], n_boot=0)
    assert curve.unit == "tokens" and all(f.unit == "tokens" for f in curve.fits)


def test_a_unit_that_contradicts_the_sweep_is_refused():
    s = load_sweep(_sweep(t=512.0), unit="tokens")
    with pytest.raises(UnitMismatch, match="tokens"):
        steps_to_target(s, 1.0, unit="examples")
    table = steps_to_target(s, 1.0)
    with pytest.raises(UnitMismatch, match="examples"):
        fit_tradeoff(table, unit="examples", n_boot=0)
    assert fit_tradeoff(table.frame[["batch_size", "steps"]], unit="tokens",
                        n_boot=0).unit == "tokens"


def test_convert_refuses_text_and_a_value_moved_past_the_float_range():
    """A string is not multiplied (no TypeError from Python's str * float); 1e300
    sequences of 1e10 tokens is past the float range, refused rather than inf; NaN and
    inf stay what they were (a column's missing or unbounded values)."""
    with pytest.raises(ValueError, match="value must be a number"):
        convert("64", "sequences", "tokens", tokens_per_example=512)
    with pytest.raises(ValueError, match="past the float range in tokens"):
        convert(1e300, "sequences", "tokens", tokens_per_example=1e10)
    with pytest.raises(ValueError, match="past the float range"):
        convert(np.array([1.0, 1e300]), "sequences", "tokens", tokens_per_example=1e10)
    assert np.isnan(convert(np.nan, "sequences", "tokens", tokens_per_example=512))
    assert convert(np.inf, "sequences", "tokens", tokens_per_example=512) == np.inf
    assert convert(np.float32(64), "sequences", "tokens", tokens_per_example=np.int64(512)) \
        == 32768.0
