"""`progress_mean`, the App. D progress average every caller computes with, against
independent computations: sympy's exact integrals of a piecewise-linear integrand, a
fine-grid Riemann sum, and properties any weighted mean has."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch._numeric import progress_mean
from empirical_batch.errors import InputError

X = sp.Symbol("x")


def _piecewise_linear(xs, ys):
    """The sympy function through the points (xs, ys), linear between them."""
    pieces = [(ys[i] + (ys[i + 1] - ys[i]) * (X - xs[i]) / (xs[i + 1] - xs[i]),
               X <= xs[i + 1]) for i in range(len(xs) - 1)]
    return sp.Piecewise(*pieces, (ys[-1], True))


def test_the_trapezoid_form_is_the_exact_mean_of_the_linear_integrand():
    # B and ds/dx at points; the rule takes the integrand B·ds/dx linear between them
    xs = [sp.Rational(v) for v in (0, 1, 3, 7, 8)]
    b = [sp.Rational(v) for v in (2, 5, 3, 11, 4)]
    rate = [sp.Rational(v, 4) for v in (4, 3, 2, 1, 1)]
    num = sp.integrate(_piecewise_linear(xs, [bi * ri for bi, ri in zip(b, rate, strict=True)]),
                       (X, xs[0], xs[-1]))
    den = sp.integrate(_piecewise_linear(xs, rate), (X, xs[0], xs[-1]))
    got = progress_mean([float(v) for v in b], at=[float(v) for v in xs],
                        rate=[float(v) for v in rate])
    assert got == pytest.approx(float(num / den), rel=1e-14)


def test_the_cumulative_form_holds_the_first_value_from_start():
    # B(s) piecewise linear in the progress s, held at B(s_0) on [0, s_0]
    s = [sp.Rational(v, 2) for v in (1, 2, 5, 9)]
    b = [sp.Rational(v) for v in (3, 1, 6, 2)]
    exact = (s[0] * b[0] + sp.integrate(_piecewise_linear(s, b), (X, s[0], s[-1]))) / s[-1]
    floats = dict(at=[float(v) for v in s])
    assert progress_mean([float(v) for v in b], **floats, start=0.0) == pytest.approx(
        float(exact), rel=1e-14)
    # without start the integrals begin at the first point
    inner = sp.integrate(_piecewise_linear(s, b), (X, s[0], s[-1])) / (s[-1] - s[0])
    assert progress_mean([float(v) for v in b], **floats) == pytest.approx(float(inner),
                                                                          rel=1e-14)


def test_the_trapezoid_form_against_a_fine_riemann_sum():
    # B(t) = 10 + t², ds/dt = 1/(1 + B/32) (eq. 2.7's progress at batch 32), both smooth:
    # the trapezoid rule on a fine grid and a midpoint sum on a finer one agree
    t = np.linspace(0.0, 5.0, 4001)
    b = 10.0 + t**2
    w = 1.0 / (1.0 + b / 32.0)
    fine = np.linspace(0.0, 5.0, 400_001)
    mid = 0.5 * (fine[1:] + fine[:-1])
    bm = 10.0 + mid**2
    wm = 1.0 / (1.0 + bm / 32.0)
    riemann = np.sum(bm * wm) / np.sum(wm)
    assert progress_mean(b, at=t, rate=w) == pytest.approx(riemann, rel=1e-6)


def test_the_increments_form_is_the_weighted_sum():
    v, ds = np.array([1.0, 4.0, 9.0]), np.array([0.5, 0.25, 0.25])
    assert progress_mean(v, increments=ds) == (0.5 + 1.0 + 2.25) / 1.0


def test_a_falling_coordinate_counts_negatively():
    # the loss as progress: ds = -dL, where the loss rose the stretch counts against
    loss = np.array([3.0, 2.0, 2.5, 1.0])
    b = np.array([1.0, 2.0, 3.0, 4.0])
    num = 0.5 * (1 + 2) * 1.0 + 0.5 * (2 + 3) * -0.5 + 0.5 * (3 + 4) * 1.5
    assert progress_mean(b, at=-loss) == pytest.approx(num / 2.0, rel=1e-15)


def test_no_progress_is_nan_and_bad_shapes_are_refused():
    assert np.isnan(progress_mean([1.0, 2.0], increments=[0.0, 0.0]))
    assert np.isnan(progress_mean([1.0, 2.0], at=[0.0, 1.0], rate=[0.0, 0.0]))
    assert np.isnan(progress_mean([1.0], at=[2.0]))
    with pytest.raises(InputError, match="one of"):
        progress_mean([1.0, 2.0])
    with pytest.raises(InputError, match="one of"):
        progress_mean([1.0, 2.0], increments=[1.0, 1.0], at=[0.0, 1.0])
    with pytest.raises(InputError, match="same length"):
        progress_mean([1.0, 2.0], at=[0.0, 1.0, 2.0])
    with pytest.raises(InputError, match="same length"):
        progress_mean([1.0, 2.0], at=[0.0, 1.0], rate=[1.0])


_pos = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False)


@st.composite
def _points(draw):
    n = draw(st.integers(min_value=2, max_value=12))
    gaps = draw(st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=n - 1,
                         max_size=n - 1))
    x0 = draw(st.floats(min_value=0.0, max_value=1e3))
    x = x0 + np.concatenate([[0.0], np.cumsum(gaps)])
    b = np.array(draw(st.lists(_pos, min_size=n, max_size=n)))
    w = np.array(draw(st.lists(_pos, min_size=n, max_size=n)))
    return x, b, w


@settings(max_examples=200, deadline=None)
@given(_points(), st.floats(min_value=0.0, max_value=1.0))
def test_a_mean_lies_between_the_values_and_ignores_the_scale_of_the_weights(pts, lead):
    x, b, w = pts
    lo, hi = b.min() * (1 - 1e-12), b.max() * (1 + 1e-12)
    start = x[0] - lead * (x[-1] - x[0])
    for kw in (dict(at=x), dict(at=x, rate=w), dict(at=x, start=start),
               dict(at=x, rate=w, start=start), dict(increments=w)):
        m = progress_mean(b, **kw)
        assert lo <= m <= hi
        scaled = {k: (v * 7.5 if k in ("rate", "increments") else v) for k, v in kw.items()}
        assert progress_mean(b, **scaled) == pytest.approx(m, rel=1e-12)
        # a constant noise scale is its own mean
        assert progress_mean(np.full_like(b, 3.0), **kw) == pytest.approx(3.0, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(_points())
def test_the_cumulative_form_is_the_rate_form_at_rate_one(pts):
    x, b, _ = pts
    for start in (None, 0.0):
        assert progress_mean(b, at=x, start=start) == pytest.approx(
            progress_mean(b, at=x, rate=np.ones_like(x), start=start), rel=1e-12)
