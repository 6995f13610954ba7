r"""The closed forms of one SGD step on a quadratic loss (McCandlish et al. 2018, §2.2,
App. C): the best learning rate and loss improvement at batch size $B$ (eqs. 2.6-2.7),
the noise scales from four scalars, and the variants for momentum, Adam-like
"surge" rates and sign descent. `empirical_batch.theory` collects them with
`QuadraticModel`; see its docstring for the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._validate import as_array, as_float, check_symmetric, scalar_or_array
from .errors import InputError
from .params import Domain, check, validate_params

__all__ = [
    "check_momentum",
    "dl_opt",
    "effective_learning_rate",
    "eps_opt",
    "inverse_batch",
    "noise_scales_from_scalars",
    "sign_descent_eps_opt",
    "surge_eps_opt",
]


def inverse_batch(batch_size: ArrayLike, dataset_size: float | None = None) -> np.ndarray:
    """1/B, or 1/B − 1/D for sampling without replacement from D examples (checked)."""
    b = check("batch_size", batch_size)
    inv = 1.0 / b
    if dataset_size is not None:
        d = check("dataset_size", dataset_size)
        if d.ndim:
            raise InputError(f"dataset_size must be one number, got shape {d.shape}")
        if np.any(b > d):
            raise InputError(
                f"batch_size must be <= dataset_size={float(d):g} when sampling "
                f"without replacement, got {b.max()!r}"
            )
        inv = inv - 1.0 / d
    return inv


def check_momentum(momentum: float) -> float:
    """The momentum coefficient m, checked to lie in [0, 1)."""
    return float(check("momentum", as_float(momentum, "momentum")))


def _scales(batch_size: ArrayLike, rate: ArrayLike, b_noise: ArrayLike,
            rate_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """batch_size, the rate scale and b_noise checked against their declared domains and
    broadcast together (a shape mismatch names them)."""
    b = np.asarray(check("batch_size", batch_size))
    r = np.asarray(check(rate_name, rate))
    n = np.asarray(check("b_noise", b_noise))
    try:
        b, r, n = np.broadcast_arrays(b, r, n)
    except ValueError:
        raise InputError(f"batch_size, {rate_name} and b_noise must broadcast together, got "
                         f"shapes {b.shape}, {r.shape} and {n.shape}") from None
    return b, r, n


def over_one_plus(scale: np.ndarray, b: np.ndarray, n: np.ndarray) -> np.ndarray:
    r"""$s/(1 + n/b) = s\,b/(b + n)$ with no overflow or underflow on the way: where
    $b \ge n$ the ratio $n/b \le 1$ is safe; where $b < n$ the result is
    $s\,t/(1 + t)$ with $t = b/n$, formed from the mantissas and exponents of $s$, $b$
    and $n$ (``frexp``) and scaled once at the end (``ldexp``), so that only a result
    past the float range itself is lost (eq. 2.6 at $B \ll B_{noise}$ stays exact)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        s_big = scale / (1.0 + n / b)
        ms, xs = np.frexp(scale)
        mb, xb = np.frexp(b)
        mn, xn = np.frexp(n)
        mt, xt = mb / mn, xb - xn  # t = mt 2^xt
        t = np.ldexp(mt, np.clip(xt, -1100, 1100))
        small = np.ldexp(ms * mt / (1.0 + t), np.clip(xs + xt, -2200, 2200))
        out = np.where(b >= n, s_big, small)
    return np.asarray(out)


def effective_learning_rate(eps: ArrayLike, momentum: float = 0.0) -> Any:
    r"""The plain-SGD step that heavy-ball momentum ``m`` at rate ``eps`` amounts to.

    $$
    \epsilon_{eff} = \frac{\epsilon}{1 - m}
    $$

    With $v \leftarrow m v + G_{est}$, $\theta \leftarrow \theta - \epsilon v$
    and a gradient that changes little over $1/(1-m)$ steps, $v$ settles
    at $G/(1-m)$ (App. C of the paper). On a quadratic the slow mode contracts
    by $1 - \epsilon h/(1-m) - m(\epsilon h)^2/(1-m)^3 + \dots$ per step, so the
    equivalence holds for $\epsilon h \ll (1-m)^2$; it says nothing about the
    fast, oscillating modes near the stability edge.

    >>> effective_learning_rate(0.05, momentum=0.5)
    0.1
    """
    e = check("eps", eps)
    return scalar_or_array(e / (1.0 - check_momentum(momentum)))


def eps_opt(batch_size: ArrayLike, eps_max: ArrayLike, b_noise: ArrayLike, *,
            momentum: float = 0.0) -> Any:
    r"""Optimal learning rate at batch size B (eq. 2.6).

    $$
    \epsilon_{opt}(B) = \frac{\epsilon_{max}}{1 + B_{noise}/B}
    $$

    With heavy-ball ``momentum`` m the returned rate is $(1-m)\,\epsilon_{opt}(B)$,
    whose effective step $\epsilon/(1-m)$ is optimal. Broadcasts over arrays;
    returns a float for scalar input.

    >>> eps_opt(10.0, eps_max=1.0, b_noise=10.0)
    0.5
    >>> eps_opt([10.0, 30.0], eps_max=1.0, b_noise=10.0)
    array([0.5 , 0.75])
    """
    b, e, n = _scales(batch_size, eps_max, b_noise, "eps_max")
    return scalar_or_array(over_one_plus((1.0 - check_momentum(momentum)) * e, b, n))


