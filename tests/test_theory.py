"""Closed forms of one SGD step (theory.py) against brute force, Monte Carlo and algebra."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from empirical_batch.theory import (
    QuadraticModel,
    anisotropic_quadratic,
    dl_opt,
    effective_learning_rate,
    eps_opt,
)

# --- random valid problems ---------------------------------------------------------


def random_problem(seed: int, n: int, rank_sigma: int | None = None):
    """G != 0, SPD H, PSD Σ (possibly rank-deficient), entries O(1)."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=n)
    while g @ g < 1e-3:
        g = rng.normal(size=n)
    a = rng.normal(size=(n, n))
    h = a @ a.T / n + 0.1 * np.eye(n)
    c = rng.normal(size=(n, rank_sigma or n))
    s = c @ c.T * rng.uniform(0.1, 10.0)
    return g, h, s


problems = st.builds(
    lambda seed, n, r: random_problem(seed, n, min(r, n)),
    st.integers(0, 2**32 - 1),
    st.integers(1, 6),
    st.integers(1, 6),
)
batch_sizes = st.floats(0.01, 1e6)


def random_orthogonal(rng, n):
    q, r = np.linalg.qr(rng.normal(size=(n, n)))
    return q * np.sign(np.diag(r))


# --- properties ---------------------------------------------------------------------


@given(problems, batch_sizes)
def test_eps_opt_below_eps_max_and_tends_to_it(p, b):
    m = QuadraticModel(*p)
    assert m.eps_opt(b) < m.eps_max or m.b_noise == 0.0
    # 1/(1 + Bn/B) at B = 1e9 * max(Bn, 1) differs from 1 by at most 1e-9
    big = 1e9 * max(m.b_noise, 1.0)
    assert m.eps_opt(big) == pytest.approx(m.eps_max, rel=2e-9)
    assert m.dl_opt(big) == pytest.approx(m.dl_max, rel=2e-9)


@given(problems, batch_sizes)
def test_dl_opt_is_the_maximum_of_expected_improvement(p, b):
    m = QuadraticModel(*p)
    e_opt = m.eps_opt(b)
    best = m.dl_opt(b)
    # same quantity by two routes: rounding only (rel 1e-12)
    assert m.expected_improvement(e_opt, b) == pytest.approx(best, rel=1e-12)
    grid = e_opt * np.linspace(0.0, 3.0, 301)
    values = m.expected_improvement(grid, b)
    # no rate on the grid beats the optimum (up to rounding of the quadratic)
    assert np.all(values <= best * (1 + 1e-12))
    # and rates 1% away are strictly worse: the optimum is not flat
    assert m.expected_improvement(1.01 * e_opt, b) < best
    assert m.expected_improvement(0.99 * e_opt, b) < best


@given(problems, batch_sizes)
def test_twice_eps_opt_gives_zero(p, b):
    m = QuadraticModel(*p)
    # a root of the quadratic; rounding error is relative to the terms eps|G|^2 ~ 4 dl_opt
    assert abs(m.expected_improvement(2 * m.eps_opt(b), b)) <= 1e-11 * m.dl_opt(b)
    assert m.expected_improvement(2.1 * m.eps_opt(b), b) < 0


@given(problems, st.floats(0.01, 100.0))
def test_b_noise_equals_b_simple_for_isotropic_hessian(p, c):
    g, _, s = p
    m = QuadraticModel(g, c * np.eye(len(g)), s)
    assert m.b_noise == pytest.approx(m.b_simple, rel=1e-12)


@given(problems, st.integers(0, 2**32 - 1))
def test_invariant_under_orthogonal_change_of_basis(p, seed):
    g, h, s = p
    q = random_orthogonal(np.random.default_rng(seed), len(g))
    a = QuadraticModel(g, h, s)
    b = QuadraticModel(q @ g, q @ h @ q.T, q @ s @ q.T)
    for key in ("g2", "ghg", "trace_sigma", "trace_h_sigma"):
        # rounding of a few matrix products with O(1) entries, relative to the scale
        assert getattr(b, key) == pytest.approx(getattr(a, key), rel=1e-9, abs=1e-12)


