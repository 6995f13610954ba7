r"""The noisy quadratic model (NQM) and its exact expected dynamics.

Loss $L(\theta) = \tfrac12 \sum_i h_i \theta_i^2$ in the eigenbasis of the
Hessian. A per-example gradient is $h_i\theta_i + \xi_i$ with zero-mean noise
of variance $c_i$ in direction $i$, independent of $\theta$
(additive noise). The mean of $B$ independent per-example gradients has noise
variance $c_i/B$. Zhang et al. (2019, "Which algorithmic choices matter at
which batch sizes?") take $\Sigma = H$, i.e. $c_i = h_i$
(`NoisyQuadratic.zhang`); any constant $c_i \ge 0$ is allowed.

Plain SGD with learning rate $a$, preconditioner $P = H^{-p}$ (diagonal,
$p_i = h_i^{-p}$) and batch $B$:
$\theta_i \leftarrow \theta_i - a p_i (h_i\theta_i + \xi_i/\sqrt{B}\cdot)$, so
with $\hat h_i = p_i h_i$ and $\hat c_i = p_i^2 c_i$

$$
m_i(t+1) = \rho_i\, m_i(t) + q_i,\qquad
\rho_i = (1 - a\hat h_i)^2,\quad q_i = a^2 \hat c_i / B,
$$

where $m_i(t) = E[\theta_i(t)^2]$. Its closed form is the geometric series

$$
m_i(k) = \rho_i^k m_i(0) + q_i\,\frac{1-\rho_i^k}{1-\rho_i}
= m_i^\infty + \rho_i^k\,(m_i(0) - m_i^\infty),\qquad
m_i^\infty = \frac{a \hat c_i}{B\,\hat h_i (2 - a\hat h_i)},
$$

and the expected loss is $E[L](k) = \tfrac12\sum_i h_i m_i(k)$: O(dims) work
for any $k$. The run converges iff $0 < a\hat h_i < 2$ in every
direction that carries weight ($m_i(0) > 0$ or $c_i > 0$).

Heavy-ball momentum $\beta$ and an exponential moving average of the iterates
(EMA, decay $\gamma$) are linear recursions on a small state per direction;
see `NoisyQuadratic` for the second-moment recursions. The model's noise
scales (McCandlish et al. 2018, §2.2, eqs. 2.8–2.9) along the expected trajectory
come from `NoisyQuadratic.noise_scales`.

This module holds the problem; its dynamics live in
`empirical_batch.simulate.dynamics`, the exact search for steps to a target in
`empirical_batch.simulate.search` and the noise-scale traces in
`empirical_batch.simulate.traces`.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from .._frozen import Frozen
from .._validate import (
    as_array,
    as_float,
    check_count,
    check_dataset_size,
    check_nonnegative,
    check_positive,
    check_unit_interval,
    positive_float,
)
from ..errors import InputError
from ..params import validate_params
from ..theory import power_law_spectrum
from . import dynamics, search, traces
from .search import BestLR
from .traces import NoiseScaleTrace

__all__ = ["BestLR", "NoiseScaleTrace", "NoisyQuadratic"]

NoiseLike = Literal["curvature", "constant"]
"""`NoisyQuadratic.power_law`'s noise: proportional to the curvature, or constant."""


def _check_in_range(q) -> None:
    """The model's sums (tr of the noise, the loss, |G|^2 and G^T H G at the start) must be
    finite floats: refuse values near 1e308 whose products overflow, naming them."""
    with np.errstate(over="ignore", invalid="ignore"):
        sums = {
            "curvature and precondition": np.sum(q.preconditioner) + np.sum(q.update_curvature),
            "curvature and noise": np.sum(q.update_noise) + np.sum(q.curvature * q.noise),
            "curvature and init": np.sum(q.curvature * q.init)
            + np.sum(q.update_curvature * q.curvature**2 * q.init),
        }
    for name, v in sums.items():
        if not np.isfinite(v):
            raise InputError(f"{name}: the quadratic's sums overflow a float (values near "
                             "1e308); rescale the problem")