def dl_opt(batch_size: ArrayLike, dl_max: ArrayLike, b_noise: ArrayLike) -> Any:
    r"""Expected loss improvement of one step at the optimal rate (eq. 2.7).

    $$
    \Delta L_{opt}(B) = \frac{\Delta L_{max}}{1 + B_{noise}/B}
    $$

    >>> dl_opt(30.0, dl_max=2.0, b_noise=10.0)
    1.5
    """
    b, d, n = _scales(batch_size, dl_max, b_noise, "dl_max")
    return scalar_or_array(over_one_plus(d, b, n))


def noise_scales_from_scalars(g2: ArrayLike, ghg: ArrayLike, trace_sigma: ArrayLike,
                              trace_h_sigma: ArrayLike) -> dict[str, Any]:
    r"""The paper's derived scalars from the four summary scalars (eqs. 2.6–2.9).

    $$
    B_{noise} = \frac{\operatorname{tr}(H\Sigma)}{G^THG},\quad
    B_{simple} = \frac{\operatorname{tr}\Sigma}{|G|^2},\quad
    \epsilon_{max} = \frac{|G|^2}{G^THG},\quad
    \Delta L_{max} = \frac{|G|^4}{2\,G^THG}.
    $$

    The one place these ratios are computed (`QuadraticModel`, the simulator's traces,
    the Hessian collector and the harness call it). Broadcasts; where a denominator is
    zero or not finite the value is NaN rather than an error, so that a trace of many
    points keeps its shape. A negative estimate of $|G|^2$ (from noisy data) gives
    a negative ratio, which reads "larger than can be resolved", as in
    `empirical_batch.estimators`. Returns a dict of floats (scalars) or arrays.

    >>> noise_scales_from_scalars(2.0, 4.0, 8.0, 16.0)
    {'b_noise': 4.0, 'b_simple': 4.0, 'eps_max': 0.5, 'dl_max': 0.5}
    """
    g, h, s, hs = (np.asarray(v, dtype=float) for v in (g2, ghg, trace_sigma, trace_h_sigma))
    ok_h = np.isfinite(h) & (h != 0)
    ok_g = np.isfinite(g) & (g != 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = {
            "b_noise": np.where(ok_h, hs / h, np.nan),
            "b_simple": np.where(ok_g, s / g, np.nan),
            "eps_max": np.where(ok_h & ok_g, g / h, np.nan),
            "dl_max": np.where(ok_h & ok_g, 0.5 * g * (g / h), np.nan),  # no g*g overflow
        }
    return {k: scalar_or_array(v) for k, v in out.items()}


@validate_params(b_noise=Domain(0.0, meaning="noise scale B_noise, the surge's peak"))
def surge_eps_opt(batch_size: ArrayLike, eps_max: ArrayLike, b_noise: ArrayLike) -> Any:
    r"""Optimal learning rate of an Adam-like (sign-descent) optimizer (Li et al. 2024).

    $$
    \epsilon_{opt}(B) = \frac{\epsilon_{max}}
        {\tfrac12\left(\sqrt{B_{noise}/B} + \sqrt{B/B_{noise}}\right)}
    $$

    Unlike SGD's $\epsilon_{max}/(1 + B_{noise}/B)$ (`eps_opt`), the rate rises
    as $\sqrt{B}$ for $B \ll B_{noise}$, peaks at $\epsilon_{max}$ exactly at
    $B = B_{noise}$ and falls as $1/\sqrt{B}$ beyond it (the "surge"). This is
    the simplified form of the paper's Theorem 3; ``b_noise`` plays the role of
    their $B_{peak}$. Broadcasts; returns a float for scalar input.

    References
    ----------
    S. Li, P. Zhao, H. Zhang, X. Sun, H. Wu, D. Jiao, W. Wang, C. Liu, Z. Fang,
    J. Xue, Y. Tao, B. Cui, D. Wang. "Surge Phenomenon in Optimal Learning Rate
    and Batch Size Scaling." NeurIPS 2024, arXiv:2405.14578.

    >>> surge_eps_opt(64.0, eps_max=1e-3, b_noise=64.0)
    0.001
    >>> round(surge_eps_opt(16.0, eps_max=1.0, b_noise=64.0), 6)
    0.8
    """
    b, e, n = _scales(batch_size, eps_max, b_noise, "eps_max")
    # = 2 e sqrt(t)/(1 + t) with t = min(B, Bn)/max(B, Bn) <= 1 (the law is symmetric
    # in B and Bn), formed from mantissas and exponents: no overflow or underflow on the
    # way, only a result past the float range itself is lost
    lo, hi = np.minimum(b, n), np.maximum(b, n)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        me, xe = np.frexp(e)
        ml, xl = np.frexp(lo)
        mh, xh = np.frexp(hi)
        mt, xt = ml / mh, xl - xh  # t = mt 2^xt, xt <= 1
        odd = xt % 2 != 0
        mt, xt = np.where(odd, 2.0 * mt, mt), np.where(odd, xt - 1, xt)
        t = np.ldexp(mt, np.clip(xt, -1100, 1100))
        out = np.ldexp(2.0 * me * np.sqrt(mt) / (1.0 + t), np.clip(xe + xt // 2, -2200, 2200))
    return scalar_or_array(out)


def sign_descent_eps_opt(batch_size: ArrayLike, gradient: ArrayLike, hessian: ArrayLike,
                         noise_std: ArrayLike) -> Any:
    r"""Optimal rate of one sign-descent step, with its large-batch plateau.

    The update $-\epsilon\,\mathrm{sign}(\hat G)$ of a batch gradient
    $\hat G_i \sim N(G_i, \sigma_i^2/B)$ (independent coordinates) improves a
    quadratic by $\epsilon\,G^TE[s] - \tfrac12\epsilon^2 E[s^THs]$, maximal at

    $$
    \epsilon_{opt}(B) = \frac{\sum_i |G_i|\,\mu_i}
        {\sum_i H_{ii} + \sum_{i\ne j} H_{ij}\,\mathrm{sgn}(G_iG_j)\,\mu_i\mu_j},
    \qquad \mu_i = \mathrm{erf}\!\left(\frac{|G_i|\sqrt{B}}{\sqrt2\,\sigma_i}\right).
    $$

    This is the second-order model of McCandlish et al. (2018) applied to the sign
    update, as Li et al. (2024) do; it keeps the error function exactly instead of
    approximating it. As $B \to \infty$, $\mu_i \to 1$ and the rate
    tends to the plateau $\sum|G_i| / \sum_{ij} H_{ij}\mathrm{sgn}(G_iG_j)$; for
    small $B$ it rises as $\sqrt B$; with off-diagonal curvature between
    coordinates whose gradients share a sign it peaks and falls in between — the
    surge. `surge_eps_opt` is the paper's one-scale simplification (peak at
    $B_{noise}$, no plateau). Ambiguity: the extracted text of the paper does not
    make its treatment of $E[s_is_j]$ unambiguous; here the coordinates' noises are
    independent, so $E[s_is_j] = \mu_i\mu_j\,\mathrm{sgn}(G_iG_j)$ exactly.
    `empirical_batch.simulate.sign` checks the formula by Monte Carlo.

    Parameters
    ----------
    batch_size : float or array
    gradient : array (n,)
    hessian : array (n, n), symmetric
    noise_std : float or array (n,)
        Per-example standard deviation $\sigma_i$ of each gradient coordinate.

    References
    ----------
    S. Li et al. "Surge Phenomenon in Optimal Learning Rate and Batch Size Scaling."
    NeurIPS 2024, arXiv:2405.14578.

    >>> h = [[1.0, 0.5], [0.5, 1.0]]
    >>> round(sign_descent_eps_opt(1e12, [1.0, 1.0], h, 1.0), 6)  # plateau: 2 / 3
    0.666667
    """
    from scipy.special import erf

    b = np.asarray(check("batch_size", batch_size))
    g = as_array(gradient, "gradient", ndim=1)
    h = as_array(hessian, "hessian", ndim=2)
    if h.shape != (g.size, g.size):
        raise InputError(f"hessian must be ({g.size}, {g.size}), got {h.shape}")
    check_symmetric(h, "hessian")
    s = np.asarray(check("noise_std", noise_std))
    if s.ndim > 1 or (s.ndim == 1 and s.shape != g.shape):
        raise InputError(f"noise_std must be a scalar or have the gradient's shape {g.shape}, "
                         f"got shape {s.shape}")
    s = np.broadcast_to(s, g.shape)
    sg = np.sign(g)
    mu = erf(np.abs(g)[None, :] * np.sqrt(b.reshape(-1, 1) / 2.0) / s[None, :])  # (nb, n)
    hs = h * sg[:, None] * sg[None, :]
    diag = np.trace(h)
    off = np.einsum("bi,ij,bj->b", mu, hs, mu) - np.einsum("bi,i,bi->b", mu, np.diag(h), mu)
    den = diag + off
    if np.any(den <= 0):
        bad = b.reshape(-1)[np.argmax(den <= 0)]
        raise InputError(
            f"hessian has curvature <= 0 along the expected sign step at batch_size={bad:g} "
            f"(E[s^T H s] = {float(den[np.argmax(den <= 0)]):.3g}): the quadratic model's "
            "improvement grows without bound in the rate, so no optimal rate exists")
    out = (mu @ np.abs(g)) / den
    return scalar_or_array(out.reshape(b.shape))