@given(problems)
def test_dense_diagonal_and_eigen_forms_agree(p):
    g, h, s = p
    lam, v = np.linalg.eigh(h)
    dense = QuadraticModel(g, h, s)
    eigen = QuadraticModel.from_eigenbasis(lam, v, g, s)
    # diagonal form of the same problem in its eigenbasis
    diag = QuadraticModel(v.T @ g, lam, np.diag(v.T @ s @ v))
    eigen_1d = QuadraticModel.from_eigenbasis(lam, v, g, np.einsum("ij,jk,ki->i", v.T, s, v))
    # and a genuinely diagonal problem given dense and 1-D
    dd = QuadraticModel(g, np.diag(np.diag(h)), np.diag(np.diag(s)))
    d1 = QuadraticModel(g, np.diag(h), np.diag(s))
    for key in ("b_noise", "b_simple", "eps_max", "dl_max"):
        ref = getattr(dense, key)
        for other in (eigen, diag, eigen_1d):
            # eigendecomposition round-off: ~1e-12 relative for well-conditioned O(1) input
            assert getattr(other, key) == pytest.approx(ref, rel=1e-8, abs=1e-12)
        assert getattr(dd, key) == pytest.approx(getattr(d1, key), rel=1e-12)


@given(problems)
def test_mixed_dense_and_diagonal_inputs(p):
    g, h, s = p
    hd, sd = np.diag(h), np.diag(s)
    ref = QuadraticModel(g, np.diag(hd), np.diag(sd))
    for m in (QuadraticModel(g, hd, np.diag(sd)), QuadraticModel(g, np.diag(hd), sd)):
        assert m.b_noise == pytest.approx(ref.b_noise, rel=1e-12)
        assert m.b_simple == pytest.approx(ref.b_simple, rel=1e-12)


@given(problems)
def test_from_scalars_matches(p):
    a = QuadraticModel(*p)
    b = QuadraticModel.from_scalars(
        g2=a.g2, ghg=a.ghg, trace_sigma=a.trace_sigma, trace_h_sigma=a.trace_h_sigma
    )
    assert a.to_dict() == b.to_dict()
    bs = np.array([1.0, 7.0, 300.0])
    np.testing.assert_array_equal(a.eps_opt(bs), b.eps_opt(bs))


@given(problems)
def test_free_functions_match_methods_and_broadcast(p):
    m = QuadraticModel(*p)
    bs = np.array([[1.0], [10.0], [1000.0]])
    np.testing.assert_allclose(eps_opt(bs, m.eps_max, m.b_noise), m.eps_opt(bs), rtol=1e-14)
    np.testing.assert_allclose(dl_opt(bs, m.dl_max, m.b_noise), m.dl_opt(bs), rtol=1e-14)
    assert eps_opt(bs, m.eps_max, m.b_noise).shape == (3, 1)
    assert isinstance(eps_opt(3.0, m.eps_max, m.b_noise), float)
    # eps (1, 4) against batch (3, 1) -> (3, 4)
    assert m.expected_improvement(np.ones((1, 4)), bs).shape == (3, 4)


def test_anisotropic_quadratic_matches_its_formula():
    n, c = 50, 7.0
    h = 1.0 / np.arange(1, n + 1)
    m = anisotropic_quadratic(n, noise=c)
    assert m.b_noise == pytest.approx(c * np.sum(h**2) / np.sum(h**3), rel=1e-12)
    assert m.b_simple == pytest.approx(c * np.sum(h) / np.sum(h**2), rel=1e-12)


# --- Monte Carlo: real SGD steps --------------------------------------------------


@pytest.mark.parametrize("batch", [1, 4, 32])
def test_monte_carlo_sgd_step_matches_expected_improvement(batch):
    """Mean exact loss decrease of one real step, per-example Gaussian gradients."""
    rng = np.random.default_rng(1234 + batch)
    g, h, s = random_problem(7, 3)
    m = QuadraticModel(g, h, s)
    chol = np.linalg.cholesky(s)
    eps = 1.3 * m.eps_opt(batch)
    draws = 20000
    per_example = g + rng.normal(size=(draws, batch, 3)) @ chol.T
    g_est = per_example.mean(axis=1)
    # L(x) = Gᵀx + ½xᵀHx has gradient G and Hessian H at 0; decrease of x = -eps g_est
    decrease = eps * g_est @ g - 0.5 * eps**2 * np.einsum("ij,jk,ik->i", g_est, h, g_est)
    se = decrease.std(ddof=1) / np.sqrt(draws)
    # 4 standard errors: a correct formula fails with probability ~6e-5
    assert abs(decrease.mean() - m.expected_improvement(eps, batch)) < 4 * se


