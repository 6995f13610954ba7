r"""Plain SGD's expected loss at many steps of one learning rate, by a table of squarings.

With $x_i = a\hat h_i$, $r_i = 1 - x_i$ (rounded as the other paths round it) and
$\rho_i = r_i^2$, the expected second moment after $k$ steps is

$$
E[\theta_i(k)^2] = \rho_i^k\, m_i(0) + \frac{a^2\hat c_i}{B}\,\frac{1-\rho_i^k}{1-\rho_i},
$$

(the recursion $E[\theta_i(k+1)^2] = (1 - a\hat h_i)^2 E[\theta_i(k)^2] + a^2\hat c_i/B$,
McCandlish et al. 2018, App. A), so the loss is $P(k) + Q(k)/B$ with
$P(k) = \tfrac12\sum_i h_i m_i(0)\rho_i^k$ and
$Q(k) = \tfrac12\sum_i h_i a^2\hat c_i (1-\rho_i^k)/(1-\rho_i)$
(`empirical_batch.simulate.dynamics.plain_loss_parts`). Rather than an exponential and
an ``expm1`` per direction and step, `table_parts` builds, once per rate, the powers
$R_j = \rho^{2^j}$ and $D_j = 1 - \rho^{2^j}$ by

$$
D_0 = (1 - r)(1 + r),\quad R_0 = r^2,\qquad
D_{j+1} = D_j\,(1 + R_j),\quad R_{j+1} = R_j^2\ \ (\text{or } 1 - D_{j+1}
\text{ where } D_{j+1} < \tfrac12),
$$

and composes each step from an earlier logged step $u$ (or none) and the levels of the
remaining bits, $k = k_u + 2^{j_1} + 2^{j_2} + \dots$, with
$\rho^{u+v} = \rho^u\rho^v$ and $1 - \rho^{u+v} = D_u + \rho^u D_v$: a few
multiplications per direction and step (log-spaced steps need one or two), where the
other path takes an ``exp`` and an ``expm1`` of $k\log\rho_i$. Every sum and product has
terms of one sign ($D \ge 0$ and $R \le 1$ while $\rho \le 1$; $D < 0$ and $R > 1$ while
$\rho > 1$), so nothing cancels: $1 - \rho^k$ keeps its relative accuracy where
$\rho^k$ is near 1, as ``expm1`` does. A level's relative error doubles with each
squaring below $\tfrac12$, so it is about $j_{1/2}\,|\log_2 R_j|$ roundings ($j_{1/2}$
the level where $R$ crosses $\tfrac12$): under $3\cdot 10^{-13}$ for every term above
$10^{-30}$ of the largest up to $2^{24}$ steps; the tests hold the two paths within
$10^{-12}$, the benchmark measures $10^{-14}$.

The directions are sorted by $-\log\rho_i$, so each threshold is a prefix: powers
below the smallest normal float count as 0 (as in `plain_loss_parts`; subnormal
products are many times slower), and a direction switches from squaring to
$1 - D$ at $\rho^{2^j} = \tfrac12$. Memory: the table and the steps' powers of one block
of at most ``ROWS`` directions (``elements`` entries at most, then fewer directions).
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

__all__ = ["DTYPES", "F32_REL_ERR", "Dtype", "table_parts"]

Dtype = Literal["float64", "float32"]
"""The precisions of the powers."""
DTYPES = get_args(Dtype)
"""The precisions of the powers: ``float32`` halves their memory and bandwidth."""

F32_REL_ERR = 3e-6
r"""Relative error of the ``float32`` loss against ``float64`` (where the loss lies within
1e-30 to 1e30 of the initial loss): each power is the table's level rounded once to
single precision and then at most ``MAX_CHAIN`` products (or its own bits, fewer than 24
up to 10^7 steps), each one rounding of $2^{-24}$, and the sums add at most about 20
more (pairwise in blocks of ``ROWS``): about $45 \cdot 2^{-24} \approx 2.7 \cdot
10^{-6}$. Measured: at most $3.6 \cdot 10^{-7}$ over 300 random problems (up to 3000
directions, curvatures over six decades, up to $10^7$ steps, rates up to 1.05x the
divergence limit), $3 \cdot 10^{-8}$ to $10^{-7}$ on the Zhang problem."""

_LN2 = float(np.log(2.0))

ROWS = 8192
"""Directions per block at most: a level of the table stays in cache, and a dot product
over a block stays on one thread."""


class _Work:
    """The buffers of one rate, allocated once (fresh pages cost more than the products):
    the table ``R``, ``D`` (levels x rows; built in double, ``R64``, ``D64``, and rounded
    once for single precision), each step's power and complement ``Rs``, ``Ds`` (steps x
    rows), scratch, and a row for the single-precision products."""

    def __init__(self, levels: int, steps: int, rows: int, dtype: str) -> None:
        self.R64, self.D64 = np.empty((2, levels, rows))
        self.scratch64 = np.empty(rows)
        single = dtype != "float64"
        self.R = np.empty((levels, rows), dtype) if single else self.R64
        self.D = np.empty((levels, rows), dtype) if single else self.D64
        self.Rs = np.empty((steps, rows), dtype)
        self.Ds = np.empty((steps, rows), dtype)
        self.scratch = np.empty(rows, dtype) if single else self.scratch64
        self.single = np.empty(rows, dtype) if single else None


def _plan(ks: list[int]) -> list[tuple[int, list[int]]]:
    """For each step (ascending) the earlier step it starts from (-1: the table level of
    its lowest bit) and the table levels multiplied in: the start that leaves the fewest
    products (log-spaced steps need about half the products of their own bits), as long
    as its chain stays within ``MAX_CHAIN`` products (each one rounding)."""
    plan: list[tuple[int, list[int]]] = []
    chain: list[int] = []
    for t, k in enumerate(ks):
        low = (k & -k).bit_length() - 1
        best, rest = -1, k - (1 << low)
        for u in range(max(0, t - 64), t):
            more = (k - ks[u]).bit_count()
            if more < rest.bit_count() + (best == -1) and chain[u] + more <= MAX_CHAIN:
                best, rest = u, k - ks[u]
        bits = [j for j in range(rest.bit_length()) if rest >> j & 1]
        chain.append(len(bits) + (chain[best] if best >= 0 else 0))
        plan.append((best, bits if best >= 0 else [low, *bits]))
    return plan


MAX_CHAIN = 16
"""Products from the table to a step's power at most (or its own bits, if more)."""


