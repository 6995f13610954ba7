r"""Exact first crossing of a sum of decaying exponentials below a target.

For plain SGD on the noisy quadratic the expected loss after $k$ steps is

$$
L(k) = L_\infty + \sum_i w_i \rho_i^k,\qquad 0 \le \rho_i < 1,
$$

with weights $w_i$ of either sign. `first_crossing` returns the exact
smallest integer $k \ge 0$ with $L(k) \le T$ (``inf`` if there is none).

Method (all vectorised over many runs at once):

1. Split $L = L_\infty + P(k) + N(k)$ into the positive-weight part
   $P$ (decreasing) and the negative-weight part $N \le 0$ (increasing).
   Then $L_\infty + P(k) + N(0) \le L(k) \le L_\infty + P(k)$, two *monotone*
   envelopes; the answer lies between their crossings $k_V \le k^* \le k_U$.
2. A monotone crossing $P(k) \le y$ is solved by Newton's method on
   $\log P(k)$, which is convex in $k$ (a log-sum-exp of affine
   functions); started left of the root, Newton never overshoots. The integer answer
   is then *verified* by evaluating $P$ at $k$ and $k-1$; any run
   that fails verification is finished by integer bisection inside a guaranteed
   bracket (the upper end from the slowest mode, $P(k) \le P(0)\rho_{max}^k$).
3. When all weights are $\ge 0$ (the usual case: every direction starts above
   its stationary level) $k_V = k_U$ and we are done. Otherwise, if
   $L(k_V) > T$, a per-run branch and bound over $[k_V, k_{hi}]$ uses the
   lower bound $L_\infty + P(hi) + N(lo)$ on each interval and scans short
   intervals exactly, left to right, so the first crossing found is the first one.

Fast path for sweeps (`first_crossing_affine`): the runs of one learning rate
share the rates $\rho_i$, and their weights are affine in $1/B$,
$w = a + c\,s$. When all are $\ge 0$, $P(k) = A(k) + c\,S(k)$
for every batch size from one vector $\rho^k$. A shared grid (built by
squaring, no exponentials) and a cubic Hermite estimate place each root; a float64
check of $P$ at three consecutive integers around it settles the run, each
comparison decided only beyond its rigorous rounding bound. Runs it cannot settle go
to `first_crossing`.

Everything is exact up to floating-point evaluation of $L(k)$.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Workspace", "first_crossing", "first_crossing_affine", "nonneg_rows"]

NEG_BIG = -1e4  # stands in for log(0) of a rate: rho**k underflows to 0 for k >= 1
_SCAN = 256  # intervals this short are scanned exactly in branch and bound
# exp() arguments are clipped below at this floor before exponentiating: it avoids
# subnormal numbers, which make the following sums ~100x slower. A clipped term is
# over-counted by at most exp(-700) < 1e-303 times its weight (the fast path adds this
# to its error bound).
# Sums use einsum rather than BLAS (``@``): these products are small and many, and
# a threaded BLAS is several times slower on them on a busy machine.
_FLOOR64 = -700.0


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

    ``logw`` is -inf for absent terms; ``logrho`` < 0 (use NEG_BIG for rho = 0).
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
        allzero = np.all(~has | (logrho <= NEG_BIG), axis=1)
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
    logrho = np.maximum(np.asarray(logrho, float), NEG_BIG)
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


# --- fast path: many runs sharing their rates ---------------------------------------
_WIN = 3  # consecutive integers decided by one float64 evaluation: P(k0), P(k0+1), P(k0+2)
_ROUNDS = 12  # float64 evaluations per run before it is left to first_crossing
_HERMITE_STEPS = 2  # Newton steps for the root of the interpolating cubic
_GRID_FLOOR = 1e-150  # grid values are kept above this before squaring (no subnormals)
_U = np.finfo(float).eps / 2  # unit roundoff


class Workspace:
    """Scratch arrays reused across calls of `first_crossing_affine`.

    A fresh array of more than ~128 KiB is new memory from the OS, paid for by a page
    fault per 4 KiB on first write: a sizeable share of a sweep's time otherwise.
    """

    def __init__(self):
        self._bufs: dict[str, np.ndarray] = {}

    def __call__(self, name: str, rows: int, cols: int) -> np.ndarray:
        size = rows * cols
        buf = self._bufs.get(name)
        if buf is None or buf.size < size:
            buf = self._bufs[name] = np.empty(size)
        return buf[:size].reshape(rows, cols)


def nonneg_rows(a, s, c) -> np.ndarray:
    """Rows ``r`` whose weights ``a + c[r] * s`` are all ``>= 0`` (``a, s >= 0``).

    Decided from ``min(a_i / s_i)`` with a rounding margin; rows inside the margin are
    checked elementwise.
    """
    c = np.asarray(c, float)
    pos = s > 0
    if not pos.any():
        return np.ones(c.shape, bool)
    q = float(np.min(a[pos] / s[pos]))  # a + c s >= 0 for all i  <=>  -c <= q
    ok = -c <= q * (1.0 - 4 * _U)
    for r in np.flatnonzero(~ok & (-c <= q * (1.0 + 4 * _U))):
        ok[r] = bool(np.all(a + c[r] * s >= 0))
    return ok


def _exp_into(k, logrho, e):
    """e <- exp(max(k_j log rho, -700)), shape (len(k), d)."""
    np.multiply(k[:, None], logrho[None, :], out=e)
    np.maximum(e, _FLOOR64, out=e)
    with np.errstate(under="ignore"):
        np.exp(e, out=e)
    return e


def _sums(k, logrho, rows, e):
    """exp(max(k_j log rho, -700)) @ rows.T in float64 with scratch ``e`` (no BLAS)."""
    return np.einsum("kd,md->km", _exp_into(k, logrho, e), rows)


def _hermite_root(u0, u1, g0, g1, m0, m1):
    """Root in [u0, u1] of the cubic Hermite interpolant of g (g0 > 0 >= g1, slopes m)."""
    du = u1 - u0
    d0, d1 = du * m0, du * m1
    t = np.clip(g0 / (g0 - g1), 0.0, 1.0)  # secant start
    for _ in range(_HERMITE_STEPS):  # Newton on the cubic, kept inside [0, 1]
        t2 = t * t
        t3 = t2 * t
        h = (2 * t3 - 3 * t2 + 1) * g0 + (t3 - 2 * t2 + t) * d0 + (3 * t2 - 2 * t3) * g1
        h += (t3 - t2) * d1
        dh = (6 * t2 - 6 * t) * (g0 - g1) + (3 * t2 - 4 * t + 1) * d0 + (3 * t2 - 2 * t) * d1
        t = np.clip(np.where(dh < 0, t - h / dh, t), 0.0, 1.0)
    return u0 + t * du


def first_crossing_affine(a, s, c, y, logrho, rho, *, work: Workspace | None = None):
    r"""Fast path for runs that share their rates: weights $w_r = a + c_r s \ge 0$.

    All runs of one learning rate have the same rates $\rho_i$ and weights that
    are affine in $1/B$, so $P_r(k) = A(k) + c_r S(k)$ with
    $A(k) = \sum_i a_i\rho_i^k$ and $S(k) = \sum_i s_i\rho_i^k$: one
    vector $\rho^k$ (one pass of exponentials) gives $P(k)$ of every
    run, and with the precomputed $a\rho^j, s\rho^j$ also $P(k+1)$ and
    $P(k+2)$.

    1. A grid $k = \tfrac34 2^j$ (from $\rho^3$ by square roots and
       repeated squaring: no exponentials) brackets every root; the intervals that
       hold a root are cut into four pieces (products of grid powers). In its piece,
       the root of each run is estimated by the cubic Hermite interpolant of
       $\log P$ in $\log k$, clamped to the bracket that convexity of
       $\log P$ in $k$ gives (tangents from either end lie below, the
       chord above).
    2. A float64 check of $P(k_0), P(k_0+1), P(k_0+2)$ around the estimate
       (one pass per distinct $k_0$) settles the run if the target lies
       inside; a near miss checks the adjacent window, then Newton steps on
       $\log P$ from the window end nearest the root place the next window
       (they land left of the root, by convexity).

    A comparison $P(k) \lessgtr y$ is decided only if it holds beyond the
    rigorous error bound of the float64 evaluation (summation, exponentials and the
    clipping of tiny terms: relative $(d + 3000)u$ of $A + |c|S$); a run
    within that margin, or not settled in ``_ROUNDS`` evaluations, is returned as NaN
    for `first_crossing`.

    Parameters
    ----------
    a, s : array (d,), >= 0
        The two weight vectors.
    c : array (n,)
        Coefficient of ``s`` per run, with ``a + c[r] * s >= 0`` (`nonneg_rows`).
    y : array (n,), > 0
        ``target - L_inf`` per run.
    logrho, rho : array (d,)
        Log-rates (``NEG_BIG`` for a rate of 0) and rates $0 \le \rho_i < 1$.
        The answer is exact for the rates ``exp(logrho)``; ``rho`` must agree to
        $(|\log\rho_i| + 1)u$ relative, as ``r * r`` and ``2 log|r|`` do.
    work : Workspace, optional
        Scratch arrays to reuse across calls.

    Returns
    -------
    array (n,): the exact first crossing, or NaN where this path did not settle it.
    """
    a, s, logrho, rho = (np.asarray(v, float) for v in (a, s, logrho, rho))
    c, y = np.asarray(c, float), np.asarray(y, float)
    work = Workspace() if work is None else work
    n, d, W = y.shape[0], a.shape[0], _WIN
    res = np.full(n, np.nan)
    has = (a > 0) | (s > 0)
    if n == 0 or not has.any() or np.any(a < 0) or np.any(s < 0) or np.any(logrho[has] >= 0):
        return res
    # rows: a log rho, s log rho (slopes), then a rho^j, s rho^j for j < W, then the
    # slopes at rho^(W-1); rows[:4] are a, s and their slopes, rows[2:2W+2] the values
    rows = work("rows", 2 * W + 4, d)
    rows[2], rows[3] = a, s
    for j in range(2, 2 * W):
        np.multiply(rows[j], rho, out=rows[j + 2])
    for j, base in ((0, 2), (1, 3), (2 * W + 2, 2 * W), (2 * W + 3, 2 * W + 1)):
        np.multiply(rows[base], logrho, out=rows[j])
    cabs = np.abs(c)
    # |computed P(k) - sum_i w_i exp(k log rho_i)| <= tol * (A + |c| S) + floor_err:
    # sums of d nonnegative terms (d u), exp(k log rho) (argument rounding, |t| <= 700:
    # 746 u), rho^j against exp(j log rho) (j (|log rho| + 1) u each, and terms with
    # |log rho| > 745 are below the floor term), products and A + c S (a few u)
    tol = (d + (W + 1) * 746 + 16) * _U * 1.01
    v0 = rows.sum(axis=1)  # the sums at k = 0
    floor_err = 1e-303 * (v0[2] + cabs * v0[3])  # clipped terms: < exp(-700) of weight

    def window(idx, k0, slopes):
        """Signs of P(k0 + j) - y (+1 above, -1 at or below, 0 undecided), P, and
        (if ``slopes``) dP/dk at k0 and k0 + W - 1."""
        uk, inv = np.unique(k0, return_inverse=True)
        if uk.size == 1 and uk[0] == 0:
            v = np.broadcast_to(v0, (idx.size, v0.size))
        elif slopes:
            v = _sums(uk, logrho, rows, work("e", uk.size, d))[inv]
        else:  # values only, in the columns they have in rows
            v = np.empty((idx.size, 2 * W + 4))
            v[:, 2 : 2 * W + 2] = _sums(uk, logrho, rows[2 : 2 * W + 2], work("e", uk.size, d))[inv]
        cc = c[idx, None]
        va, vs = v[:, 2 : 2 * W + 2 : 2], v[:, 3 : 2 * W + 2 : 2]
        p = va + cc * vs
        err = tol * (va + cabs[idx, None] * vs) + floor_err[idx, None]
        gap = p - y[idx, None]
        sign = (gap > err).view(np.int8) - (-gap >= err).view(np.int8)
        dp = v[:, [0, 2 * W + 2]] + cc * v[:, [1, 2 * W + 3]] if slopes else None
        return sign, p, dp

    todo, k0 = np.arange(n), np.zeros(n)
    lo = np.full(n, W - 1.0)  # largest k known to have P(k) > y (once past k = 0)
    sign, p, _ = window(todo, k0, False)
    todo = todo[_settle(res, todo, k0, sign, lo)]
    # targets near the grid's floor are left to first_crossing
    todo = todo[y[todo] > 1e100 * _GRID_FLOOR * p[todo, 0]]
    if todo.size == 0:
        return res
    kest = _grid_estimate(rows, logrho[has], rho, c[todo], y[todo], p[todo, 0], work)
    # the window (k0, k0 + W - 1] holds every root within 0.5 of the estimate
    k0 = np.maximum(np.round(kest) - 1.0, lo[todo])
    for rnd in range(_ROUNDS):
        sign, p, dp = window(todo, k0, rnd > 0)
        keep = _settle(res, todo, k0, sign, lo)
        if not keep.any():
            break
        todo, k0, sign, p = todo[keep], k0[keep], sign[keep], p[keep]
        right = sign[:, -1] > 0  # all above: the root is right of the window
        if rnd == 0:  # near miss: the adjacent window
            k0 = np.where(right, k0 + W - 1, np.maximum(k0 - (W - 1), lo[todo]))
            continue
        # Newton on log P from the window end nearest the root (lands left of it)
        pe = np.where(right, p[:, -1], p[:, 0])
        dpe = np.where(right, dp[keep, 1], dp[keep, 0])
        with np.errstate(divide="ignore", invalid="ignore"):
            knew = np.where(right, k0 + W - 1, k0) - np.log(pe / y[todo]) * pe / dpe
        ok = np.isfinite(knew) & (dpe < 0)
        todo, knew = todo[ok], knew[ok]
        k0 = np.maximum(np.ceil(knew) - 1.0, lo[todo])
    return res


def _settle(res, rows, k0, sign, lo):
    """Record rows whose window holds the crossing; update ``lo``; return a mask of
    the rows still open.

    Rows with an undecided comparison are dropped (left NaN for the exact fallback).
    """
    decided = np.all(sign != 0, axis=1)
    hit = decided & (sign[:, 0] > 0) & (sign[:, -1] < 0)
    res[rows[hit]] = k0[hit] + np.sum(sign[hit] > 0, axis=1)
    zero = decided & (k0 == 0) & (sign[:, 0] < 0)
    res[rows[zero]] = 0.0
    above = decided & (sign[:, -1] > 0)
    lo[rows[above]] = k0[above] + sign.shape[1] - 1
    return decided & ~hit & ~zero


def _grid_estimate(rows, lr_has, rho, c, y, p0, work):
    """Root estimates from a grid shared by all runs (step 1 of first_crossing_affine).

    ``rows`` are those of `first_crossing_affine`; ``p0`` is P(0) of each run.
    The grid k = (3/4) 2**j needs no exponentials: rho**3 by products, two square
    roots, then rho**(2k) = (rho**k)**2; the points g (1 + m/4) that cut [g, 2g] are
    rho**g (rho**(g/4))**m, with g/4 on the grid. Relative rounding is ~k u, harmless
    for an estimate; factors are kept above _GRID_FLOOR, which over-counts a term by
    < 1e-150 of its weight, far below the targets, y > 1e-50 P(0), that come here.
    """
    W, R, lev = _WIN, 4, 2  # g / R is the grid point lev doublings below g
    d = rho.size
    # P(k) <= P(0) rho_max^k bounds every root: k <= log(y / P0) / log(rho_max)
    kmax = max(float(np.max(np.log(y / p0) / np.max(lr_has))), W)
    nk = int(np.ceil(np.log2(kmax / W))) + 2 + lev
    grid = W / R * 2.0 ** np.arange(nk)
    e = work("grid", nk + (R - 1) * nk, d)  # coarse rows, then the refinement rows
    e[lev] = rho
    for _ in range(1, W):
        e[lev] *= rho
    for i in range(lev - 1, -1, -1):
        np.sqrt(e[i + 1], out=e[i])
    for i in range(lev + 1, nk):
        np.maximum(e[i - 1], _GRID_FLOOR, out=e[i])
        np.square(e[i], out=e[i])
    v = np.einsum("kd,md->km", e[:nk], rows[2:4])
    pk = v[:, 0] + c[:, None] * v[:, 1]
    j = np.maximum(np.sum(pk > y[:, None], axis=1) - 1, 0)  # last grid point above y
    inner = np.unique(j[(j >= lev) & (j < nk - 1)])
    src_row = np.arange(nk)  # row of e that holds each (sorted) grid point
    if inner.size:  # cut the intervals that hold a root into R pieces
        ni = inner.size
        ext = e[nk : nk + (R - 1) * ni].reshape(R - 1, ni, d)
        step = work("step", ni, d)
        np.take(e, inner - lev, axis=0, out=step)
        np.maximum(step, _GRID_FLOOR, out=step)
        np.take(e, inner, axis=0, out=ext[0])
        for m in range(R - 1):
            if m:
                ext[m] = ext[m - 1]
            np.maximum(ext[m], _GRID_FLOOR, out=ext[m])
            ext[m] *= step
        v = np.einsum("kd,md->km", e[nk : nk + (R - 1) * ni], rows[2:4])
        extra = np.outer(1.0 + np.arange(1, R) / R, grid[inner]).ravel()  # same order
        src_row = np.argsort(np.concatenate([grid, extra]))
        grid = np.concatenate([grid, extra])[src_row]
        pk = np.concatenate([pk, v[:, 0] + c[:, None] * v[:, 1]], axis=1)[:, src_row]
        j = np.maximum(np.sum(pk > y[:, None], axis=1) - 1, 0)
    # slopes, at the bracket ends only
    ends = np.unique(np.concatenate([j, np.minimum(j + 1, grid.size - 1)]))
    er = work("ends", ends.size, d)
    np.take(e, src_row[ends], axis=0, out=er)
    v = np.einsum("kd,md->km", er, rows[:2])
    dpk = np.full(pk.shape, np.nan)
    dpk[:, ends] = v[:, 0] + c[:, None] * v[:, 1]
    r = np.arange(y.size)
    jr = np.minimum(j + 1, grid.size - 1)
    k_l, k_r = grid[j], grid[jr]
    p_l, p_r, d_l, d_r = pk[r, j], pk[r, jr], dpk[r, j], dpk[r, jr]
    ly = np.log(y)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        g_l, g_r = np.log(p_l) - ly, np.log(p_r) - ly
        s_l, s_r = d_l / p_l, d_r / p_r  # d log P / dk
        newton_l = k_l - g_l / s_l
        low = np.fmax(newton_l, k_r - g_r / s_r)
        chord = k_l + (k_r - k_l) * g_l / (g_l - g_r)
        u = _hermite_root(np.log(k_l), np.log(k_r), g_l, g_r, k_l * s_l, k_r * s_r)
        k = np.clip(np.exp(u), low, chord)
    est = np.where((jr > j) & (g_l > 0) & (g_r <= 0) & np.isfinite(k), k, newton_l)
    return np.where(np.isfinite(est), est, k_l)
