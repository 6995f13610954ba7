"""The numpy closed forms against the sympy derivations, on random numeric substitutions."""

from __future__ import annotations

import subprocess
import sys
from functools import lru_cache

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch import symbolic
from empirical_batch.theory import QuadraticModel
from empirical_batch.tradeoff import Tradeoff, adaptive_schedule

pos = st.floats(1e-3, 1e3)


@lru_cache(maxsize=1)
def step_functions():
    d = symbolic.sgd_step()
    args = (d.B, d.g2, d.ghg, d.tr_s, d.tr_hs)
    names = ("eps_opt", "dl_opt", "eps_max", "dl_max", "b_noise", "b_simple")
    funcs = {k: symbolic.numeric(getattr(d, k), *args) for k in names}
    funcs["improvement"] = symbolic.numeric(d.improvement, d.eps, *args)
    return funcs


@given(pos, pos, pos, pos, st.floats(0.01, 1e5), st.floats(0.0, 3.0))
def test_numpy_matches_sympy_one_step(g2, ghg, tr_s, tr_hs, b, frac):
    f = step_functions()
    m = QuadraticModel.from_scalars(g2=g2, ghg=ghg, trace_sigma=tr_s, trace_h_sigma=tr_hs)
    vals = (b, g2, ghg, tr_s, tr_hs)
    # same formula evaluated by two programs: rounding only
    assert m.eps_opt(b) == pytest.approx(float(f["eps_opt"](*vals)), rel=1e-12)
    assert m.dl_opt(b) == pytest.approx(float(f["dl_opt"](*vals)), rel=1e-12)
    for key in ("eps_max", "dl_max", "b_noise", "b_simple"):
        assert getattr(m, key) == pytest.approx(float(f[key](*vals)), rel=1e-12)
    eps = frac * m.eps_opt(b)
    assert m.expected_improvement(eps, b) == pytest.approx(
        float(f["improvement"](eps, *vals)), rel=1e-10, abs=1e-12 * m.dl_max
    )


def test_derivation_is_the_paper_form():
    d = symbolic.sgd_step()
    assert sp.simplify(d.eps_opt - d.eps_max / (1 + d.b_noise / d.B)) == 0
    assert sp.simplify(d.b_noise - d.tr_hs / d.ghg) == 0
    assert sp.simplify(d.b_simple - d.tr_s / d.g2) == 0
    assert sp.simplify(d.dl_max - d.g2**2 / (2 * d.ghg)) == 0


def random_matrices(seed, n):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=n)
    a = rng.normal(size=(n, n))
    h = a @ a.T + 0.1 * np.eye(n)
    c = rng.normal(size=(n, n))
    q = rng.normal(size=(n, n))
    return g, h, c @ c.T, q @ q.T + 0.2 * np.eye(n)


def _positions(mat):
    """Entry positions of a symbolic matrix, one per distinct symbol (upper triangle)."""
    return [(i, j) for i in range(mat.shape[0]) for j in range(mat.shape[1])
            if mat.shape[1] == 1 or i <= j]


def entry_values(syms, **arrays):
    """Numeric matrices flattened in the order of :func:`entry_symbols`."""
    out = []
    for key, arr in arrays.items():
        mat = syms[key]
        arr = np.asarray(arr).reshape(mat.shape)
        out.extend(arr[i, j] for i, j in _positions(mat))
    return out


def entry_symbols(syms, *keys):
    return [syms[k][i, j] for k in keys for i, j in _positions(syms[k])]


@lru_cache(maxsize=1)
def expansion_function(n=3):
    expr, syms = symbolic.expected_step_loss(n)
    return symbolic.numeric(expr, syms["eps"], syms["B"],
                            *entry_symbols(syms, "G", "H", "Sigma")), syms


@settings(max_examples=15)
@given(st.integers(0, 2**32 - 1), st.floats(0.1, 100.0), st.floats(0.0, 2.0))
def test_entrywise_expansion_matches_model(seed, b, frac):
    """The n=3 expansion of E[L(θ − εG_est)] − L at numeric matrices vs the model."""
    g, h, s, _ = random_matrices(seed, 3)
    f, syms = expansion_function()
    m = QuadraticModel(g, h, s)
    eps = frac * m.eps_max
    change = f(eps, b, *entry_values(syms, G=g, H=h, Sigma=s))
    # the expansion is the loss *change*; the model gives the decrease
    assert -float(change) == pytest.approx(
        m.expected_improvement(eps, b), rel=1e-9, abs=1e-12 * m.dl_max
    )


@lru_cache(maxsize=1)
def preconditioned_functions(n=2):
    d = symbolic.preconditioned_step(n)
    args = entry_symbols(d.symbols, "G", "H", "Sigma", "P")
    return {k: symbolic.numeric(getattr(d, k), *args)
            for k in ("b_noise", "eps_max", "dl_max")}, d.symbols


