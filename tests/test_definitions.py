"""Critical-batch-size vocabulary: each converter against an independent computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from empirical_batch.definitions import (
    CBS_DEFINITIONS,
    b_crit_from_zhang_cbs,
    cbs_definitions_frame,
    convert_cbs,
    merrill_cbs_from_b_crit,
    zhang_cbs_from_b_crit,
)
from empirical_batch.tradeoff import Tradeoff


def test_zhang_formula_derived_with_sympy():
    """S(B) = (1+o) S(B0) B0/B on S = S_min(1 + Bc/B) has the one root (1+o)B0 + o Bc."""
    b, b0, bc, smin, o = sp.symbols("B B0 B_c S_min o", positive=True)
    s = lambda x: smin * (1 + bc / x)  # noqa: E731
    (root,) = sp.solve(sp.Eq(s(b), (1 + o) * s(b0) * b0 / b), b)
    assert sp.simplify(root - ((1 + o) * b0 + o * bc)) == 0


@pytest.mark.parametrize("b_crit,b0", [(1000.0, 64.0), (50.0, 8.0), (2.0e5, 256.0)])
def test_zhang_cbs_solves_the_overhead_condition_numerically(b_crit, b0):
    """Brute force: find where the tradeoff's steps are 1.2x linear scaling from B0."""
    t = Tradeoff.from_b_crit(b_crit, s_min=1000.0)

    def excess(b):
        return t.steps(b) / (t.steps(b0) * b0 / b) - 1.2

    root = brentq(excess, b0 * 1.0001, 1e9, xtol=1e-10, rtol=1e-14)
    assert zhang_cbs_from_b_crit(b_crit, base_batch=b0) == pytest.approx(root, rel=1e-9)
    # the headline approximation B* ≈ 0.2 B_crit for B0 << B_crit
    if b0 < 1e-2 * b_crit:
        assert root == pytest.approx(0.2 * b_crit, rel=0.02)


@settings(max_examples=50, deadline=None)
@given(st.floats(1.0, 1e7), st.floats(1.0, 1e4), st.floats(0.01, 2.0))
def test_zhang_round_trip(b_crit, b0, o):
    cbs = zhang_cbs_from_b_crit(b_crit, base_batch=b0, overhead=o)
    assert b_crit_from_zhang_cbs(cbs, base_batch=b0, overhead=o) == pytest.approx(
        b_crit, rel=1e-6, abs=1e-6 * b0)


def test_zhang_inverse_refuses_impossible_cbs():
    with pytest.raises(ValueError, match="must exceed"):
        b_crit_from_zhang_cbs(70.0, base_batch=64.0)


def test_merrill_model_against_brute_force():
    """Scan B on a fine grid: the last B whose modelled loss gap is <= the tolerance."""
    bc, b0, tol, window, slope = 800.0, 32.0, 0.01, 1e6, 1e-7

    def gap(b):
        return slope * window * (1 / (1 + b0 / bc) - 1 / (1 + b / bc))

    grid = np.geomspace(b0, 1e6, 400_001)
    inside = grid[gap(grid) <= tol]
    got = merrill_cbs_from_b_crit(bc, tolerance=tol, window=window, loss_slope=slope,
                                  base_batch=b0)
    assert got == pytest.approx(inside.max(), rel=1e-4)
    assert gap(got) == pytest.approx(tol, rel=1e-9)
    # a tolerance larger than any gap: every batch qualifies
    assert math.isinf(merrill_cbs_from_b_crit(bc, tolerance=1.0, window=window,
                                              loss_slope=slope, base_batch=b0))


def test_convert_identities_and_chain():
    assert convert_cbs(1234.0, "mccandlish", "bergsma") == 1234.0
    z = convert_cbs(1000.0, "bergsma", "zhang", base_batch=64.0)
    assert z == pytest.approx(1.2 * 64 + 0.2 * 1000)
    assert convert_cbs(z, "zhang", "mccandlish", base_batch=64.0) == pytest.approx(1000.0)
    assert convert_cbs(500.0, "li_peak", "mccandlish", approximate=True) == 500.0
    m = convert_cbs(800.0, "mccandlish", "merrill", tolerance=0.01, window=1e6,
                    loss_slope=1e-7, base_batch=32.0)
    assert m == merrill_cbs_from_b_crit(800.0, tolerance=0.01, window=1e6, loss_slope=1e-7,
                                        base_batch=32.0)


@pytest.mark.parametrize("args,kwargs,match", [
    ((1000.0, "mccandlish", "zhang"), {}, "base_batch"),
    ((1000.0, "mccandlish", "merrill"), {"tolerance": 0.1}, "window, loss_slope, base_batch"),
    ((1000.0, "li_peak", "mccandlish"), {}, "approximate=True"),
    ((1000.0, "merrill", "mccandlish"), {}, "cannot be converted"),
    ((1000.0, "mccandlish", "shallue"), {}, "to_def"),
    ((1000.0, "kaplan", "zhang"), {}, "from_def"),
    ((-1.0, "mccandlish", "zhang"), {"base_batch": 1.0}, "value"),
    ((1000.0, "mccandlish", "zhang"), {"base_batch": -3.0}, "base_batch"),
    ((1000.0, "mccandlish", "zhang"), {"base": 3.0}, "unknown keyword"),
])
def test_convert_errors_name_the_missing_information(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        convert_cbs(*args, **kwargs)


def test_definitions_table():
    df = cbs_definitions_frame()
    assert list(df.key) == list(CBS_DEFINITIONS)
    assert {"mccandlish", "zhang", "bergsma", "merrill", "li_peak"} == set(df.key)
    for d in CBS_DEFINITIONS.values():
        assert "arXiv" in d.citation and d.formula and d.assumptions
        assert d.key in repr(d)
    with pytest.raises(TypeError):
        CBS_DEFINITIONS["zhang"] = None  # read-only mapping