def _tables(s, r1, work: _Work, log_tiny: float) -> None:
    """Fill R_j = rho^(2^j) and D_j = 1 - rho^(2^j) for the sorted block, in double; level
    j holds only the directions whose power stays a normal float of the work's precision
    (a prefix of the block), each rounded once to it."""
    R, D, scr = work.R64, work.D64, work.scratch64
    n = int(np.searchsorted(s, -log_tiny, side="right"))
    np.subtract(1.0, r1[:n], out=D[0, :n])
    np.add(1.0, r1[:n], out=scr[:n])
    D[0, :n] *= scr[:n]
    np.multiply(r1[:n], r1[:n], out=R[0, :n])
    for j in range(1, R.shape[0]):
        n = int(np.searchsorted(s, -log_tiny / 2.0**j, side="right"))
        m = min(n, int(np.searchsorted(s, _LN2 / 2.0**j, side="left")))  # rho^(2^j) > 1/2
        np.add(1.0, R[j - 1, :n], out=scr[:n])
        np.multiply(D[j - 1, :n], scr[:n], out=D[j, :n])
        np.subtract(1.0, D[j, :m], out=R[j, :m])
        np.multiply(R[j - 1, m:n], R[j - 1, m:n], out=R[j, m:n])
    if work.R is not R:
        for j in range(R.shape[0]):
            n = int(np.searchsorted(s, -log_tiny / 2.0**j, side="right"))
            np.copyto(work.R[j, :n], R[j, :n], casting="same_kind")
            np.copyto(work.D[j, :n], D[j, :n], casting="same_kind")


def _weighted_sum(x, w, work: _Work) -> float:
    """sum(x * w): in double, BLAS's dot, on one thread as the blocks are short enough
    (``ROWS``; OpenBLAS splits from 10^4 elements, and its threads then wait busy between
    these many short calls); in single precision, the products summed pairwise (BLAS's
    single-precision dot accumulates in single precision, in as few as 32 partial sums)."""
    if work.single is None:
        return float(np.dot(x, w))
    prod = work.single[: x.size]
    np.multiply(x, w, out=prod)
    return float(prod.sum())


