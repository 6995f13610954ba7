r"""Exact first crossing of a sum of decaying exponentials below a target.

For plain SGD on the noisy quadratic the expected loss after :math:`k` steps is

.. math:: L(k) = L_\infty + \sum_i w_i \rho_i^k,\qquad 0 \le \rho_i < 1,

with weights :math:`w_i` of either sign. :func:`first_crossing` returns the exact
smallest integer :math:`k \ge 0` with :math:`L(k) \le T` (``inf`` if there is none).

Method (all vectorised over many runs at once):

1. Split :math:`L = L_\infty + P(k) + N(k)` into the positive-weight part
   :math:`P` (decreasing) and the negative-weight part :math:`N \le 0` (increasing).
   Then :math:`L_\infty + P(k) + N(0) \le L(k) \le L_\infty + P(k)`, two *monotone*
   envelopes; the answer lies between their crossings :math:`k_V \le k^* \le k_U`.
2. A monotone crossing :math:`P(k) \le y` is solved by Newton's method on
   :math:`\log P(k)`, which is convex in :math:`k` (a log-sum-exp of affine
   functions); started left of the root, Newton never overshoots. The integer answer
   is then *verified* by evaluating :math:`P` at :math:`k` and :math:`k-1`; any run
   that fails verification is finished by integer bisection inside a guaranteed
   bracket (the upper end from the slowest mode, :math:`P(k) \le P(0)\rho_{max}^k`).
3. When all weights are :math:`\ge 0` (the usual case: every direction starts above
   its stationary level) :math:`k_V = k_U` and we are done. Otherwise, if
   :math:`L(k_V) > T`, a per-run branch and bound over :math:`[k_V, k_{hi}]` uses the
   lower bound :math:`L_\infty + P(hi) + N(lo)` on each interval and scans short
   intervals exactly, left to right, so the first crossing found is the first one.

Everything is exact up to floating-point evaluation of :math:`L(k)`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["first_crossing"]

_NEG_BIG = -1e4  # stands in for log(0) of a rate: rho**k underflows to 0 for k >= 1
_SCAN = 256  # intervals this short are scanned exactly in branch and bound
# exp() arguments are clipped below at these floors before exponentiating: it avoids
# subnormal numbers, which make the following sums ~100x slower. A clipped term is
# over-counted by at most exp(floor) = 1.8e-35 (float32: the Newton estimate only) or
# 1e-304 (float64) times its weight, which cannot change a comparison of P(k) with a
# target above 1e-280·P(0); smaller targets go to the log-domain path.
# Sums use einsum rather than BLAS (``@``): these products are small and many, and
# a threaded BLAS is slow on them on a busy machine.
_FLOOR32 = np.float32(-80.0)
_FLOOR64 = -700.0
_TINY = 1e-280


def _flush_exp(e: np.ndarray, floor) -> None:
    """In place: e <- exp(max(e, floor))."""
    np.maximum(e, floor, out=e)
    np.exp(e, out=e)


def _logsumexp(t: np.ndarray) -> np.ndarray:
    m = np.max(t, axis=-1)
    fin = np.isfinite(m)
    m0 = np.where(fin, m, 0.0)
    with np.errstate(under="ignore", divide="ignore"):
        s = np.sum(np.exp(t - m0[..., None]), axis=-1)
        return np.where(fin, m0 + np.log(s), -np.inf)


def _log_p(logw: np.ndarray, logrho: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log P(k) for each row; k is an array of shape (n,)."""
    t = logw + k[:, None] * logrho
    return _logsumexp(t)