def test_finite_dataset_correction_is_exact_without_replacement():
    """Enumerate every batch of B out of D examples: the mean decrease is exact."""
    rng = np.random.default_rng(0)
    d_size, n = 9, 3
    per_example = rng.normal(size=(d_size, n)) + np.array([1.0, -0.5, 0.2])
    g = per_example.mean(axis=0)
    a = rng.normal(size=(n, n))
    h = a @ a.T + 0.5 * np.eye(n)
    sigma = np.cov(per_example, rowvar=False, ddof=1)  # Bessel-corrected
    m = QuadraticModel(g, h, sigma, dataset_size=d_size)
    plain = QuadraticModel(g, h, sigma)
    for batch in (1, 2, 4, 9):
        eps = 0.7 * m.eps_opt(batch)
        dec = []
        for idx in itertools.combinations(range(d_size), batch):
            ge = per_example[list(idx)].mean(axis=0)
            dec.append(eps * g @ ge - 0.5 * eps**2 * ge @ h @ ge)
        # exact average over all C(D, B) batches: agreement to rounding
        assert np.mean(dec) == pytest.approx(m.expected_improvement(eps, batch), rel=1e-10)
        if batch < d_size:
            # and the uncorrected formula is measurably off
            assert abs(plain.expected_improvement(eps, batch) - np.mean(dec)) > 1e-6
    # B = D: no noise at all, eps_opt = eps_max
    assert m.eps_opt(d_size) == pytest.approx(m.eps_max, rel=1e-14)


# --- preconditioning ------------------------------------------------------------------


def spd(rng, n):
    a = rng.normal(size=(n, n))
    return a @ a.T / n + 0.2 * np.eye(n)


@given(problems, st.integers(0, 2**32 - 1))
def test_preconditioned_closed_forms(p, seed):
    g, h, s = p
    rng = np.random.default_rng(seed)
    pm = spd(rng, len(g))
    m = QuadraticModel(g, h, s).preconditioned(pm)
    pg = pm @ g
    # the formulas of the docstring, computed directly in the original coordinates
    assert m.b_noise == pytest.approx(np.trace(pm @ h @ pm @ s) / (pg @ h @ pg), rel=1e-8)
    assert m.eps_max == pytest.approx(g @ pg / (pg @ h @ pg), rel=1e-8)
    assert m.b_simple == pytest.approx(np.trace(pm @ s) / (g @ pg), rel=1e-8, abs=1e-14)
    # expected decrease of the step -eps P G_est, expanded directly
    eps, b = 0.8 * m.eps_opt(5.0), 5.0
    direct = eps * g @ pg - 0.5 * eps**2 * (pg @ h @ pg + np.trace(pm @ h @ pm @ s) / b)
    assert m.expected_improvement(eps, b) == pytest.approx(direct, rel=1e-8)


@given(problems, st.integers(0, 2**32 - 1))
def test_preconditioner_diagonal_dense_and_identity(p, seed):
    g, h, s = p
    base = QuadraticModel(g, h, s)
    d = np.random.default_rng(seed).uniform(0.1, 10.0, size=len(g))
    a, b = base.preconditioned(d), base.preconditioned(np.diag(d))
    ident = base.preconditioned(np.ones(len(g)))
    for key in ("b_noise", "b_simple", "eps_max", "dl_max"):
        assert getattr(a, key) == pytest.approx(getattr(b, key), rel=1e-8, abs=1e-14)
        assert getattr(ident, key) == pytest.approx(getattr(base, key), rel=1e-12, abs=1e-14)
    # P = c I only rescales the learning rate
    c = 3.0
    scaled = base.preconditioned(np.full(len(g), c))
    assert scaled.b_noise == pytest.approx(base.b_noise, rel=1e-12)
    assert scaled.eps_max == pytest.approx(base.eps_max / c, rel=1e-12)