def _block_parts(s, r1, w, w0, ks, plan, work: _Work, log_tiny: float, out_p, out_q) -> None:
    """Add one sorted block's sums at every step (ascending ``ks``) to ``out_p``, ``out_q``."""
    _tables(s, r1, work, log_tiny)
    R, D, scr = work.R, work.D, work.scratch
    kf = np.asarray(ks, dtype=float)
    N = np.searchsorted(s, -log_tiny / kf, side="right").tolist()  # rho^k normal
    M = np.searchsorted(s, _LN2 / kf, side="left").tolist()  # rho^k > 1/2
    res: list[tuple[np.ndarray, np.ndarray]] = []
    for t, (u, bits) in enumerate(plan):
        n = N[t]
        m = min(n, M[t])
        if u >= 0:
            r, d = res[u][0][:n], res[u][1][:m]
        else:
            r, d = R[bits[0], :n], D[bits[0], :m]
            bits = bits[1:]
        for j in bits:  # rho^(a+b) = rho^a rho^b, 1 - rho^(a+b) = D_a + rho^a D_b
            np.multiply(D[j, :m], r[:m], out=scr[:m])
            d = np.add(d, scr[:m], out=work.Ds[t, :m])
            r = np.multiply(r, R[j, :n], out=work.Rs[t, :n])
        res.append((r, d))
        out_p[t] += _weighted_sum(r, w0[:n], work)
        # 1 - rho^k: from the table where rho^k > 1/2, else 1 - rho^k (no cancellation);
        # beyond n, rho^k = 0
        out_q[t] += (_weighted_sum(d, w[:m], work) + w[m:].sum()
                     - _weighted_sum(r[m:], w[m:n], work))


def table_parts(logrho, r1, w, w_init, steps, *, dtype: str = "float64",
                elements: int = 1 << 22, cache: dict | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    r"""$\sum_i w^0_i\rho_i^k$ and $\sum_i w_i(1 - \rho_i^k)$ at each step ``k`` of
    ``steps`` (1-D, integers $\ge 1$), for one rate.

    ``logrho`` ($= 2\log|r_i|$), ``r1`` ($= r_i$), ``w`` and ``w_init`` are per direction
    in any order; they are handled in blocks of about ``elements`` entries of the table and
    the steps' powers (the block's directions times twice the levels and steps), the steps
    ``STEP_GROUP`` at a time. ``dtype="float32"`` keeps the powers in single precision
    (the table built and the sums taken in double). ``cache`` (a dict) keeps the buffers
    for the next call of the same size: fresh pages cost more than a small table's
    products. Returns two float64 arrays of the shape of ``steps``.
    """
    p, q = np.zeros(steps.size), np.zeros(steps.size)
    if steps.size == 0:
        return p, q
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.negative(logrho)  # +inf where rho = 0
    order = np.argsort(s, kind="stable")
    s, r1 = s[order], r1[order]
    w, w0 = w[order].astype(dtype), w_init[order].astype(dtype)
    by_step = np.argsort(steps, kind="stable")
    ks = [int(k) for k in steps[by_step]]
    ps, qs = np.zeros(len(ks)), np.zeros(len(ks))
    for g in range(0, len(ks), STEP_GROUP):
        group = slice(g, g + STEP_GROUP)
        _sorted_parts(s, r1, w, w0, ks[group], dtype, elements, cache, ps[group], qs[group])
    p[by_step], q[by_step] = ps, qs
    return p, q


STEP_GROUP = 256
"""Steps handled together (one table, their powers kept for the later ones): memory per
block stays near ``elements`` whatever the number of steps."""


def _sorted_parts(s, r1, w, w0, ks: list[int], dtype: str, elements: int,
                  cache: dict | None, out_p, out_q) -> None:
    """`table_parts` on directions sorted by ``s`` and ascending steps ``ks``."""
    plan = _plan(ks)
    levels = ks[-1].bit_length()
    rows = min(s.size, ROWS, max(1024, elements // (2 * (levels + len(ks)))))
    key = (levels, len(ks), rows, dtype)
    work = cache.get(key) if cache is not None else None
    if work is None:
        work = _Work(levels, len(ks), rows, dtype)
        if cache is not None:
            cache.clear()
            cache[key] = work
    log_tiny = float(np.log(np.finfo(dtype).tiny))
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for lo in range(0, s.size, rows):
            sl = slice(lo, lo + rows)
            _block_parts(s[sl], r1[sl], w[sl], w0[sl], ks, plan, work, log_tiny, out_p, out_q)
