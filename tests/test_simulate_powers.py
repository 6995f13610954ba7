"""The table of squarings (`empirical_batch.simulate.powers`) against the exponentials, and
the single-precision sweep against double precision."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch.errors import InputError
from empirical_batch.simulate import NoisyQuadratic, dynamics, log_steps, powers, simulate_sweep


@st.composite
def problems(draw, max_dims=40):
    """Curvatures over six decades, noise and init with zeros, a preconditioner."""
    d = draw(st.integers(1, max_dims))
    h = 10.0 ** np.array(draw(st.lists(st.floats(-6.0, 0.7), min_size=d, max_size=d)))
    c = np.array(draw(st.lists(st.sampled_from([0.0, 1e-3, 0.3, 1.0, 2.5]), min_size=d,
                               max_size=d)))
    m0 = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=d,
                                max_size=d)))
    m0[0] = max(m0[0], 1.0)
    return NoisyQuadratic(h, c, m0, precondition=draw(st.sampled_from([0.0, 0.5, 1.0])))


def _steps(draw_max: int, n_points: int) -> np.ndarray:
    return log_steps(draw_max, n_points)[1:].astype(float)


@settings(max_examples=60, deadline=None)
@given(problems(), st.floats(0.001, 1.2), st.integers(10, 10**8), st.integers(4, 40))
def test_table_equals_exponentials(nq, lr_frac, max_steps, n_points):
    """P and Q from the table of squarings equal those from exp/expm1 of k log rho within
    1e-12 relative (rates past the divergence limit included: inf and nan alike)."""
    a = lr_frac * nq.max_stable_lr
    ks = _steps(max_steps, n_points)
    with np.errstate(all="ignore"):
        got = dynamics.plain_loss_parts(nq, a, ks, method="table")
        ref = dynamics.plain_loss_parts(nq, a, ks, method="exp")
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("x", [1.0, 2.0, 0.5, 1.5, 2.5])
def test_table_at_the_special_rates(x):
    """a h = 1 (rho = 0: the power is 0 from the first step), a h = 2 (rho = 1: the noise
    adds up linearly), and past 2 (rho > 1: the loss overflows to inf as exp's does)."""
    nq = NoisyQuadratic([1.0, 0.25, 1e-3], noise=[1.0, 0.5, 0.0], init=[1.0, 2.0, 1.0])
    ks = np.array([1.0, 2.0, 3.0, 5.0, 8.0, 100.0, 2.0**40 + 3.0])
    with np.errstate(all="ignore"):
        got = dynamics.plain_loss_parts(nq, x, ks, method="table")
        ref = dynamics.plain_loss_parts(nq, x, ks, method="exp")
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-300)


def test_table_blocks_and_step_order_do_not_matter():
    """Blocks of 1024 directions and steps in any order give the sums of one block."""
    rng = np.random.default_rng(3)
    nq = NoisyQuadratic(10.0 ** rng.uniform(-5, 0, 5000), noise=1.0, init=1.0)
    x = 0.7 * nq.update_curvature
    r1 = 1.0 - x
    w0 = 0.5 * nq.curvature * nq.init
    w = 0.5 * nq.curvature * 0.49 * nq.update_noise / (x * (2.0 - x))
    ks = rng.permutation(_steps(10**6, 30))
    args = (2.0 * np.log(np.abs(r1)), r1, w, w0)
    small = powers.table_parts(*args, ks, elements=1)
    whole = powers.table_parts(*args, np.sort(ks), elements=1 << 30)
    for s, g in zip(small, whole, strict=True):
        np.testing.assert_allclose(s, g[np.argsort(np.argsort(ks))], rtol=1e-13)


@settings(max_examples=40, deadline=None)
@given(problems(max_dims=300), st.lists(st.floats(0.001, 1.05), min_size=1, max_size=4),
       st.integers(10, 10**7))
def test_float32_within_its_stated_bound(nq, lr_fracs, max_steps):
    """Single precision stays within ``F32_REL_ERR`` of double wherever the loss is a
    float32-sized multiple of the initial loss (1e-30 to 1e30 of it) and no power rho_i^k
    is past the float32 range (a direction diverging, with or without weight: inf or nan
    sooner than in double)."""
    lrs = nq.max_stable_lr * np.array(lr_fracs)
    bs, ks = np.array([1.0, 7.0, 256.0]), log_steps(max_steps, 30).astype(float)
    grid = (lrs[None, :, None], bs[:, None, None], ks[None, None, :])
    with np.errstate(all="ignore"):
        l64 = np.asarray(dynamics.expected_loss(nq, *grid))
        l32 = np.asarray(dynamics.expected_loss(nq, *grid, dtype="float32"))
        log_rho = 2.0 * np.log(np.abs(1.0 - np.multiply.outer(lrs, nq.update_curvature)))
    l0 = nq.initial_loss()
    in_range = np.multiply.outer(log_rho.max(axis=1), ks) < np.log(np.finfo(np.float32).max)
    ok = np.isfinite(l64) & (l64 >= 1e-30 * l0) & (l64 <= 1e30 * l0) & in_range[None]
    rel = np.abs(l32[ok] - l64[ok]) / l64[ok]
    assert rel.size == 0 or rel.max() <= powers.F32_REL_ERR


def test_float32_sweep_and_dtype_errors():
    nq = NoisyQuadratic.zhang(2000)
    kw = dict(batch_sizes=[1, 64], learning_rates=[0.1, 1.5], max_steps=10**5, n_points=20)
    f64 = simulate_sweep(nq, **kw).frame["metric"].to_numpy()
    f32 = simulate_sweep(nq, **kw, dtype="float32").frame["metric"].to_numpy()
    np.testing.assert_allclose(f32, f64, rtol=powers.F32_REL_ERR)
    with pytest.raises(InputError, match=r"dtype must be one of 'float64', 'float32', got 'half'"):
        simulate_sweep(nq, **kw, dtype="half")
    with pytest.raises(InputError, match="dtype"):
        simulate_sweep(nq, **kw, method="monte_carlo", dtype="float16")
    with pytest.raises(InputError, match="dtype='float32' is for plain SGD"):
        simulate_sweep(NoisyQuadratic.zhang(20, momentum=0.9), **kw, dtype="float32")


def test_table_with_more_steps_than_a_group():
    """Past ``STEP_GROUP`` steps the table is built per group: the same sums."""
    nq = NoisyQuadratic.zhang(3000)
    ks = np.arange(1.0, 2.5 * powers.STEP_GROUP)
    got = dynamics.plain_loss_parts(nq, 0.9, ks, method="table")
    ref = dynamics.plain_loss_parts(nq, 0.9, ks, method="exp")
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-12)