def test_preconditioned_monte_carlo():
    rng = np.random.default_rng(99)
    g, h, s = random_problem(3, 3)
    pm = spd(np.random.default_rng(5), 3)
    m = QuadraticModel(g, h, s).preconditioned(pm)
    batch, draws = 8, 20000
    eps = 1.2 * m.eps_opt(batch)
    g_est = g + rng.normal(size=(draws, batch, 3)).mean(axis=1) @ np.linalg.cholesky(s).T
    step = g_est @ pm  # P G_est (P symmetric)
    decrease = eps * step @ g - 0.5 * eps**2 * np.einsum("ij,jk,ik->i", step, h, step)
    se = decrease.std(ddof=1) / np.sqrt(draws)
    assert abs(decrease.mean() - m.expected_improvement(eps, batch)) < 4 * se  # see above


def test_newton_preconditioner():
    g, h, s = random_problem(11, 4)
    m = QuadraticModel(g, h, s).preconditioned(np.linalg.inv(h))
    # P = H^{-1}: the infinite-batch optimal step is the Newton step, eps_max = 1
    assert m.eps_max == pytest.approx(1.0, rel=1e-9)


# --- momentum ---------------------------------------------------------------------------


@given(problems, batch_sizes, st.floats(0.0, 0.99))
def test_momentum_uses_effective_step(p, b, mom):
    m = QuadraticModel(*p)
    raw = m.eps_opt(b, momentum=mom)
    assert effective_learning_rate(raw, mom) == pytest.approx(m.eps_opt(b), rel=1e-12)
    assert m.expected_improvement(raw, b, momentum=mom) == pytest.approx(m.dl_opt(b), rel=1e-10)
    assert eps_opt(b, m.eps_max, m.b_noise, momentum=mom) == pytest.approx(raw, rel=1e-14)


@given(st.floats(1e-4, 1e-2), st.floats(0.0, 0.95))
def test_heavy_ball_slow_mode_contracts_like_effective_step(frac, mom):
    """Heavy ball on a 1-D quadratic: the slow root of z² − (1 + m − x) z + m = 0, x = εh.

    v ← m v + h θ, θ ← θ − ε v is linear with that characteristic polynomial; solving
    it order by order, the root near 1 is 1 − x/(1−m) − m x²/(1−m)³ + O(x³): plain GD
    with ε/(1−m) as long as x ≪ (1−m)² (here x = frac·(1−m)², frac ≤ 1e-2).
    """
    x = frac * (1.0 - mom) ** 2
    roots = np.roots([1.0, -(1.0 + mom - x), mom])
    slow = roots[np.argmax(np.abs(roots))].real
    eff = x / (1.0 - mom)
    # the second-order term bounds the error; factor 2 covers the O(x³) remainder
    assert abs(slow - (1.0 - eff)) <= 2 * mom * x**2 / (1.0 - mom) ** 3 + 1e-15
    # and the naive step x (no momentum correction) is clearly worse when m matters
    if mom > 0.3:
        assert abs(slow - (1.0 - x)) > 10 * abs(slow - (1.0 - eff))


# --- bad input -----------------------------------------------------------------------

G, H, S = np.array([1.0, 2.0]), np.array([[2.0, 0.5], [0.5, 1.0]]), np.eye(2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"hessian": np.ones((2, 3))}, "hessian must be a square matrix"),
        ({"hessian": np.array([[1.0, 2.0], [0.0, 1.0]])}, "hessian must be symmetric"),
        ({"noise_cov": np.array([[1.0, 0.0], [0.0, -1.0]])}, "noise_cov must be positive semi"),
        ({"noise_cov": np.array([1.0, -1.0])}, "noise_cov must be >= 0"),
        ({"noise_cov": np.ones((2, 3))}, "noise_cov must be a square matrix"),
        ({"gradient": np.zeros(2)}, "gradient must not be zero"),
        ({"hessian": -np.eye(2)}, "GᵀHG must be > 0"),
        ({"hessian": np.array([[1.0, 0.0], [0.0, -1.0]]), "gradient": [0.0, 1.0]}, "GᵀHG"),
        ({"gradient": [1.0, np.nan]}, "gradient must be finite"),
        ({"hessian": np.array([[np.nan, 0], [0, 1.0]])}, "hessian must be finite"),
        ({"noise_cov": np.array([np.inf, 1.0])}, "noise_cov must be finite"),
        ({"gradient": [1.0, 2.0, 3.0]}, "does not match gradient of length 3"),
        ({"gradient": np.ones((2, 2))}, "gradient must have 1 dimension"),
    ],
)
def test_bad_model_inputs(kwargs, match):
    args = {"gradient": G, "hessian": H, "noise_cov": S} | kwargs
    with pytest.raises(ValueError, match=match):
        QuadraticModel(**args)


