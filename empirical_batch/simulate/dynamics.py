r"""Exact expected dynamics of `NoisyQuadratic`: second moments and expected loss.

Plain SGD has the closed-form geometric series of the module docstring of
`empirical_batch.simulate.quadratic` (O(dims) for any step); heavy-ball momentum
and an EMA of the iterates are the linear recursion on per-direction second-moment
matrices documented on `NoisyQuadratic`, advanced by repeated squaring of its affine
map. The functions take the problem as their first argument; the methods of
`NoisyQuadratic` call them.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .._validate import as_array, check_positive, scalar_or_array
from ..errors import InputError
from ..params import validate_params
from .powers import Dtype, table_parts
from .problem import QuadraticProblem

CHUNK = 1 << 19
"""Elements (configurations x dims) handled at once: bounded memory."""


def check_steps(steps, name="steps") -> np.ndarray:
    k = as_array(steps, name)
    if np.any(k < 0) or np.any(k != np.floor(k)):
        raise InputError(f"{name} must be integers >= 0, got {k.ravel()[0]!r}")
    return k


def lr_and_batch(lr, batch_size) -> tuple[np.ndarray, np.ndarray]:
    """Validated arrays of learning rates and batch sizes (both > 0)."""
    return check_positive(lr, "lr"), check_positive(batch_size, "batch_size")


def plain_terms(problem: QuadraticProblem, a, b):
    """log rho, q and 1 - rho for broadcast arrays a, b (shape (..., 1))."""
    x = a * problem.update_curvature  # a * p h
    with np.errstate(divide="ignore"):
        logrho = 2.0 * np.log(np.abs(1.0 - x))
    q = a * a * problem.update_noise / b
    one_minus = x * (2.0 - x)  # 1 - rho without cancellation
    return logrho, q, one_minus


def plain_moment(problem: QuadraticProblem, a, b, k):
    logrho, q, one_minus = plain_terms(problem, a, b)
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        rk = np.where(k == 0, 1.0, np.exp(k * logrho))
        geo = np.where(one_minus == 0, k, -np.expm1(k * logrho) / one_minus)
        geo = np.where(k == 0, 0.0, geo)
        m = rk * problem.init + np.where(q == 0, 0.0, q * geo)
    return m


def noise_batch(problem: QuadraticProblem, b: np.ndarray) -> np.ndarray:
    r"""The batch size the noise sees: :math:`B`, or with a finite pool of :math:`D`
    examples sampled without replacement, :math:`B_{eff} = 1/(1/B - 1/D) = BD/(D - B)`
    (the batch-mean variance is :math:`c(1/B - 1/D)`; ``inf`` at :math:`B = D`)."""
    d = problem.dataset_size
    if d is None:
        return b
    if np.any(b > d):
        raise InputError(f"batch_size must be <= dataset_size={d} when sampling without "
                         f"replacement, got {float(np.max(b))!r}")
    with np.errstate(divide="ignore"):
        return np.where(b >= d, np.inf, b * d / np.maximum(d - b, 1e-300))


def chunked(problem: QuadraticProblem, lr, batch_size, steps, fn):
    """Broadcast (lr, B, steps), apply fn(a, b, k) -> (..., d) chunk-wise (``b`` is the
    noise's batch size, `noise_batch`)."""
    a, b = lr_and_batch(lr, batch_size)
    b = noise_batch(problem, b)
    k = check_steps(steps)
    shape = np.broadcast_shapes(a.shape, b.shape, k.shape)
    af, bf, kf = (np.broadcast_to(x, shape).ravel() for x in (a, b, k))
    n = af.size
    rows = max(1, CHUNK // problem.dims)
    outs = []
    for s in range(0, n, rows):
        sl = slice(s, s + rows)
        outs.append(fn(af[sl, None], bf[sl, None], kf[sl, None]))
    res = np.concatenate(outs, axis=0) if outs else np.empty((0,))
    return res.reshape(shape + res.shape[1:])


def plain_split(problem: QuadraticProblem, a, b):
    """L_inf, weights w_i, log rho_i and convergence flag for (n, 1) arrays."""
    logrho, q, one_minus = plain_terms(problem, a, b)
    act = problem.active
    constant = (one_minus == 0) & (q == 0)  # rho == 1 and no noise: m stays m0
    bad = ((one_minus < 0) | ((one_minus == 0) & (q > 0))) & act
    converges = ~bad.any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        m_inf = np.where(constant, problem.init, q / np.where(one_minus > 0, one_minus, 1.0))
    m_inf = np.where(act, m_inf, 0.0)
    h = problem.curvature
    l_inf = 0.5 * np.einsum("nd,d->n", m_inf, h)
    w = np.where(constant | ~act, 0.0, 0.5 * h * (problem.init - m_inf))
    logrho = np.where(one_minus > 0, logrho, -np.inf)
    return l_inf, w, logrho, converges


def state_dim(problem: QuadraticProblem) -> int:
    return 1 + (problem.momentum > 0) + (problem.ema is not None)


def loss_index(problem: QuadraticProblem) -> int:
    """Index into vec(S) of the second moment whose loss is reported."""
    n = state_dim(problem)
    j = n - 1 if problem.ema is not None else 0
    return j * n + j


def linear_system(problem: QuadraticProblem, a, b):
    """A (..., d, n, n), noise vector bvec (..., d, n) and per-direction variance."""
    beta, g = problem.momentum, problem.ema
    n = state_dim(problem)
    shape = np.broadcast_shapes(a.shape, b.shape, problem.update_curvature.shape)
    u = 1.0 + beta - a * problem.update_curvature
    u = np.broadcast_to(u, shape)
    A = np.zeros((*shape, n, n))
    bv = np.zeros((*shape, n))
    A[..., 0, 0] = u
    bv[..., 0] = -np.broadcast_to(a, shape)
    j = 1
    if beta > 0:
        A[..., 0, 1] = -beta
        A[..., 1, 0] = 1.0
        j = 2
    if g is not None:
        A[..., j, :] = (1.0 - g) * A[..., 0, :]
        A[..., j, j] = g
        bv[..., j] = (1.0 - g) * bv[..., 0]
    var = np.broadcast_to(problem.update_noise / b, shape)
    return A, bv, var


def affine_map(problem: QuadraticProblem, a, b):
    """Augmented (m+1)x(m+1) matrix of vec S -> (A⊗A) vec S + var vec(bbᵀ)."""
    A, bv, var = linear_system(problem, a, b)
    n = A.shape[-1]
    m = n * n
    kron = np.einsum("...ij,...kl->...ikjl", A, A).reshape(*A.shape[:-2], m, m)
    q = (var[..., None, None] * bv[..., :, None] * bv[..., None, :]).reshape(
        *A.shape[:-2], m
    )
    M = np.zeros((*A.shape[:-2], m + 1, m + 1))
    M[..., :m, :m] = kron
    M[..., :m, m] = q
    M[..., m, m] = 1.0
    return M, n


def initial_state(problem: QuadraticProblem, n):
    return np.concatenate(
        [np.repeat(problem.init[:, None], n * n, axis=1), np.ones((problem.dims, 1))], axis=1
    )


def linear_moments(problem: QuadraticProblem, a, b, k):
    """vec(S_k) per direction, shape (rows, d, n*n), by repeated squaring."""
    M, n = affine_map(problem, a, b)  # (rows, d, m+1, m+1)
    k = np.broadcast_to(k, (*M.shape[:1], 1))[:, 0].astype(np.int64)
    v = np.broadcast_to(initial_state(problem, n), M.shape[:-1]).copy()  # (rows, d, m+1)
    P = M
    kk = k.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        while np.any(kk > 0):
            bit = (kk & 1).astype(bool)
            if bit.any():
                v[bit] = np.einsum("...ij,...j->...i", P[bit], v[bit])
            kk >>= 1
            if np.any(kk > 0):
                P = P @ P
    return v[..., : n * n]


def linear_stationary(problem: QuadraticProblem, a, b) -> float:
    M, n = affine_map(problem, a[None, :], b[None, :])
    M = M[0]
    m = n * n
    A, _, _ = linear_system(problem, a[None, :], b[None, :])
    rad = np.max(np.abs(np.linalg.eigvals(A[0])), axis=-1)
    if np.any((rad >= 1.0) & problem.active):
        return np.inf
    K, q = M[:, :m, :m], M[:, :m, m]
    s = np.linalg.solve(np.eye(m) - K, q[..., None])[..., 0]
    return float(0.5 * problem.curvature @ s[:, loss_index(problem)])


def second_moment(problem: QuadraticProblem, lr, batch_size, steps) -> np.ndarray:
    """Exact E[theta_i(k)^2]: see `NoisyQuadratic.second_moment`."""
    if problem.is_plain:
        return chunked(problem, lr, batch_size, steps, partial(plain_moment, problem))
    return chunked(problem,
        lr, batch_size, steps, lambda a, b, k: linear_moments(problem, a, b, k)[..., 0]
    )


def plain_loss_parts(problem: QuadraticProblem, a: float, k: np.ndarray, *, rows: int = 0,
                     dtype: str = "float64", method: str = "auto", cache: dict | None = None):
    r"""The two sums of plain SGD's expected loss at one rate, affine in $1/B$.

    With $x_i = a\hat h_i$, $\rho_i = (1 - x_i)^2$ and
    $g_i(k) = (1 - \rho_i^k)/(1 - \rho_i)$ ($= k$ at $\rho_i = 1$),

    $$
    E[L](k) = \underbrace{\tfrac12\sum_i h_i \rho_i^k m_i(0)}_{P(a, k)}
    + \frac1B\,\underbrace{\tfrac12\sum_i h_i a^2 \hat c_i\, g_i(k)}_{Q(a, k)},
    $$

    so one pass over the directions per (rate, step) serves every batch size, and the
    per-direction factors of one rate are shared by all its steps. ``k`` is 1-D (positive
    steps); returns ``P, Q`` of its shape. ``method="exp"``: one ``exp`` and one
    ``expm1`` per direction and step, ``rows`` steps at a time (default: ``CHUNK``
    elements); ``"table"``: the powers composed from a table of squarings
    (`empirical_batch.simulate.powers`), a few multiplications per direction and step;
    ``"auto"`` takes the table from ``TABLE_MIN_STEPS`` steps on, and always for
    ``dtype="float32"`` (only the table has it; ``cache`` keeps its buffers for the
    next rate). The two agree to about $10^{-13}$
    relative; the terms are those of `plain_moment` up to rounding (powers below the
    smallest normal float count as 0)."""
    h = problem.curvature
    x = a * problem.update_curvature
    r1 = 1.0 - x
    with np.errstate(divide="ignore"):
        logrho = 2.0 * np.log(np.abs(r1))  # 0 where rho = 1
    one_minus = x * (2.0 - x)  # 1 - rho without cancellation
    noise = a * a * problem.update_noise
    flat = one_minus == 0  # rho = 1: g(k) = k
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(noise == 0, 0.0, 0.5 * h * noise / np.where(flat, 1.0, one_minus))
    w_flat = float(np.where(flat & (noise != 0), 0.5 * h * noise, 0.0).sum())
    w_init = 0.5 * h * problem.init
    if method == "table" or (method == "auto" and (k.size >= TABLE_MIN_STEPS
                                                     or dtype != "float64")):
        p, q = table_parts(logrho, r1, w, w_init, k, dtype=dtype, elements=8 * CHUNK,
                           cache=cache)
        return p, q + k * w_flat
    p, q = np.empty(k.size), np.empty(k.size)
    rows = rows or max(1, CHUNK // problem.dims)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for s in range(0, k.size, rows):
            kk = k[s : s + rows]
            e = np.multiply.outer(kk, logrho)
            # rho^k below the smallest normal double is taken as 0: exp's subnormal
            # results are many times slower to compute and weigh nothing in the loss
            p[s : s + rows] = np.einsum("kd,d->k", np.exp(np.where(e < _LOG_TINY, -np.inf, e)),
                                        w_init)
            q[s : s + rows] = kk * w_flat - np.einsum("kd,d->k", np.expm1(e), w)
    return p, q


TABLE_MIN_STEPS = 4
"""From this many steps of one rate, `plain_loss_parts` builds the table of squarings:
its sort and levels cost about as much as three steps of exponentials."""

_LOG_TINY = float(np.log(np.finfo(float).tiny))


def _plain_expected_loss(problem: QuadraticProblem, a, b, k,
                         dtype: str = "float64") -> np.ndarray:
    """Plain SGD's expected loss on broadcast (a, b, k) from `plain_loss_parts`: the
    sums over directions once per distinct (rate, step) pair, in chunks of bounded
    memory; each batch size then costs one multiply-add."""
    shape = np.broadcast_shapes(a.shape, b.shape, k.shape)
    af = np.broadcast_to(a, shape).ravel()
    kf = np.broadcast_to(k, shape).ravel()
    inv_b = 1.0 / np.broadcast_to(b, shape).ravel()
    pairs, inverse = np.unique(np.stack([af, kf], axis=1), axis=0, return_inverse=True)
    p = np.full(len(pairs), problem.initial_loss())  # step 0: the initial loss
    q = np.zeros(len(pairs))
    later = np.flatnonzero(pairs[:, 1] > 0)
    rates, starts = np.unique(pairs[later, 0], return_index=True)
    ends = [*starts[1:], later.size][: rates.size]
    cache: dict = {}  # the table's buffers, shared by the rates
    for rate, lo, hi in zip(rates, starts, ends, strict=True):
        idx = later[lo:hi]
        p[idx], q[idx] = plain_loss_parts(problem, float(rate), pairs[idx, 1], dtype=dtype,
                                          cache=cache)
    inverse = inverse.ravel()
    with np.errstate(over="ignore", invalid="ignore"):
        noise = np.where(inv_b == 0, 0.0, q[inverse] * inv_b)  # B_eff = inf: no noise
        return (p[inverse] + noise).reshape(shape)


@validate_params(dtype=Dtype)
def expected_loss(problem: QuadraticProblem, lr, batch_size, steps, dtype: Dtype = "float64"):
    """Exact expected loss: see `NoisyQuadratic.expected_loss`. Memory is bounded by
    ``CHUNK`` elements of scratch plus the result, whatever the grid. ``dtype="float32"``
    (plain SGD only) keeps the powers of `empirical_batch.simulate.powers` in single
    precision."""
    h = problem.curvature
    if problem.is_plain:
        a, b = lr_and_batch(lr, batch_size)
        loss = _plain_expected_loss(problem, a, noise_batch(problem, b), check_steps(steps),
                                    dtype)
        return scalar_or_array(loss)
    if dtype != "float64":
        raise InputError(f"dtype={dtype!r} is for plain SGD; with momentum or EMA the exact "
                         "loss is computed in float64 (pass dtype='float64')")
    idx = loss_index(problem)

    def fn(a, b, k):  # one loss per configuration: the moments never pile up
        return 0.5 * (linear_moments(problem, a, b, k)[..., idx] @ h)

    with np.errstate(over="ignore", invalid="ignore"):
        loss = chunked(problem, lr, batch_size, steps, fn)
    return scalar_or_array(loss)


def stationary_loss(problem: QuadraticProblem, lr, batch_size):
    """Limit of the expected loss: see `NoisyQuadratic.stationary_loss`."""
    a, b = lr_and_batch(lr, batch_size)
    b = noise_batch(problem, b)
    shape = np.broadcast_shapes(a.shape, b.shape)
    af = np.broadcast_to(a, shape).ravel()[:, None]
    bf = np.broadcast_to(b, shape).ravel()[:, None]
    if problem.is_plain:
        l_inf, _, _, converges = plain_split(problem, af, bf)
        out = np.where(converges, l_inf, np.inf)
    else:
        out = np.array([linear_stationary(problem, x, y) for x, y in zip(af, bf, strict=True)])
    return scalar_or_array(out.reshape(shape))