@settings(max_examples=15)
@given(st.integers(0, 2**32 - 1))
def test_preconditioned_numpy_matches_sympy(seed):
    g, h, s, p = random_matrices(seed, 2)
    f, syms = preconditioned_functions()
    vals = entry_values(syms, G=g, H=h, Sigma=s, P=p)
    m = QuadraticModel(g, h, s).preconditioned(p)
    # eigh-based square root of P vs exact polynomials: relative 1e-9 is ample
    for key in ("b_noise", "eps_max", "dl_max"):
        assert getattr(m, key) == pytest.approx(float(f[key](*vals)), rel=1e-9)


def test_preconditioned_substitute_helper():
    g, h, s, p = random_matrices(0, 2)
    d = symbolic.preconditioned_step(2)
    m = QuadraticModel(g, h, s).preconditioned(p)
    assert d.substitute(d.b_noise, g, h, s, p) == pytest.approx(m.b_noise, rel=1e-9)


@lru_cache(maxsize=1)
def tradeoff_functions():
    d = symbolic.tradeoff_law()
    s_sym, e_sym = sp.Symbol("S", positive=True), sp.Symbol("E", positive=True)
    args = (d.B, d.s_min, d.e_min)
    return {
        "steps": symbolic.numeric(d.steps, *args),
        "examples": symbolic.numeric(d.examples, *args),
        "b_crit": symbolic.numeric(d.b_crit, d.s_min, d.e_min),
        "b_of_s": symbolic.numeric(d.batch_for_steps, s_sym, d.s_min, d.e_min),
        "b_of_e": symbolic.numeric(d.batch_for_examples, e_sym, d.s_min, d.e_min),
    }


@given(st.floats(1.0, 1e6), st.floats(1.0, 1e8), st.floats(-3.0, 3.0))
def test_tradeoff_numpy_matches_sympy(s_min, e_min, log_ratio):
    d = symbolic.tradeoff_law()
    assert d.law == 1
    assert d.residual == 0
    f = tradeoff_functions()
    t = Tradeoff(s_min, e_min)
    b = t.b_crit * 10.0**log_ratio
    # same formulas, two programs: rounding only
    assert t.steps(b) == pytest.approx(float(f["steps"](b, s_min, e_min)), rel=1e-12)
    assert t.examples(b) == pytest.approx(float(f["examples"](b, s_min, e_min)), rel=1e-12)
    assert t.b_crit == pytest.approx(float(f["b_crit"](s_min, e_min)), rel=1e-14)
    steps, examples = t.steps(b), t.examples(b)
    # inverting loses up to log10(S/(S - S_min)) <= 3 digits to cancellation
    assert t.batch_size_for_steps(steps) == pytest.approx(
        float(f["b_of_s"](steps, s_min, e_min)), rel=1e-10
    )
    assert t.batch_size_for_examples(examples) == pytest.approx(
        float(f["b_of_e"](examples, s_min, e_min)), rel=1e-10
    )
    assert float(f["b_of_s"](steps, s_min, e_min)) == pytest.approx(b, rel=1e-10)


def test_adaptive_derivation():
    d = symbolic.adaptive_batch()
    assert sp.simplify(d.batch - sp.sqrt(d.r * d.noise)) == 0
    assert sp.simplify(d.gamma - d.i_half**2 / (d.i0 * d.i1)) == 0
    s = sp.Symbol("s", nonnegative=True)
    assert symbolic.adaptive_gain(sp.Integer(5), s, 0, 1) == 1
    assert symbolic.adaptive_gain(sp.sqrt(s), s, 0, 1) == sp.Rational(24, 25)
    # and a second exact case: B ∝ s on [0, 1]: (2/3)^2 / (1/2) = 8/9
    assert symbolic.adaptive_gain(s, s, 0, 1) == sp.Rational(8, 9)


@pytest.mark.parametrize(
    ("noise", "exact"),
    [(lambda s: np.full_like(s, 5.0), sp.Integer(1)),
     (np.sqrt, sp.Rational(24, 25)),
     (lambda s: s, sp.Rational(8, 9))],
)
def test_adaptive_schedule_matches_exact_gain(noise, exact):
    grid = np.linspace(0.0, 1.0, 20001)
    sched = adaptive_schedule(noise, grid, r=3.0)
    # trapezoid with h = 5e-5 on s^(1/4) (the roughest case): error ~ h^(5/4) ~ 4e-6
    assert sched.gamma == pytest.approx(float(exact), rel=1e-4)
    # and the law of App. D holds with that gain
    law = (sched.steps / sched.s_min - 1) * (sched.examples / sched.e_min - 1)
    assert law == pytest.approx(sched.gamma, rel=1e-12)


def test_sympy_is_imported_only_by_symbolic():
    code = (
        "import sys\n"
        "import empirical_batch.theory, empirical_batch.tradeoff, empirical_batch.planning\n"
        "assert 'sympy' not in sys.modules, 'sympy imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_expected_step_loss_rejects_bad_n():
    with pytest.raises(ValueError, match="n must be >= 1"):
        symbolic.expected_step_loss(0)