def test_bad_batch_and_other_arguments():
    m = QuadraticModel(G, H, S)
    for bad in (0.0, -1.0, np.nan, [1.0, 0.0]):
        with pytest.raises(ValueError, match="batch_size"):
            m.eps_opt(bad)
        with pytest.raises(ValueError, match="batch_size"):
            m.expected_improvement(0.1, bad)
        with pytest.raises(ValueError, match="batch_size"):
            eps_opt(bad, 1.0, 1.0)
    with pytest.raises(ValueError, match="eps must be >= 0"):
        m.expected_improvement(-0.1, 2.0)
    with pytest.raises(ValueError, match="momentum must be in"):
        m.eps_opt(2.0, momentum=1.0)
    with pytest.raises(ValueError, match="b_noise must be >= 0"):
        eps_opt(2.0, 1.0, -1.0)
    with pytest.raises(ValueError, match="dl_max must be > 0"):
        dl_opt(2.0, 0.0, 1.0)
    with pytest.raises(TypeError, match="gradient must be numeric"):
        QuadraticModel("abc", H, S)
    with pytest.raises(ValueError, match="batch_size must be <= dataset_size"):
        QuadraticModel(G, H, S, dataset_size=4).eps_opt(5)
    with pytest.raises(TypeError, match="dataset_size must be an integer"):
        QuadraticModel(G, H, S, dataset_size=4.5)
    with pytest.raises(ValueError, match="tr\\(HΣ\\) must be >= 0"):
        QuadraticModel.from_scalars(g2=1.0, ghg=1.0, trace_sigma=1.0, trace_h_sigma=-1.0)
    with pytest.raises(ValueError, match="g2 must be finite"):
        QuadraticModel.from_scalars(g2=np.nan, ghg=1.0, trace_sigma=1.0, trace_h_sigma=1.0)


def test_bad_eigenbasis_and_preconditioner():
    lam, v = np.linalg.eigh(H)
    with pytest.raises(ValueError, match="eigenvectors must be orthonormal"):
        QuadraticModel.from_eigenbasis(lam, 2 * v, G, S)
    with pytest.raises(ValueError, match="eigenvectors must have shape"):
        QuadraticModel.from_eigenbasis(lam, np.eye(3), G, S)
    m = QuadraticModel(G, H, S)
    with pytest.raises(ValueError, match="preconditioner must be positive definite"):
        m.preconditioned(np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="preconditioner must be positive definite"):
        m.preconditioned(np.array([[1.0, 0.0], [0.0, -1.0]]))
    with pytest.raises(ValueError, match="preconditioner must be symmetric"):
        m.preconditioned(np.array([[1.0, 1.0], [0.0, 1.0]]))
    scalars = QuadraticModel.from_scalars(g2=1.0, ghg=1.0, trace_sigma=1.0, trace_h_sigma=1.0)
    with pytest.raises(ValueError, match="built from scalars"):
        scalars.preconditioned(np.ones(2))


@given(
    st.floats(1e-3, 1e6),
    st.floats(1e-6, 1e2),
    st.floats(1e-2, 1e6),
)
def test_surge_eps_opt_peaks_at_b_noise_and_is_log_symmetric(b, eps_max, b_noise):
    """Independent check (sympy): the maximum over B sits at B_noise with value eps_max,
    and eps_opt(B_noise*r) == eps_opt(B_noise/r)."""
    from empirical_batch.theory import surge_eps_opt

    assert surge_eps_opt(b_noise, eps_max, b_noise) == pytest.approx(eps_max, rel=1e-12)
    assert surge_eps_opt(b, eps_max, b_noise) <= eps_max * (1 + 1e-12)
    r = b / b_noise
    assert surge_eps_opt(b_noise * r, eps_max, b_noise) == pytest.approx(
        surge_eps_opt(b_noise / r, eps_max, b_noise), rel=1e-9
    )


