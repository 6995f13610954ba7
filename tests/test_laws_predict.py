"""Anchored and unanchored predictions: the closed form, rounding, intervals and the
extrapolation status (the nanochat depth-34 case comes out flagged)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch.errors import InputError
from empirical_batch.laws import (
    Anchor,
    fit_points,
    get_law,
    predict_batch,
    round_batch,
)


def _quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return predict_batch(*args, **kwargs)


def test_nanochat_depth_34_is_flagged():
    law = get_law("power_lines_b_opt")
    with pytest.warns(Warning, match="30× beyond the anchor"):
        p = predict_batch(law, {"tokens": 3e10}, anchor=Anchor(2**19, {"tokens": 1e9}),
                          exponent_intervals={"tokens": (0.30, 0.45)})
    assert p.value == pytest.approx(2**19 * 30**0.383)
    assert p.value == pytest.approx(1.929e6, rel=1e-3)
    assert p.rounded == 2**21 and p.unit == "tokens"
    assert p.status == "extrapolating" and p.beyond_anchor == {"tokens": pytest.approx(30.0)}
    assert "30× beyond the anchor" in p.status_text and "not recorded" in p.status_text
    lo, hi = p.value_interval
    assert lo == pytest.approx(2**19 * 30**0.30) and hi == pytest.approx(2**19 * 30**0.45)
    assert any("not all confirmed" in n for n in p.notes)


@settings(max_examples=60, deadline=None)
@given(b_ref=st.floats(1e3, 1e8), d_ref=st.floats(1e8, 1e11), ratio=st.floats(0.01, 100.0),
       k=st.floats(0.1, 0.9), width=st.floats(0.0, 0.2))
def test_anchored_prediction_is_the_closed_form(b_ref, d_ref, ratio, k, width):
    law = fit_points(np.array([1e9, 1e10, 1e11]), np.array([1.0, 10**k, 100**k]),
                     ("tokens",), quantity="b_opt", unit="tokens")
    # a published-style law: exponent k with interval [k - width, k + width], no covariance
    import dataclasses

    from empirical_batch.result import Interval

    law = dataclasses.replace(law, exponents=(k,), covariance=None,
                              exponent_intervals=(Interval(k - width, k + width, 0.95),))
    p = _quiet(law, {"tokens": d_ref * ratio}, anchor=Anchor(b_ref, {"tokens": d_ref}),
               rounding="none")
    assert p.value == pytest.approx(b_ref * ratio**k, rel=1e-9)
    ends = sorted([b_ref * ratio ** (k - width), b_ref * ratio ** (k + width)])
    assert (p.value_interval.low, p.value_interval.high) == pytest.approx(ends, rel=1e-9)
    assert p.value_interval.low <= p.value * (1 + 1e-12)
    pow2 = _quiet(law, {"tokens": d_ref * ratio}, anchor=Anchor(b_ref, {"tokens": d_ref}))
    assert pow2.rounded == 2.0 ** round(math.log2(b_ref * ratio**k))


def test_fitted_law_anchored_interval_uses_its_covariance():
    rng = np.random.default_rng(0)
    x = np.geomspace(1e9, 1e11, 6)
    law = fit_points(x, 0.5 * x**0.5 * np.exp(0.05 * rng.standard_normal(6)), ("tokens",),
                     quantity="b_crit", unit="tokens")
    p = _quiet(law, {"tokens": 1e12}, anchor=Anchor(1e5, {"tokens": 1e10}), rounding="none")
    from scipy import stats

    se = math.sqrt(law.covariance[1][1]) * math.log(100.0)
    t = stats.t.ppf(0.975, law.dof)
    assert p.value == pytest.approx(1e5 * 100 ** law.exponents[0])
    assert p.value_interval.high / p.value == pytest.approx(math.exp(t * se))
    # the point lies 10× beyond the fitted range: outside_range
    assert p.status == "outside_range" and p.beyond_range["tokens"] == pytest.approx(10.0)
    inside = _quiet(law, {"tokens": 3e10})
    assert inside.status == "within_range" and inside.value_interval.low < inside.value


def test_anchor_interval_widens_the_prediction():
    law = get_law("power_lines_b_opt")
    a = _quiet(law, {"tokens": 2e9}, anchor=Anchor(1e6, {"tokens": 1e9}, 8e5, 1.3e6),
               exponent_intervals={"tokens": (0.383, 0.383)}, rounding="none")
    assert a.value_interval.low == pytest.approx(8e5 * 2**0.383)
    assert a.value_interval.high == pytest.approx(1.3e6 * 2**0.383)


def test_rounding_to_the_granule():
    assert round_batch(1.9e6, "pow2") == (2.0**21, "")
    r, note = round_batch(1.9e6, "pow2", granule=3 * 2048)
    assert r % (3 * 2048) == 0 and "not a multiple" in note
    assert round_batch(1000.0, "multiple", granule=64)[0] == 1024.0
    assert round_batch(10.0, "multiple", granule=64)[0] == 64.0
    with pytest.raises(InputError, match="rounding"):
        round_batch(10.0, "nearest")


def test_bad_input_is_refused():
    law = get_law("power_lines_b_opt")
    with pytest.raises(InputError, match="coefficient is not known"):
        predict_batch(law, {"tokens": 1e10})
    with pytest.raises(InputError, match="tokens must be finite and > 0"):
        predict_batch(law, {"tokens": -1.0}, anchor=Anchor(1e6, {"tokens": 1e9}))
    with pytest.raises(InputError, match="> 0"):
        Anchor(0.0, {"tokens": 1e9})
    with pytest.raises(InputError, match="missing"):
        predict_batch(get_law("steplaw_lr_opt"), {"n_params": 1e9, "tokens": 1e10},
                      anchor=Anchor(1e-3, {"tokens": 1e9}))
    with pytest.raises(InputError, match="exponent is not known"):
        predict_batch(get_law("zhang2024_b_crit"), {"tokens": 1e10},
                      anchor=Anchor(1e6, {"tokens": 1e9}))
    with pytest.raises(InputError, match="not used"):
        predict_batch(law, {"tokens": 1e10, "n_params": 1e9}, anchor=Anchor(1e6, {"tokens": 1e9}))


def test_learning_rate_is_not_rounded_and_spanning_zero_is_noted():
    p = _quiet(get_law("deepseek_lr_opt"), {"compute": 1e21})
    assert p.rounding == "none" and p.rounded == p.value
    assert p.value == pytest.approx(0.3118 * 1e21**-0.125)
    assert p.status == "range_unknown"
    law = fit_points(np.geomspace(1e9, 1e10, 5), [1e5, 1.2e5, 0.9e5, 1.1e5, 1e5],
                     ("tokens",), quantity="b_opt", unit="tokens")
    q = _quiet(law, {"tokens": 5e9})
    assert any("spans zero" in n for n in q.notes)