def _mono_first(logw: np.ndarray, logrho: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Smallest integer k >= 0 with P(k) <= y, P(k) = sum exp(logw + k logrho).

    ``logw`` is -inf for absent terms; ``logrho`` < 0 (use _NEG_BIG for rho = 0).
    Newton runs in float32 (cheap); the integer answer is verified in float64.
    """
    n = y.shape[0]
    out = np.full(n, np.inf)
    has = np.isfinite(logw)
    anyterm = has.any(axis=1)
    # no positive part: P == 0 <= y iff y >= 0
    out[~anyterm & (y >= 0)] = 0.0
    live = anyterm & (y > 0)
    # y == 0 with terms: reached only when all terms have rho == 0, at k = 1
    zero_y = anyterm & (y == 0)
    if zero_y.any():
        allzero = np.all(~has | (logrho <= _NEG_BIG), axis=1)
        out[zero_y & allzero] = 1.0
    idx = np.flatnonzero(live)
    if idx.size == 0:
        return out
    lw, lr = logw[idx], logrho[idx]
    ly = np.log(y[idx])
    lp0 = _logsumexp(lw)
    k = _newton32(lw, lr, ly, lp0)
    kc = np.maximum(np.ceil(k - 1e-9), 0.0)
    kc[lp0 <= ly] = 0.0
    res = _verify(lw, lr, ly, kc, lp0)
    out[idx] = res
    return out


def _newton32(lw, lr, ly, lp0):
    """Approximate root of log P(k) = log y by Newton from k = 0 (float32 sums)."""
    k = np.zeros(ly.shape[0])
    act = np.flatnonzero(lp0 > ly)
    # shift each row so its largest weight is 1: P stays representable in float32
    shift = np.max(lw, axis=1)
    lw32 = (lw - shift[:, None]).astype(np.float32)
    lr32 = lr.astype(np.float32)
    ly_s = ly - shift
    for _ in range(60):
        if act.size == 0:
            break
        t = lr32[act] * k[act, None].astype(np.float32)
        t += lw32[act]
        with np.errstate(under="ignore"):
            np.exp(t, out=t)
        s = t.sum(axis=1, dtype=np.float64)
        t *= lr32[act]
        ds = t.sum(axis=1, dtype=np.float64)
        ok = s > 1e-30  # else float32 underflow: leave to the exact fallback
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.log(s) - ly_s[act]
            step = np.where(ok & (g > 0), -g * s / ds, 0.0)
        k[act] += step
        act = act[ok & (g > 0) & (step > 1e-7 * np.maximum(1.0, k[act]))]
    return k


def _verify(lw, lr, ly, kc, lp0):
    """Exact integer answer near the candidate kc (float64), falling back to bisection."""
    lpk = _log_p(lw, lr, kc)
    km1 = np.maximum(kc - 1.0, 0.0)
    lpm = np.where(kc > 0, _log_p(lw, lr, km1), np.inf)
    good = (lpk <= ly) & (lpm > ly)
    res = np.where(good, kc, np.nan)
    # one step to either side settles most near-misses
    up = ~good & (lpk > ly)
    if up.any():
        u = np.flatnonzero(up)
        ok = _log_p(lw[u], lr[u], kc[u] + 1.0) <= ly[u]
        res[u[ok]] = kc[u[ok]] + 1.0
    down = ~good & (lpk <= ly) & (kc > 0)
    if down.any():
        dn = np.flatnonzero(down)
        ok = (kc[dn] == 1) | (_log_p(lw[dn], lr[dn], np.maximum(kc[dn] - 2.0, 0.0)) > ly[dn])
        res[dn[ok]] = kc[dn[ok]] - 1.0
    bad = np.flatnonzero(np.isnan(res))
    if bad.size:
        res[bad] = _bisect(lw[bad], lr[bad], ly[bad], lp0[bad])
    return res


def _bisect(lw, lr, ly, lp0) -> np.ndarray:
    """Integer bisection with a guaranteed bracket; P(lo) > y, P(hi) <= y."""
    n = ly.shape[0]
    done = lp0 <= ly
    lo = np.zeros(n)
    # slowest mode bound: P(k) <= P(0) * rho_max**k
    lrmax = np.max(np.where(np.isfinite(lw), lr, -np.inf), axis=1)
    hi = np.ceil((ly - lp0) / lrmax) + 1.0
    hi = np.where(done, 0.0, np.maximum(hi, 1.0))
    for _ in range(200):  # the bound is exact in real arithmetic; widen against rounding
        bad = ~done & (_log_p(lw, lr, hi) > ly)
        if not bad.any():
            break
        hi[bad] *= 2.0
    while True:
        act = ~done & (hi - lo > 1)
        if not act.any():
            break
        mid = np.floor((lo + hi) / 2)
        below = _log_p(lw[act], lr[act], mid[act]) <= ly[act]
        a = np.flatnonzero(act)
        hi[a[below]] = mid[a[below]]
        lo[a[~below]] = mid[a[~below]]
    return np.where(done, 0.0, hi)


def _value(l_inf, w, logrho, k):
    """L(k) = L_inf + sum_i w_i rho_i**k for integer k (rows broadcast)."""
    with np.errstate(under="ignore"):
        pw = np.exp(np.multiply.outer(k, logrho) if np.ndim(k) else k * logrho)
    return l_inf + np.sum(w * pw, axis=-1)


def _branch_and_bound(l_inf, w, logrho, target, lo, hi) -> float:
    """First integer k in [lo, hi] with L(k) <= target, else inf (one run)."""
    pos = w > 0
    wp, lp = w[pos], logrho[pos]
    wn, ln_ = w[~pos], logrho[~pos]

    def p_at(k):
        with np.errstate(under="ignore"):
            return float(np.sum(wp * np.exp(k * lp)))

    def n_at(k):
        with np.errstate(under="ignore"):
            return float(np.sum(wn * np.exp(k * ln_)))

    stack = [(lo, hi)]
    while stack:
        a, b = stack.pop()
        if l_inf + p_at(b) + n_at(a) > target:
            continue
        if b - a < _SCAN:
            ks = np.arange(a, b + 1, dtype=float)
            vals = _value(l_inf, w, logrho, ks)
            hit = np.flatnonzero(vals <= target)
            if hit.size:
                return float(ks[hit[0]])
            continue
        mid = float(np.floor((a + b) / 2))
        stack.append((mid + 1, b))
        stack.append((a, mid))
    return np.inf


def first_crossing(l_inf, w, logrho, target, *, chunk: int = 1 << 21) -> np.ndarray:
    """Smallest integer k >= 0 with ``l_inf + sum(w * exp(k*logrho)) <= target``.

    Parameters
    ----------
    l_inf : array (n,)
        Stationary value of each run.
    w : array (n, d)
        Weights of the decaying terms (either sign; 0 for absent terms).
    logrho : array (n, d)
        Log of the decay rates, all < 0 (``-inf`` allowed for a rate of 0).
    target : array (n,)
        Targets.

    Returns
    -------
    array (n,) of float: the exact integer crossing, or ``inf`` when never reached.
    """
    l_inf = np.asarray(l_inf, float)
    w = np.asarray(w, float)
    logrho = np.maximum(np.asarray(logrho, float), _NEG_BIG)
    target = np.asarray(target, float)
    n, d = w.shape
    out = np.empty(n)
    rows = max(1, chunk // max(d, 1))
    for s in range(0, n, rows):
        sl = slice(s, s + rows)
        out[sl] = _first_chunk(l_inf[sl], w[sl], logrho[sl], target[sl])
    return out


def _first_chunk(l_inf, w, logrho, target):
    with np.errstate(divide="ignore"):
        logw_pos = np.where(w > 0, np.log(np.where(w > 0, w, 1.0)), -np.inf)
    n0 = np.sum(np.where(w < 0, w, 0.0), axis=1)
    k_u = _mono_first(logw_pos, logrho, target - l_inf)
    mixed = n0 < 0
    if not mixed.any():
        return k_u
    out = k_u.copy()
    mi = np.flatnonzero(mixed)
    k_v = _mono_first(logw_pos[mi], logrho[mi], target[mi] - l_inf[mi] - n0[mi])
    for j, i in enumerate(mi):
        kv = k_v[j]
        if not np.isfinite(kv):
            out[i] = np.inf
            continue
        if _value(l_inf[i], w[i], logrho[i], kv) <= target[i]:
            out[i] = kv
            continue
        hi = k_u[i]
        if not np.isfinite(hi):
            hi = _search_cap(l_inf[i], w[i], logrho[i], target[i])
        if not np.isfinite(hi):
            out[i] = np.inf
            continue
        out[i] = _branch_and_bound(
            l_inf[i], w[i], logrho[i], target[i], kv + 1.0, max(hi, kv + 1.0)
        )
    return out


def _search_cap(l_inf, w, logrho, target) -> float:
    """A k beyond which L(k) > target for good (used when L_inf >= target)."""
    neg = w < 0
    n_abs = -float(np.sum(w[neg]))
    lrn = float(np.max(logrho[neg]))
    gap = l_inf - target
    if gap > 0:
        # |N(k)| <= |N(0)| rho_max^k < gap  =>  L(k) > target
        return float(max(np.ceil(np.log(gap / n_abs) / lrn), 0.0)) + 1.0
    # L_inf == target: in floats the terms vanish once they underflow
    return float(np.ceil(np.log(1e-300 / np.sum(np.abs(w))) / np.max(logrho)))


def _grid_start(w32, lr32, ly, n_grid: int = 24) -> np.ndarray:
    """A Newton start left of each root, from P on a k-grid shared by all rows.

    P and P' at the grid points of every row are two small matrix products with
    exp(k_j logrho) (the rates are shared); from the last grid point still above the
    target one Newton step is taken (it stays left of the root: log P is convex).
    """
    n = ly.shape[0]
    lrmax = float(np.max(lr32))
    if not lrmax < 0:
        return np.zeros(n)
    # P(k) <= P(0) rho_max^k bounds every root: k <= log(y/P0) / log(rho_max)
    kmax = max(float(np.min(ly)) / lrmax, 1.0)
    grid = np.concatenate([[0.0], np.geomspace(1.0, kmax, n_grid - 1)]).astype(np.float32)
    e = np.multiply.outer(grid, lr32)
    with np.errstate(under="ignore"):
        _flush_exp(e, _FLOOR32)
    pg = np.einsum("nd,kd->nk", w32, e).astype(np.float64)  # (n, K)
    dpg = np.einsum("nd,kd->nk", w32 * lr32, e).astype(np.float64)
    above = pg > np.exp(ly)[:, None]
    j = np.maximum(above.sum(axis=1) - 1, 0)  # last grid point above target (P decreasing)
    rows = np.arange(n)
    p, dp = pg[rows, j], dpg[rows, j]
    k = grid[j].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.log(p) - ly
        step = np.where((g > 0) & (p > 0) & (dp < 0), -g * p / dp, 0.0)
    return k + np.where(np.isfinite(step), step, 0.0)


def first_crossing_shared(w, logrho, rho, y) -> np.ndarray:
    """Fast path: rows that share decay rates and have weights ``w >= 0``.

    Parameters
    ----------
    w : array (n, d), all >= 0
        Weights of each row (one run each).
    logrho, rho : array (d,)
        Shared log-rates (``_NEG_BIG`` for a rate of 0) and rates.
    y : array (n,), > 0
        ``target - L_inf`` per row.

    Returns
    -------
    array (n,): the exact first crossing, or NaN where this path could not settle
    the row (the caller then uses :func:`first_crossing`).
    """
    n = y.shape[0]
    res = np.full(n, np.nan)
    p0 = w.sum(axis=1)
    res[p0 <= y] = 0.0
    act = np.flatnonzero((p0 > y) & (y > _TINY * p0))  # the rest: log-domain path
    if act.size == 0:
        return res
    # Newton on log P(k) in float32, weights scaled by P(0)
    w32 = (w[act] / p0[act, None]).astype(np.float32)
    lr32 = logrho.astype(np.float32)
    ly = np.log(y[act] / p0[act])
    k = _grid_start(w32, lr32, ly)
    live = np.flatnonzero(ly > np.log(1e-25))  # else float32 would underflow
    for _ in range(60):
        if live.size == 0:
            break
        e = np.multiply.outer(k[live].astype(np.float32), lr32)
        with np.errstate(under="ignore"):
            _flush_exp(e, _FLOOR32)
        e *= w32[live]
        s = e.sum(axis=1, dtype=np.float64)
        ds = np.einsum("nd,d->n", e, lr32).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.log(s) - ly[live]
            step = np.where((g > 0) & (s > 0) & (ds < 0), -g * s / ds, 0.0)
        k[live] += step
        live = live[step > 0.01]  # the integer check below settles the rest
    kc = np.maximum(np.ceil(k - 1e-9), 1.0)  # P(0) > y, so the answer is >= 1
    # exact check in float64: P(kc - 1) > y >= P(kc)
    wa = w[act]
    ya = y[act]

    def p_pair(kk):
        e = np.multiply.outer(kk - 1.0, logrho)
        with np.errstate(under="ignore"):
            _flush_exp(e, _FLOOR64)
        e *= wa if kk.size == act.size else wa[sel]
        return e.sum(axis=1), np.einsum("nd,d->n", e, rho)

    sel = slice(None)
    pm, pk = p_pair(kc)
    ok = (pm > ya) & (pk <= ya)
    out = np.where(ok, kc, np.nan)
    # a near miss by one step either way
    for shift in (1.0, -1.0):
        miss = np.flatnonzero(np.isnan(out))
        if miss.size == 0:
            break
        cand = kc[miss] + shift
        keep = cand >= 1.0
        miss, cand = miss[keep], cand[keep]
        if miss.size == 0:
            continue
        sel = miss
        pm2, pk2 = p_pair(cand)
        good = (pm2 > ya[miss]) & (pk2 <= ya[miss])
        out[miss[good]] = cand[good]
    res[act] = out
    return res