def test_surge_eps_opt_against_sympy():
    import sympy as sp

    from empirical_batch.theory import surge_eps_opt

    B, Bn, e = sp.symbols("B B_n e", positive=True)
    expr = e / (sp.Rational(1, 2) * (sp.sqrt(Bn / B) + sp.sqrt(B / Bn)))
    crit = sp.solve(sp.diff(expr, B), B)
    assert crit == [Bn]
    for b, bn in [(1.0, 7.0), (300.0, 20.0), (5.5, 5.5)]:
        ref = float(expr.subs({B: b, Bn: bn, e: 0.3}))
        assert surge_eps_opt(b, 0.3, bn) == pytest.approx(ref, rel=1e-12)
    with pytest.raises(ValueError, match="b_noise"):
        surge_eps_opt(1.0, 1.0, 0.0)


# --- the closed forms at the ends of the float range ------------------------------------

_far = st.floats(1e-320, 1e308, allow_subnormal=True)


def _exact_over_one_plus(scale, b, n):
    """scale·B/(B + B_noise) in exact rational arithmetic, rounded once."""
    from fractions import Fraction

    return float(Fraction(scale) * Fraction(b) / (Fraction(b) + Fraction(n)))


def test_eps_opt_does_not_underflow_where_the_exact_value_is_a_float():
    """ε_opt = ε_max/(1 + B_noise/B) (eq. 2.6) at B = 1e-10, ε_max = 100, B_noise = 1e300
    is exactly 1e-308 (B_noise/B overflows on the way); at B = 1e-300, ε_max = 1e300,
    B_noise = 1e10 it is 1e-10; eq. 2.7's ΔL_opt has the same form."""
    assert eps_opt(1e-10, eps_max=1e2, b_noise=1e300) == _exact_over_one_plus(1e2, 1e-10, 1e300)
    assert eps_opt(1e-10, eps_max=1e2, b_noise=1e300) > 0
    assert eps_opt(1e-300, eps_max=1e300, b_noise=1e10) == pytest.approx(1e-10, rel=1e-15)
    assert dl_opt(1e-10, dl_max=1e2, b_noise=1e300) == _exact_over_one_plus(1e2, 1e-10, 1e300)
    assert eps_opt(1e308, eps_max=1.0, b_noise=1e308) == 0.5


@given(_far, st.floats(1e-300, 1e300), _far)
def test_eps_opt_and_surge_against_exact_arithmetic(b, e, n):
    """eps_opt and surge_eps_opt within a few units in the last place of the exact value
    (rationals; the surge law's square root in 60-digit decimals) over the whole float
    range: nothing lost to an intermediate overflow or underflow."""
    from decimal import Decimal, getcontext

    from empirical_batch.theory import surge_eps_opt

    tiny = 5e-324 * 4  # a few subnormal steps: the exact value itself is rounded there
    want = _exact_over_one_plus(e, b, n)
    assert eps_opt(b, eps_max=e, b_noise=n) == pytest.approx(want, rel=1e-14, abs=tiny)
    getcontext().prec = 60
    db, de, dn = Decimal(b), Decimal(e), Decimal(n)
    surge = float(2 * de * (db * dn).sqrt() / (db + dn))
    assert surge_eps_opt(b, eps_max=e, b_noise=n) == pytest.approx(surge, rel=1e-14, abs=tiny)


def test_quadratic_model_eps_opt_does_not_underflow():
    """QuadraticModel's eq. 2.6/2.7 (with and without the finite-data correction
    1/B - 1/D) through the same form as eps_opt: B_noise = 1e300 at B = 1e-10 gives
    ε_max·1e-310 exactly, not 0."""
    from fractions import Fraction

    m = QuadraticModel([1.0], [[1.0]], [[1e300]])
    assert m.b_noise == 1e300 and m.eps_max == 1.0
    assert m.eps_opt(1e-10) == _exact_over_one_plus(1.0, 1e-10, 1e300) > 0
    assert m.dl_opt(1e-10) == _exact_over_one_plus(m.dl_max, 1e-10, 1e300) > 0
    finite = QuadraticModel([1.0], [[1.0]], [[1e300]], dataset_size=10)
    b_eff = 1 / (Fraction(1, 5) - Fraction(1, 10))  # 10
    assert finite.eps_opt(5.0) == pytest.approx(float(b_eff / (b_eff + Fraction(1e300))),
                                                rel=1e-15)
    assert finite.eps_opt(10.0) == 1.0  # B = D: the exact gradient
