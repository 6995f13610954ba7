"""The steps/examples law and the adaptive batch schedule (tradeoff.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from empirical_batch.tradeoff import Tradeoff, adaptive_schedule

tradeoffs = st.builds(Tradeoff, st.floats(1.0, 1e7), st.floats(1.0, 1e10))
log_ratio = st.floats(-4.0, 4.0)


@given(tradeoffs, log_ratio)
def test_law_identities(t, u):
    b = t.b_crit * 10.0**u
    s, e = t.steps(b), t.examples(b)
    assert s * b == pytest.approx(e, rel=1e-12)  # E = B S on the law
    assert abs(t.residual(s, e)) < 1e-9  # rounding; the terms are O(10^4) at most
    assert s > t.s_min and e > t.e_min
    # inverses (cancellation in S/S_min - 1 costs <= 4 digits here)
    assert t.batch_size_for_steps(s) == pytest.approx(b, rel=1e-8)
    assert t.batch_size_for_examples(e) == pytest.approx(b, rel=1e-8)


@given(tradeoffs)
def test_critical_batch_doubles_both(t):
    assert t.steps(t.b_crit) == pytest.approx(2 * t.s_min, rel=1e-14)
    assert t.examples(t.b_crit) == pytest.approx(2 * t.e_min, rel=1e-14)
    assert t.to_dict()["b_crit"] == t.e_min / t.s_min


@given(tradeoffs, st.floats(1.01, 3.0))
def test_off_the_curve_has_nonzero_residual(t, k):
    b = t.b_crit
    assert t.residual(k * t.steps(b), t.examples(b)) > 0
    assert t.residual(t.steps(b) / k, t.examples(b) / k) < 0


@given(tradeoffs)
def test_from_b_crit_and_frame(t):
    a = Tradeoff.from_b_crit(t.b_crit, s_min=t.s_min)
    b = Tradeoff.from_b_crit(t.b_crit, e_min=t.e_min)
    assert a.e_min == pytest.approx(t.e_min, rel=1e-14)
    assert b.s_min == pytest.approx(t.s_min, rel=1e-14)
    df = t.to_frame([t.b_crit])
    assert df["steps/s_min"].iloc[0] == pytest.approx(2.0, rel=1e-14)
    assert df["examples/e_min"].iloc[0] == pytest.approx(2.0, rel=1e-14)


def test_broadcasting():
    t = Tradeoff(100, 6400)
    b = np.array([[1.0, 64.0], [128.0, 6400.0]])
    assert t.steps(b).shape == (2, 2)
    assert isinstance(t.steps(64), float)


def test_tradeoff_bad_input():
    with pytest.raises(ValueError, match="s_min must be > 0"):
        Tradeoff(0, 1)
    with pytest.raises(ValueError, match="e_min must be finite"):
        Tradeoff(1, np.nan)
    t = Tradeoff(10, 100)
    with pytest.raises(ValueError, match="batch_size must be > 0"):
        t.steps(0)
    with pytest.raises(ValueError, match="steps must be > s_min"):
        t.batch_size_for_steps(10)
    with pytest.raises(ValueError, match="examples must be > e_min"):
        t.batch_size_for_examples(50)
    with pytest.raises(ValueError, match="exactly one of s_min and e_min"):
        Tradeoff.from_b_crit(10.0, s_min=1.0, e_min=10.0)
    with pytest.raises(ValueError, match="b_crit must be > 0"):
        Tradeoff.from_b_crit(0.0, s_min=1.0)


# --- adaptive batch size ------------------------------------------------------------


def test_constant_noise_gives_gain_one():
    s = np.linspace(0.0, 7.0, 11)
    a = adaptive_schedule(np.full(11, 40.0), s, r=10.0)
    assert a.gamma == pytest.approx(1.0, rel=1e-14)
    np.testing.assert_allclose(a.batch_size, 20.0)
    # a constant schedule *is* the fixed batch: same examples
    assert a.fixed_examples == pytest.approx(a.examples, rel=1e-12)
    assert a.examples_saved == pytest.approx(0.0, abs=1e-12)


def test_sqrt_noise_gives_24_over_25():
    # E[s^(1/4)]^2 / E[s^(1/2)] on [0, 1] = (4/5)^2 / (2/3) = 24/25
    s = np.linspace(0.0, 1.0, 40001)
    a = adaptive_schedule(lambda x: 3.0 * np.sqrt(x), s, r=2.0)
    # trapezoid on s^(1/4): error ~ h^(5/4) = (2.5e-5)^1.25 ~ 2e-6
    assert a.gamma == pytest.approx(24 / 25, rel=2e-5)


@settings(max_examples=20)
@given(st.floats(0.0, 10.0), st.floats(0.1, 10.0), st.floats(0.0, 3.0), st.floats(0.01, 100.0),
       st.floats(0.5, 5.0))
def test_adaptive_schedule_against_quadrature(a, b, p, r, length):
    """S, E, γ on a grid against scipy.integrate.quad of eq. D.1 for 𝓑(s) = a + b s^p."""
    def noise(s):
        return a + b * s**p

    grid = np.linspace(0.0, length, 20001)
    sched = adaptive_schedule(noise, grid, r=r)

    def q(f):
        return integrate.quad(f, 0.0, length, limit=200, epsabs=0, epsrel=1e-11)[0]

    steps = q(lambda s: 1.0 + noise(s) / np.sqrt(r * noise(s)))
    examples = q(lambda s: noise(s) + np.sqrt(r * noise(s)))
    e_min = q(noise)
    gamma = q(lambda s: np.sqrt(noise(s))) ** 2 / (length * e_min)
    # trapezoid, h = length/20000, roughest integrand s^(p/2) with p small and a = 0:
    # error <~ h^(1 + p/2) relative; 1e-3 covers p -> 0 (then B is constant and exact)
    assert sched.steps == pytest.approx(steps, rel=1e-3)
    assert sched.examples == pytest.approx(examples, rel=1e-3)
    assert sched.e_min == pytest.approx(e_min, rel=1e-3)
    assert sched.gamma == pytest.approx(gamma, rel=1e-3)
    assert sched.gamma <= 1.0 + 1e-12  # Cauchy–Schwarz
    law = (sched.steps / sched.s_min - 1) * (sched.examples / sched.e_min - 1)
    assert law == pytest.approx(sched.gamma, rel=1e-10)
    # the best fixed batch at equal steps needs 1/γ times the excess examples
    excess_ratio = (sched.examples - sched.e_min) / (sched.fixed_examples - sched.e_min)
    assert excess_ratio == pytest.approx(sched.gamma, rel=1e-10)


@settings(max_examples=20)
@given(st.integers(0, 2**32 - 1), st.floats(0.1, 100.0), st.floats(0.5, 2.0))
def test_schedule_minimises_examples_plus_r_steps(seed, r, k):
    """Scaling B(s) by k (or a random wiggle) never lowers E + r S (trapezoid sums)."""
    rng = np.random.default_rng(seed)
    s = np.linspace(0.0, 1.0, 201)
    noise = np.exp(rng.normal(size=201).cumsum() * 0.2) * 10
    sched = adaptive_schedule(noise, s, r=r)

    def cost(batch):
        steps = np.trapezoid(1.0 + noise / batch, s)
        examples = np.trapezoid(noise + batch, s)
        return examples + r * steps

    best = cost(sched.batch_size)
    assert best == pytest.approx(sched.examples + r * sched.steps, rel=1e-12)
    assert cost(k * sched.batch_size) >= best * (1 - 1e-12)
    wiggle = sched.batch_size * np.exp(0.3 * rng.normal(size=201))
    assert cost(wiggle) >= best * (1 - 1e-12)


def test_adaptive_outputs():
    s = np.linspace(0, 1, 5)
    a = adaptive_schedule(s + 1.0, s, r=4.0)
    d = a.to_dict()
    assert set(d) >= {"gamma", "steps", "examples", "s_min", "e_min", "examples_saved"}
    assert list(a.to_frame().columns) == ["s", "noise_scale", "batch_size"]
    assert a.tradeoff.b_crit == pytest.approx(a.e_min / a.s_min)
    # equal-examples comparison: the fixed batch needs more steps than the schedule
    assert a.fixed_steps_same_examples >= a.steps
    # zero noise at a point: exact, no division warning
    z = adaptive_schedule(s, s, r=1.0)
    assert z.batch_size[0] == 0.0 and np.isfinite(z.steps)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((np.ones(3), np.array([0.0, 1.0, 1.0])), {"r": 1.0}, "s must be strictly increasing"),
        ((np.ones(3), np.array([0.0])), {"r": 1.0}, "s must have 1 dimension|at least 2"),
        ((np.ones(2), np.array([0.0, 1.0, 2.0])), {"r": 1.0}, "does not match s"),
        ((np.array([1.0, -1.0]), np.array([0.0, 1.0])), {"r": 1.0}, "noise_scale must be >= 0"),
        ((np.zeros(2), np.array([0.0, 1.0])), {"r": 1.0}, "not be zero everywhere"),
        ((np.ones(2), np.array([0.0, 1.0])), {"r": 0.0}, "r must be > 0"),
        ((np.array([1.0, np.nan]), np.array([0.0, 1.0])), {"r": 1.0}, "noise_scale must be fin"),
    ],
)
def test_adaptive_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        adaptive_schedule(*args, **kwargs)