class NoisyQuadratic(Frozen):
    r"""Noisy quadratic problem with exact expected SGD dynamics.

    Parameters
    ----------
    curvature : array (d,)
        Hessian eigenvalues $h_i > 0$.
    noise : float or array (d,)
        Per-example gradient-noise variance $c_i \ge 0$ in each direction
        (constant in $\theta$); a batch of $B$ has variance $c_i/B$.
    init : float or array (d,)
        Initial second moment $E[\theta_i(0)^2] \ge 0$.
    momentum : float
        Heavy-ball coefficient $\beta \in [0, 1)$.
    precondition : float
        Exponent $p$ of the diagonal preconditioner $P = H^{-p}$
        (``0`` is plain SGD, ``1`` is Newton-like). The update is
        $\theta \leftarrow \theta - aP g_B$.
    ema : float, optional
        Decay $\gamma \in [0, 1)$ of an exponential moving average of the
        iterates, $\bar\theta_{t+1} = \gamma\bar\theta_t + (1-\gamma)\theta_{t+1}$
        with $\bar\theta_0 = \theta_0$; the reported loss is then that of
        $\bar\theta$.
    dataset_size : int, optional
        A finite pool of $D$ examples sampled without replacement: a batch of $B$
        has noise variance $c_i(1/B - 1/D)$ (the finite-data term of
        `empirical_batch.theory.QuadraticModel`), so $B = D$ is noise-free. Default:
        an infinite pool.

    Notes
    -----
    With $u_i = 1 + \beta - a\hat h_i$ the heavy-ball update is
    $\theta_{t+1} = u\,\theta_t - \beta\theta_{t-1} - a\hat\xi_t$
    ($\theta_{-1} = \theta_0$, i.e. zero initial velocity). Its second moments
    $x_t = E\theta_t^2$, $y_t = E\theta_t\theta_{t-1}$,
    $z_t = E\theta_{t-1}^2$ obey the 3×3 linear recursion

    $$
    x_{t+1} = u^2 x_t - 2u\beta\, y_t + \beta^2 z_t + a^2\hat c/B,\quad
    y_{t+1} = u\, x_t - \beta\, y_t,\quad z_{t+1} = x_t.
    $$

    In general the state $s = (\theta_t, \theta_{t-1}, \bar\theta_t)$ (the parts
    in use) follows $s_{t+1} = A s_t + b\,\hat\xi_t$, so its second-moment matrix
    follows $S_{t+1} = A S_t A^T + (\hat c/B)\, b b^T$; vectorised,
    $\mathrm{vec}\,S_{t+1} = (A\otimes A)\,\mathrm{vec}\,S_t + (\hat c/B)
    \mathrm{vec}(bb^T)$. The closed form after $k$ steps is the $k$-th power
    of the affine map, computed by repeated squaring: $O(d \log k)$ work. For
    the EMA, $A$ gains the row
    $\bar\theta_{t+1} = \gamma\bar\theta_t + (1-\gamma)(u\theta_t - \beta\theta_{t-1})$
    and $b$ the entry $-(1-\gamma)a$.

    Examples
    --------
    >>> nq = NoisyQuadratic(curvature=[1.0, 0.1], noise=[1.0, 0.1], init=1.0)
    >>> round(nq.expected_loss(lr=0.5, batch_size=10, steps=0), 6)
    0.55
    >>> nq.steps_to_target(0.1, lr=0.5, batch_size=10)
    2.0
    """

    def __init__(
        self,
        curvature,
        noise,
        init=1.0,
        *,
        momentum: float = 0.0,
        precondition: float = 0.0,
        ema: float | None = None,
        dataset_size: int | None = None,
    ):
        h = check_positive(as_array(curvature, "curvature", ndim=1), "curvature")
        if h.size == 0:
            raise InputError("curvature must have at least one direction")
        d = h.size
        c = check_nonnegative(noise, "noise")
        m0 = check_nonnegative(init, "init")
        for name, arr in (("noise", c), ("init", m0)):
            if arr.ndim > 1 or (arr.ndim == 1 and arr.size != d):
                raise InputError(
                    f"{name} must be a scalar or have one entry per direction ({d}), "
                    f"got shape {arr.shape}"
                )
        beta = check_unit_interval(momentum, "momentum")
        p = as_float(precondition, "precondition")
        if ema is not None:
            ema = check_unit_interval(ema, "ema")
        self.curvature = h.astype(float, copy=True)  # own copies, made read-only
        self.noise = np.broadcast_to(c, (d,)).astype(float)
        self.init = np.broadcast_to(m0, (d,)).astype(float)
        if dataset_size is not None:
            dataset_size = check_dataset_size(dataset_size)
        self.dataset_size = dataset_size
        """A finite pool of examples sampled without replacement: the batch-mean noise
        variance is :math:`c_i(1/B - 1/D)` (``noise`` is then the pool's Bessel-corrected
        variance); ``None``: an infinite pool, :math:`c_i/B`."""
        self.momentum = beta
        self.precondition = p
        self.ema = ema
        self.preconditioner = h ** (-p)
        """$p_i = h_i^{-p}$, the diagonal of $P$."""
        self.update_curvature = self.preconditioner * h
        """$P h$: the curvature the (preconditioned) update sees."""
        self.update_noise = self.preconditioner**2 * self.noise
        """$P^2 c$: the per-example noise variance the update sees."""
        self.active = (self.init > 0) | (self.noise > 0)
        """Directions that carry weight (initial second moment or noise > 0)."""
        _check_in_range(self)
        self._freeze()

    # --- constructors ---------------------------------------------------------
    @classmethod
    def zhang(cls, dims: int = 10_000, init=1.0, **options) -> NoisyQuadratic:
        r"""Zhang et al. (2019): $h_i = 1/i$, $c_i = h_i$ ($\Sigma = H$)."""
        return cls.power_law(dims, exponent=1.0, noise=1.0, init=init, **options)

    @classmethod
    @validate_params(noise_like=NoiseLike)
    def power_law(
        cls,
        dims: int,
        exponent: float = 1.0,
        noise: float = 1.0,
        *,
        noise_like: NoiseLike = "curvature",
        init=1.0,
        **options,
    ) -> NoisyQuadratic:
        r"""Spectrum $h_i = i^{-\text{exponent}}$, $i = 1..d$.

        ``noise_like="curvature"`` gives $c_i = \text{noise}\cdot h_i$
        ($\Sigma \propto H$); ``"constant"`` gives $c_i = \text{noise}$.
        """
        dims = check_count(dims, "dims", 1)
        e = as_float(exponent, "exponent")
        s = positive_float(noise, "noise", allow_zero=True)
        h = power_law_spectrum(int(dims), e)
        c = s * h if noise_like == "curvature" else np.full(int(dims), s)
        return cls(h, c, init, **options)

    # --- basic properties -----------------------------------------------------
    @property
    def dims(self) -> int:
        return int(self.curvature.size)

    @property
    def max_stable_lr(self) -> float:
        r"""The learning rate at and above which the expected loss diverges at every
        batch size: $2(1 + \beta)/\max_i \hat h_i$ over the directions with weight
        ($\hat h = Ph$, $\beta$ the heavy-ball momentum; the noise is additive, so the
        batch size does not move the limit). A best rate just under it is not at the edge
        of a grid that stops there: the next larger rate would diverge."""
        top = float(np.max(self.update_curvature[self.active], initial=0.0))
        return math.inf if top == 0 else 2.0 * (1.0 + self.momentum) / top

    @property
    def is_plain(self) -> bool:
        """True for plain (possibly preconditioned) SGD: closed form and exact search."""
        return self.momentum == 0.0 and self.ema is None

    def __repr__(self) -> str:
        opts = []
        if self.momentum:
            opts.append(f"momentum={self.momentum:g}")
        if self.precondition:
            opts.append(f"precondition={self.precondition:g}")
        if self.ema is not None:
            opts.append(f"ema={self.ema:g}")
        extra = (", " + ", ".join(opts)) if opts else ""
        return (
            f"NoisyQuadratic(dims={self.dims}, h=[{self.curvature.min():.3g}, "
            f"{self.curvature.max():.3g}], tr(Σ)={self.noise.sum():.4g}{extra})"
        )

    def initial_loss(self) -> float:
        r"""$E[L(\theta_0)] = \tfrac12\sum_i h_i E[\theta_i(0)^2]$."""
        return float(0.5 * self.curvature @ self.init)

    # --- dynamics (simulate/dynamics.py) -------------------------------------
    def second_moment(self, lr, batch_size, steps) -> np.ndarray:
        r"""Exact $E[\theta_i(k)^2]$ of the raw iterate, shape ``(..., dims)``.

        Broadcasts over ``lr``, ``batch_size`` and ``steps``. Diverging runs give
        ``inf`` (or very large values).
        """
        return dynamics.second_moment(self, lr, batch_size, steps)

    def expected_loss(self, lr, batch_size, steps):
        r"""Exact expected loss $\tfrac12\sum_i h_i E[\theta_i(k)^2]$.

        Broadcasts over ``lr``, ``batch_size`` and ``steps``; scalars give a float.
        For plain SGD this is the closed-form geometric series (O(dims) for any
        ``k``); with momentum or EMA, a matrix power by repeated squaring. With EMA
        the loss is that of the averaged iterate.

        >>> nq = NoisyQuadratic([1.0], noise=1.0, init=1.0)
        >>> nq.expected_loss(0.5, 1, [0, 1, 2]).tolist()
        [0.5, 0.25, 0.1875]
        """
        return dynamics.expected_loss(self, lr, batch_size, steps)

    def stationary_loss(self, lr, batch_size):
        r"""Limit of the expected loss as $k\to\infty$ (``inf`` if it diverges).

        Plain SGD: $\tfrac12\sum_i h_i\, a\hat c_i / (B\hat h_i(2 - a\hat h_i))$.
        """
        return dynamics.stationary_loss(self, lr, batch_size)

    # --- steps to target (simulate/search.py) -----------------------------
    def steps_to_target(self, target, lr, batch_size, *, max_steps: int | None = None):
        r"""Exact smallest number of steps $k$ with expected loss $\le$ target.

        Broadcasts over ``target``, ``lr`` and ``batch_size``; returns floats
        (integer-valued) with ``inf`` where the target is never reached: the run
        diverges ($|1 - a\hat h_i| \ge 1$ in a direction with weight), the
        expected loss stays above the target, or (if given) more than ``max_steps``
        steps are needed. For plain SGD the search is exact and independent of
        ``max_steps`` (see `empirical_batch.simulate._crossing`: runs of one
        learning rate solved together from shared powers of the rates, float64
        checks with a rigorous rounding margin; Newton, bisection and
        branch-and-bound fallbacks). A run that crosses the target only transiently before
        diverging is counted as ``inf``, like a diverged run in a sweep. With momentum
        or EMA the expected loss is iterated step by step up to ``max_steps``
        (default 100000): exact, O(k·dims).

        >>> nq = NoisyQuadratic([1.0, 0.01], noise=0.0, init=1.0)
        >>> nq.steps_to_target(0.004, lr=1.0, batch_size=1)
        12.0
        """
        return search.steps_to_target(self, target, lr, batch_size, max_steps=max_steps)

    def best_lr(self, target, batch_size, lrs, *, max_steps: int | None = None) -> BestLR:
        r"""Learning rate from the grid ``lrs`` that reaches ``target`` in fewest steps.

        For each batch size, $\arg\min_{a \in \text{lrs}} S(a, B)$; ties go to
        the smaller rate. Where no rate reaches the target the result holds NaN/inf.
        """
        return search.best_lr(self, target, batch_size, lrs, max_steps=max_steps)

    # --- noise scales (simulate/traces.py) --------------------------------
    def noise_scalars(self, m):
        r"""(|G|², GᵀHG, tr Σ, tr HΣ) in the preconditioned geometry.

        ``m`` holds second moments $E[\theta_i^2]$ (last axis: directions);
        the first two scalars broadcast over its leading axes. See `noise_scales`
        for the formulas.
        """
        h, p, c = self.curvature, self.preconditioner, self.noise
        g2 = np.einsum("...d,d->...", m, p * h * h)
        ghg = np.einsum("...d,d->...", m, p * p * h**3)
        trs = float(p @ c)
        trhs = float((p * p * h) @ c)
        return g2, ghg, trs, trhs

    def noise_scales(self, lr, batch_size, steps) -> NoiseScaleTrace:
        r"""The model's noise scales along the expected trajectory.

        With $m_i = E[\theta_i^2]$ at each step and $P = H^{-p}$, in the
        preconditioned geometry (McCandlish et al. 2018, App. C):
        $E|G|^2 = \sum_i p_i h_i^2 m_i$, $E[G^THG] = \sum_i p_i^2 h_i^3 m_i$,
        $\operatorname{tr}\Sigma = \sum_i p_i c_i$,
        $\operatorname{tr}(H\Sigma) = \sum_i p_i^2 h_i c_i$, passed to
        `empirical_batch.theory.QuadraticModel.from_scalars`.
        These are *ratios of expectations*, $B_{noise} = E[\operatorname{tr}H\Sigma]
        / E[G^THG]$ (the gradient $G = H\theta$ is random through
        $\theta$), which is what the expected one-step improvement (eq. 2.5)
        depends on; the expectation of the ratio would differ (it is larger, by
        Jensen) and has no closed form here.

        ``lr`` and ``batch_size`` are scalars; ``steps`` a 1-D array of steps.
        """
        return traces.noise_scales(self, lr, batch_size, steps)
