r"""Sign descent (the update of Adam-like optimizers) on a noisy quadratic, one step.

Adam with small $\beta$'s and $\epsilon$ moves each coordinate by the
learning rate times the *sign* of the batch gradient (Li et al. 2024 call this the
"sign of gradient" case). On a quadratic with gradient $G$, Hessian $H$ and
a batch gradient $\hat G = G + \xi$, $\xi \sim N(0, \mathrm{diag}(\sigma^2)/B)$,
the update $-\epsilon\,\mathrm{sign}(\hat G)$ changes the loss by

$$
\Delta L(\epsilon) = \epsilon\, G^T s - \tfrac12 \epsilon^2 s^T H s,
\qquad s = \mathrm{sign}(\hat G),
$$

so its expectation is maximised by $\epsilon_{opt}(B) = E[G^Ts] / E[s^THs]$.
With independent coordinates $E[s_i] = \mathrm{erf}(G_i\sqrt{B}/(\sqrt2\sigma_i))$,
$E[s_i^2] = 1$ and $E[s_is_j] = E[s_i]E[s_j]$ for $i \ne j$, which
gives the closed form of `empirical_batch.theory.sign_descent_eps_opt`. This module
estimates the same expectations by Monte Carlo over batch-gradient draws (an
independent check of that closed form), and produces "sweeps" of the best learning rate
per batch size to fit the surge law to.

A diagonal $H$ gives a rate that only rises with $B$; the surge (a rise
and a fall) needs off-diagonal curvature between coordinates whose gradients share a
sign, as in `correlated_quadratic`.

References
----------
S. Li, P. Zhao, H. Zhang, X. Sun, H. Wu, D. Jiao, W. Wang, C. Liu, Z. Fang, J. Xue,
Y. Tao, B. Cui, D. Wang. "Surge Phenomenon in Optimal Learning Rate and Batch Size
Scaling." NeurIPS 2024, arXiv:2405.14578.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validate import as_array, check_positive
from ..errors import InputError
from ..params import POSITIVE, REAL, Domain, validate_params

__all__ = ["SignStep", "correlated_quadratic", "sign_descent_sweep", "sign_step_monte_carlo"]

N_SAMPLES = REAL.within(Domain(2.0, math.inf, low_open=False, integer=True))
"""The constraint of ``n_samples``: a whole number >= 2 (2.0 too)."""


@dataclass(frozen=True)
class SignStep:
    """Monte Carlo estimates of $E[G^Ts]$, $E[s^THs]$ and the optimal rate."""

    batch_size: float
    gain: float  # E[G^T s]
    curvature: float  # E[s^T H s]
    eps_opt: float
    dl_opt: float  # the expected improvement at eps_opt: gain² / (2 curvature)
    n_samples: int


def _problem(gradient, hessian, noise_std):
    g = as_array(gradient, "gradient", ndim=1)
    h = as_array(hessian, "hessian", ndim=2)
    s = check_positive(noise_std, "noise_std")
    if h.shape != (g.size, g.size):
        raise InputError(f"hessian must be ({g.size}, {g.size}), got {h.shape}")
    if not np.allclose(h, h.T):
        raise InputError("hessian must be symmetric")
    return g, h, np.broadcast_to(s, g.shape).astype(float)


@validate_params(batch_size=REAL.within(POSITIVE), n_samples=N_SAMPLES)
def sign_step_monte_carlo(gradient, hessian, noise_std, batch_size, *, n_samples=20_000,
                          seed=0) -> SignStep:
    r"""One sign-descent step at batch size ``batch_size``: Monte Carlo expectations.

    ``noise_std`` is the per-example standard deviation $\sigma_i$ of each
    coordinate of the gradient (a batch of $B$ has $\sigma_i/\sqrt B$).
    """
    g, h, s = _problem(gradient, hessian, noise_std)
    b = float(batch_size)
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((int(n_samples), g.size))
    sg = np.sign(g[None, :] + z * (s / np.sqrt(b))[None, :])
    gain = float(np.mean(sg @ g))
    curv = float(np.mean(np.einsum("ni,ij,nj->n", sg, h, sg)))
    eps = gain / curv
    return SignStep(b, gain, curv, eps, gain * gain / (2 * curv), int(n_samples))


@validate_params(n_samples=N_SAMPLES)
def sign_descent_sweep(gradient, hessian, noise_std, batch_sizes, *, n_samples=20_000,
                       seed=0) -> pd.DataFrame:
    """The Monte Carlo optimal rate per batch size: a table with ``batch_size`` and
    ``learning_rate`` (what `empirical_batch.fit.fit_lr_scaling` takes)."""
    bs = check_positive(as_array(batch_sizes, "batch_sizes", ndim=1), "batch_sizes")
    rows = []
    for i, b in enumerate(bs):
        r = sign_step_monte_carlo(gradient, hessian, noise_std, b, n_samples=n_samples,
                                  seed=[seed, i])
        rows.append({"batch_size": float(b), "learning_rate": r.eps_opt,
                     "dl_opt": r.dl_opt})
    return pd.DataFrame(rows)


@validate_params(correlation=REAL.within(Domain(0.0, 1.0, low_open=False)))
def correlated_quadratic(dims: int = 50, *, correlation: float = 0.2, noise: float = 10.0,
                         seed: int = 0):
    r"""A quadratic whose Hessian couples every pair of coordinates:
    $H = (1-\rho) I + \rho\,\mathbf 1\mathbf 1^T$, gradient entries of one sign
    (uniform in [0.5, 1.5]) and the same per-example noise standard deviation ``noise``
    in every coordinate.
    Returns ``(gradient, hessian, noise_std)``."""
    rng = np.random.default_rng(seed)
    g = rng.uniform(0.5, 1.5, dims)
    h = (1 - correlation) * np.eye(dims) + correlation * np.ones((dims, dims))
    return g, h, np.full(dims, float(noise))
