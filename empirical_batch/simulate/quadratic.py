r"""The noisy quadratic model (NQM) and its exact expected dynamics.

Loss :math:`L(\theta) = \tfrac12 \sum_i h_i \theta_i^2` in the eigenbasis of the
Hessian. A per-example gradient is :math:`h_i\theta_i + \xi_i` with zero-mean noise
of variance :math:`c_i` in direction :math:`i`, independent of :math:`\theta`
(additive noise). The mean of :math:`B` independent per-example gradients has noise
variance :math:`c_i/B`. Zhang et al. (2019, "Which algorithmic choices matter at
which batch sizes?") take :math:`\Sigma = H`, i.e. :math:`c_i = h_i`
(:meth:`NoisyQuadratic.zhang`); any constant :math:`c_i \ge 0` is allowed.

Plain SGD with learning rate :math:`a`, preconditioner :math:`P = H^{-p}` (diagonal,
:math:`p_i = h_i^{-p}`) and batch :math:`B`:
:math:`\theta_i \leftarrow \theta_i - a p_i (h_i\theta_i + \xi_i/\sqrt{B}\cdot)`, so
with :math:`\hat h_i = p_i h_i` and :math:`\hat c_i = p_i^2 c_i`

.. math::

    m_i(t+1) = \rho_i\, m_i(t) + q_i,\qquad
    \rho_i = (1 - a\hat h_i)^2,\quad q_i = a^2 \hat c_i / B,

where :math:`m_i(t) = E[\theta_i(t)^2]`. Its closed form is the geometric series

.. math::

    m_i(k) = \rho_i^k m_i(0) + q_i\,\frac{1-\rho_i^k}{1-\rho_i}
           = m_i^\infty + \rho_i^k\,(m_i(0) - m_i^\infty),\qquad
    m_i^\infty = \frac{a \hat c_i}{B\,\hat h_i (2 - a\hat h_i)},

and the expected loss is :math:`E[L](k) = \tfrac12\sum_i h_i m_i(k)`: O(dims) work
for any :math:`k`. The run converges iff :math:`0 < a\hat h_i < 2` in every
direction that carries weight (:math:`m_i(0) > 0` or :math:`c_i > 0`).

Heavy-ball momentum :math:`\beta` and an exponential moving average of the iterates
(EMA, decay :math:`\gamma`) are linear recursions on a small state per direction;
see :class:`NoisyQuadratic` for the second-moment recursions. The model's noise
scales (McCandlish et al. 2018, §2.2, eqs. 2.8–2.9) along the expected trajectory
come from :meth:`NoisyQuadratic.noise_scales`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._frozen import Frozen
from .._validate import (
    as_array,
    as_float,
    check_nonnegative,
    check_positive,
    check_unit_interval,
    positive_float,
    scalar_or_array,
)
from ..theory import QuadraticModel
from ._crossing import (
    _NEG_BIG,
    Workspace,
    first_crossing,
    first_crossing_affine,
    nonneg_rows,
)

__all__ = ["BestLR", "NoiseScaleTrace", "NoisyQuadratic"]

_CHUNK = 1 << 19  # elements (configs x dims) handled at once: bounded memory
# Plain SGD: runs are grouped by learning rate (first_crossing_affine) when there is
# more than this much work per rate, runs x dims / rates; below it one vectorised
# first_crossing over all runs is faster (the grouped path costs ~1.5 ms per rate in
# bookkeeping). Both are exact; timed in benchmarks/bench_simulate.py, part (a').
_GROUPED_MIN_WORK = 8000


def _check_steps(steps, name="steps") -> np.ndarray:
    k = as_array(steps, name)
    if np.any(k < 0) or np.any(k != np.floor(k)):
        raise ValueError(f"{name} must be integers >= 0, got {k.ravel()[0]!r}")
    return k


@dataclass(frozen=True)
class BestLR:
    """Best learning rate from a grid, per batch size.

    ``learning_rate`` is NaN and ``steps`` is inf where no rate of the grid reaches
    the target (reported, not guessed).
    """

    batch_size: np.ndarray | float
    learning_rate: np.ndarray | float
    steps: np.ndarray | float
    target: float

    def to_dict(self) -> dict:
        return {
            "batch_size": np.asarray(self.batch_size).tolist(),
            "learning_rate": np.asarray(self.learning_rate).tolist(),
            "steps": np.asarray(self.steps).tolist(),
            "target": self.target,
        }

    def to_frame(self) -> pd.DataFrame:
        b = np.atleast_1d(self.batch_size)
        s = np.atleast_1d(self.steps)
        return pd.DataFrame(
            {
                "batch_size": b,
                "learning_rate": np.atleast_1d(self.learning_rate),
                "steps": s,
                "examples": s * b,
            }
        )


@dataclass(frozen=True)
class NoiseScaleTrace:
    r"""The model's noise scales along the expected trajectory.

    ``b_noise`` :math:`= E[\operatorname{tr}(H\Sigma)]/E[G^THG]` and ``b_simple``
    :math:`= \operatorname{tr}\Sigma / E|G|^2` at each step: ratios of expectations
    over the SGD randomness (see :meth:`NoisyQuadratic.noise_scales`).
    """

    step: np.ndarray
    loss: np.ndarray
    b_noise: np.ndarray
    b_simple: np.ndarray
    eps_max: np.ndarray

    def to_dict(self) -> dict:
        return {k: np.asarray(v).tolist() for k, v in self.__dict__.items()}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({k: np.asarray(v) for k, v in self.__dict__.items()})


class NoisyQuadratic(Frozen):
    r"""Noisy quadratic problem with exact expected SGD dynamics.

    Parameters
    ----------
    curvature : array (d,)
        Hessian eigenvalues :math:`h_i > 0`.
    noise : float or array (d,)
        Per-example gradient-noise variance :math:`c_i \ge 0` in each direction
        (constant in :math:`\theta`); a batch of :math:`B` has variance :math:`c_i/B`.
    init : float or array (d,)
        Initial second moment :math:`E[\theta_i(0)^2] \ge 0`.
    momentum : float
        Heavy-ball coefficient :math:`\beta \in [0, 1)`.
    precondition : float
        Exponent :math:`p` of the diagonal preconditioner :math:`P = H^{-p}`
        (``0`` is plain SGD, ``1`` is Newton-like). The update is
        :math:`\theta \leftarrow \theta - aP g_B`.
    ema : float, optional
        Decay :math:`\gamma \in [0, 1)` of an exponential moving average of the
        iterates, :math:`\bar\theta_{t+1} = \gamma\bar\theta_t + (1-\gamma)\theta_{t+1}`
        with :math:`\bar\theta_0 = \theta_0`; the reported loss is then that of
        :math:`\bar\theta`.

    Notes
    -----
    With :math:`u_i = 1 + \beta - a\hat h_i` the heavy-ball update is
    :math:`\theta_{t+1} = u\,\theta_t - \beta\theta_{t-1} - a\hat\xi_t`
    (:math:`\theta_{-1} = \theta_0`, i.e. zero initial velocity). Its second moments
    :math:`x_t = E\theta_t^2`, :math:`y_t = E\theta_t\theta_{t-1}`,
    :math:`z_t = E\theta_{t-1}^2` obey the 3×3 linear recursion

    .. math::

        x_{t+1} = u^2 x_t - 2u\beta\, y_t + \beta^2 z_t + a^2\hat c/B,\quad
        y_{t+1} = u\, x_t - \beta\, y_t,\quad z_{t+1} = x_t.

    In general the state :math:`s = (\theta_t, \theta_{t-1}, \bar\theta_t)` (the parts
    in use) follows :math:`s_{t+1} = A s_t + b\,\hat\xi_t`, so its second-moment matrix
    follows :math:`S_{t+1} = A S_t A^T + (\hat c/B)\, b b^T`; vectorised,
    :math:`\mathrm{vec}\,S_{t+1} = (A\otimes A)\,\mathrm{vec}\,S_t + (\hat c/B)
    \mathrm{vec}(bb^T)`. The closed form after :math:`k` steps is the :math:`k`-th power
    of the affine map, computed by repeated squaring: :math:`O(d \log k)` work. For
    the EMA, :math:`A` gains the row
    :math:`\bar\theta_{t+1} = \gamma\bar\theta_t + (1-\gamma)(u\theta_t - \beta\theta_{t-1})`
    and :math:`b` the entry :math:`-(1-\gamma)a`.

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
    ):
        h = check_positive(as_array(curvature, "curvature", ndim=1), "curvature")
        if h.size == 0:
            raise ValueError("curvature must have at least one direction")
        d = h.size
        c = check_nonnegative(noise, "noise")
        m0 = check_nonnegative(init, "init")
        for name, arr in (("noise", c), ("init", m0)):
            if arr.ndim > 1 or (arr.ndim == 1 and arr.size != d):
                raise ValueError(
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
        self.momentum = beta
        self.precondition = p
        self.ema = ema
        self._p = h ** (-p)
        self.update_curvature = self._p * h
        """:math:`P h`: the curvature the (preconditioned) update sees."""
        self.update_noise = self._p**2 * self.noise
        """:math:`P^2 c`: the per-example noise variance the update sees."""
        self._active = (self.init > 0) | (self.noise > 0)
        self._freeze()

    # --- constructors ---------------------------------------------------------
    @classmethod
    def zhang(cls, dims: int = 10_000, init=1.0, **options) -> NoisyQuadratic:
        r"""Zhang et al. (2019): :math:`h_i = 1/i`, :math:`c_i = h_i` (:math:`\Sigma = H`)."""
        return cls.power_law(dims, exponent=1.0, noise=1.0, init=init, **options)

    @classmethod
    def power_law(
        cls,
        dims: int,
        exponent: float = 1.0,
        noise: float = 1.0,
        *,
        noise_like: str = "curvature",
        init=1.0,
        **options,
    ) -> NoisyQuadratic:
        r"""Spectrum :math:`h_i = i^{-\text{exponent}}`, :math:`i = 1..d`.

        ``noise_like="curvature"`` gives :math:`c_i = \text{noise}\cdot h_i`
        (:math:`\Sigma \propto H`); ``"constant"`` gives :math:`c_i = \text{noise}`.
        """
        if isinstance(dims, bool) or int(dims) != dims or dims < 1:
            raise ValueError(f"dims must be a positive integer, got {dims!r}")
        e = as_float(exponent, "exponent")
        s = positive_float(noise, "noise", allow_zero=True)
        h = np.arange(1, int(dims) + 1, dtype=float) ** (-e)
        if noise_like == "curvature":
            c = s * h
        elif noise_like == "constant":
            c = np.full(int(dims), s)
        else:
            raise ValueError(
                f"noise_like must be 'curvature' or 'constant', got {noise_like!r}"
            )
        return cls(h, c, init, **options)

    # --- basic properties -----------------------------------------------------
    @property
    def dims(self) -> int:
        return int(self.curvature.size)

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
        r""":math:`E[L(\theta_0)] = \tfrac12\sum_i h_i E[\theta_i(0)^2]`."""
        return float(0.5 * self.curvature @ self.init)

    # --- inputs ---------------------------------------------------------------
    @staticmethod
    def _lr_b(lr, batch_size):
        a = check_positive(lr, "lr")
        b = check_positive(batch_size, "batch_size")
        return a, b

    # --- plain SGD closed form ------------------------------------------------
    def _plain_terms(self, a, b):
        """log rho, q and 1 - rho for broadcast arrays a, b (shape (..., 1))."""
        x = a * self.update_curvature  # a * p h
        with np.errstate(divide="ignore"):
            logrho = 2.0 * np.log(np.abs(1.0 - x))
        q = a * a * self.update_noise / b
        one_minus = x * (2.0 - x)  # 1 - rho without cancellation
        return logrho, q, one_minus

    def _plain_moment(self, a, b, k):
        logrho, q, one_minus = self._plain_terms(a, b)
        with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
            rk = np.where(k == 0, 1.0, np.exp(k * logrho))
            geo = np.where(one_minus == 0, k, -np.expm1(k * logrho) / one_minus)
            geo = np.where(k == 0, 0.0, geo)
            m = rk * self.init + np.where(q == 0, 0.0, q * geo)
        return m

    def _general_scalars(self, lr, batch_size, steps, fn):
        """Broadcast (lr, B, steps), apply fn(a, b, k) -> (..., d) chunk-wise."""
        a, b = self._lr_b(lr, batch_size)
        k = _check_steps(steps)
        shape = np.broadcast_shapes(a.shape, b.shape, k.shape)
        af, bf, kf = (np.broadcast_to(x, shape).ravel() for x in (a, b, k))
        n = af.size
        rows = max(1, _CHUNK // self.dims)
        outs = []
        for s in range(0, n, rows):
            sl = slice(s, s + rows)
            outs.append(fn(af[sl, None], bf[sl, None], kf[sl, None]))
        res = np.concatenate(outs, axis=0) if outs else np.empty((0,))
        return res.reshape(shape + res.shape[1:])

    # --- public dynamics ------------------------------------------------------
    def second_moment(self, lr, batch_size, steps) -> np.ndarray:
        r"""Exact :math:`E[\theta_i(k)^2]` of the raw iterate, shape ``(..., dims)``.

        Broadcasts over ``lr``, ``batch_size`` and ``steps``. Diverging runs give
        ``inf`` (or very large values).
        """
        if self.is_plain:
            return self._general_scalars(lr, batch_size, steps, self._plain_moment)
        return self._general_scalars(
            lr, batch_size, steps, lambda a, b, k: self._linear_moments(a, b, k)[..., 0]
        )

    def expected_loss(self, lr, batch_size, steps):
        r"""Exact expected loss :math:`\tfrac12\sum_i h_i E[\theta_i(k)^2]`.

        Broadcasts over ``lr``, ``batch_size`` and ``steps``; scalars give a float.
        For plain SGD this is the closed-form geometric series (O(dims) for any
        ``k``); with momentum or EMA, a matrix power by repeated squaring. With EMA
        the loss is that of the averaged iterate.

        >>> nq = NoisyQuadratic([1.0], noise=1.0, init=1.0)
        >>> nq.expected_loss(0.5, 1, [0, 1, 2]).tolist()
        [0.5, 0.25, 0.1875]
        """
        h = self.curvature
        if self.is_plain:
            fn = self._plain_moment
        else:
            idx = self._loss_index()

            def fn(a, b, k):
                return self._linear_moments(a, b, k)[..., idx]

        with np.errstate(over="ignore", invalid="ignore"):
            m = self._general_scalars(lr, batch_size, steps, fn)
            loss = 0.5 * np.einsum("...d,d->...", m, h)
        return scalar_or_array(loss)

    def stationary_loss(self, lr, batch_size):
        r"""Limit of the expected loss as :math:`k\to\infty` (``inf`` if it diverges).

        Plain SGD: :math:`\tfrac12\sum_i h_i\, a\hat c_i / (B\hat h_i(2 - a\hat h_i))`.
        """
        a, b = self._lr_b(lr, batch_size)
        shape = np.broadcast_shapes(a.shape, b.shape)
        af = np.broadcast_to(a, shape).ravel()[:, None]
        bf = np.broadcast_to(b, shape).ravel()[:, None]
        if self.is_plain:
            l_inf, _, _, converges = self._plain_split(af, bf)
            out = np.where(converges, l_inf, np.inf)
        else:
            out = np.array([self._linear_stationary(x, y) for x, y in zip(af, bf, strict=True)])
        return scalar_or_array(out.reshape(shape))

    # --- steps to target --------------------------------------------------------
    def _plain_split(self, a, b):
        """L_inf, weights w_i, log rho_i and convergence flag for (n, 1) arrays."""
        logrho, q, one_minus = self._plain_terms(a, b)
        act = self._active
        constant = (one_minus == 0) & (q == 0)  # rho == 1 and no noise: m stays m0
        bad = ((one_minus < 0) | ((one_minus == 0) & (q > 0))) & act
        converges = ~bad.any(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            m_inf = np.where(constant, self.init, q / np.where(one_minus > 0, one_minus, 1.0))
        m_inf = np.where(act, m_inf, 0.0)
        h = self.curvature
        l_inf = 0.5 * np.einsum("nd,d->n", m_inf, h)
        w = np.where(constant | ~act, 0.0, 0.5 * h * (self.init - m_inf))
        logrho = np.where(one_minus > 0, logrho, -np.inf)
        return l_inf, w, logrho, converges

    def steps_to_target(self, target, lr, batch_size, *, max_steps: int | None = None):
        r"""Exact smallest number of steps :math:`k` with expected loss :math:`\le` target.

        Broadcasts over ``target``, ``lr`` and ``batch_size``; returns floats
        (integer-valued) with ``inf`` where the target is never reached: the run
        diverges (:math:`|1 - a\hat h_i| \ge 1` in a direction with weight), the
        expected loss stays above the target, or (if given) more than ``max_steps``
        steps are needed. For plain SGD the search is exact and independent of
        ``max_steps`` (see :mod:`empirical_batch.simulate._crossing`: runs of one
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
        t = check_positive(target, "target")
        a, b = self._lr_b(lr, batch_size)
        cap = None if max_steps is None else int(_check_steps(max_steps, "max_steps"))
        shape = np.broadcast_shapes(t.shape, a.shape, b.shape)
        tf, af, bf = (np.broadcast_to(x, shape).ravel() for x in (t, a, b))
        if self.is_plain:
            out = self._plain_steps(tf, af, bf)
            if cap is not None:
                out = np.where(out > cap, np.inf, out)
        else:
            out = self._scan_steps(tf, af, bf, 100_000 if cap is None else cap)
        return scalar_or_array(out.reshape(shape))

    def _plain_steps(self, t, a, b) -> np.ndarray:
        """Exact first crossings for plain SGD; runs grouped by learning rate.

        Runs with the same rate share decay rates rho_i and have weights
        ``aw - sw / B``, so the fast path (:func:`first_crossing_affine`) handles them
        together; runs with weights of both signs, or that it cannot settle, go to
        :func:`first_crossing`. Small problems (little work per rate, see
        ``_GROUPED_MIN_WORK``) go to :func:`first_crossing` at once.
        """
        out = np.full(t.size, np.inf)
        h, m0, act = self.curvature, self.init, self._active
        hp, cp = self.update_curvature, self.update_noise
        uniq, inv = np.unique(a, return_inverse=True)
        if t.size * h.size < _GROUPED_MIN_WORK * uniq.size:
            return self._general_steps(t, a, b)
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(uniq.size + 1))
        aw = np.where(act, 0.5 * h * m0, 0.0)
        work = Workspace()  # scratch arrays shared by the learning rates
        l0 = self.initial_loss()
        for g, lr in enumerate(uniq):
            rows = order[bounds[g] : bounds[g + 1]]
            x = lr * hp
            one_minus = x * (2.0 - x)
            if np.any(act & (one_minus < 0)) or np.any(act & (one_minus == 0) & (cp > 0)):
                continue  # diverges at every batch size: inf
            if np.any(act & (one_minus == 0)):
                out[rows] = self._general_steps(t[rows], a[rows], b[rows])
                continue
            r = 1.0 - x
            with np.errstate(divide="ignore"):
                logrho = np.maximum(2.0 * np.log(np.abs(r)), _NEG_BIG)
            rho = r * r
            # L_inf * B; inactive directions (no init, no noise) may sit at x = 2
            sw = np.divide(0.5 * h * lr * cp, hp * (2.0 - x), out=np.zeros_like(h), where=act)
            inv_b = 1.0 / b[rows]
            y = t[rows] - inv_b * sw.sum()
            # weights aw - sw / B: all >= 0 for these rows (checked without forming them)
            nonneg = nonneg_rows(aw, sw, -inv_b)
            res = np.full(rows.size, np.nan)
            res[nonneg & (y < 0)] = np.inf  # L(k) >= L_inf > target for every k
            res[t[rows] >= l0] = 0.0  # L(0) is the initial loss, whatever a and B
            fast = nonneg & (y > 0) & np.isnan(res)
            if fast.any():
                res[fast] = first_crossing_affine(
                    aw, sw, -inv_b[fast], y[fast], logrho, rho, work=work
                )
            todo = np.flatnonzero(np.isnan(res))
            if todo.size:
                res[todo] = self._general_steps(t[rows][todo], a[rows][todo], b[rows][todo])
            out[rows] = res
        return out

    def _general_steps(self, t, a, b) -> np.ndarray:
        l_inf, w, logrho, conv = self._plain_split(a[:, None], b[:, None])
        k = np.full(t.size, np.inf)
        if conv.any():
            k[conv] = first_crossing(l_inf[conv], w[conv], logrho[conv], t[conv])
        # L(0) is the initial loss itself (l_inf + sum(w) may round above it)
        k[conv & (t >= self.initial_loss())] = 0.0
        return k

    def best_lr(self, target, batch_size, lrs, *, max_steps: int | None = None) -> BestLR:
        r"""Learning rate from the grid ``lrs`` that reaches ``target`` in fewest steps.

        For each batch size, :math:`\arg\min_{a \in \text{lrs}} S(a, B)`; ties go to
        the smaller rate. Where no rate reaches the target the result holds NaN/inf.
        """
        t = positive_float(target, "target")
        b = check_positive(batch_size, "batch_size")
        grid = np.sort(check_positive(as_array(lrs, "lrs", ndim=1), "lrs"))
        if grid.size == 0:
            raise ValueError("lrs must not be empty")
        bb = np.atleast_1d(b)
        steps = np.asarray(
            self.steps_to_target(t, grid[None, :], bb[:, None], max_steps=max_steps)
        ).reshape(bb.size, grid.size)
        j = np.argmin(steps, axis=1)
        best = steps[np.arange(bb.size), j]
        lr = np.where(np.isfinite(best), grid[j], np.nan)
        if b.ndim == 0:
            return BestLR(float(b), float(lr[0]), float(best[0]), t)
        return BestLR(b, lr, best, t)

    # --- noise scales ------------------------------------------------------------
    def noise_scalars(self, m):
        r"""(|G|², GᵀHG, tr Σ, tr HΣ) in the preconditioned geometry.

        ``m`` holds second moments :math:`E[\theta_i^2]` (last axis: directions);
        the first two scalars broadcast over its leading axes. See `noise_scales`
        for the formulas.
        """
        h, p, c = self.curvature, self._p, self.noise
        g2 = np.einsum("...d,d->...", m, p * h * h)
        ghg = np.einsum("...d,d->...", m, p * p * h**3)
        trs = float(p @ c)
        trhs = float((p * p * h) @ c)
        return g2, ghg, trs, trhs

    def noise_scales(self, lr, batch_size, steps) -> NoiseScaleTrace:
        r"""The model's noise scales along the expected trajectory.

        With :math:`m_i = E[\theta_i^2]` at each step and :math:`P = H^{-p}`, in the
        preconditioned geometry (McCandlish et al. 2018, App. C):
        :math:`E|G|^2 = \sum_i p_i h_i^2 m_i`, :math:`E[G^THG] = \sum_i p_i^2 h_i^3 m_i`,
        :math:`\operatorname{tr}\Sigma = \sum_i p_i c_i`,
        :math:`\operatorname{tr}(H\Sigma) = \sum_i p_i^2 h_i c_i`, passed to
        :meth:`empirical_batch.theory.QuadraticModel.from_scalars`.
        These are *ratios of expectations*, :math:`B_{noise} = E[\operatorname{tr}H\Sigma]
        / E[G^THG]` (the gradient :math:`G = H\theta` is random through
        :math:`\theta`), which is what the expected one-step improvement (eq. 2.5)
        depends on; the expectation of the ratio would differ (it is larger, by
        Jensen) and has no closed form here.

        ``lr`` and ``batch_size`` are scalars; ``steps`` a 1-D array of steps.
        """
        a, b = self._lr_b(lr, batch_size)
        if a.ndim or b.ndim:
            raise ValueError("noise_scales takes a scalar lr and batch_size")
        k = np.atleast_1d(_check_steps(steps))
        if k.ndim != 1:
            raise ValueError("steps must be a 1-D array")
        m = self.second_moment(float(a), float(b), k)
        g2, ghg, trs, trhs = self.noise_scalars(m)
        bn, bs, em = [], [], []
        for x, y in zip(g2, ghg, strict=True):
            if not (np.isfinite(x) and np.isfinite(y)) or x <= 0 or y <= 0:
                bn.append(np.nan)
                bs.append(np.nan)
                em.append(np.nan)
                continue
            qm = QuadraticModel.from_scalars(g2=x, ghg=y, trace_sigma=trs, trace_h_sigma=trhs)
            bn.append(qm.b_noise)
            bs.append(qm.b_simple)
            em.append(qm.eps_max)
        loss = np.asarray(self.expected_loss(float(a), float(b), k))
        return NoiseScaleTrace(k, loss, np.array(bn), np.array(bs), np.array(em))

    # --- momentum / EMA: linear recursion on second moments -------------------
    def _loss_index(self) -> int:
        """Index into vec(S) of the second moment whose loss is reported."""
        n = self._state_dim()
        j = n - 1 if self.ema is not None else 0
        return j * n + j

    def _state_dim(self) -> int:
        return 1 + (self.momentum > 0) + (self.ema is not None)

    def _system(self, a, b):
        """A (..., d, n, n), noise vector bvec (..., d, n) and per-direction variance."""
        beta, g = self.momentum, self.ema
        n = self._state_dim()
        shape = np.broadcast_shapes(a.shape, b.shape, self.update_curvature.shape)
        u = 1.0 + beta - a * self.update_curvature
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
        var = np.broadcast_to(self.update_noise / b, shape)
        return A, bv, var

    def _affine(self, a, b):
        """Augmented (m+1)x(m+1) matrix of vec S -> (A⊗A) vec S + var vec(bbᵀ)."""
        A, bv, var = self._system(a, b)
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

    def _s0(self, n):
        return np.concatenate(
            [np.repeat(self.init[:, None], n * n, axis=1), np.ones((self.dims, 1))], axis=1
        )

    def _linear_moments(self, a, b, k):
        """vec(S_k) per direction, shape (rows, d, n*n), by repeated squaring."""
        M, n = self._affine(a, b)  # (rows, d, m+1, m+1)
        k = np.broadcast_to(k, (*M.shape[:1], 1))[:, 0].astype(np.int64)
        v = np.broadcast_to(self._s0(n), M.shape[:-1]).copy()  # (rows, d, m+1)
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

    def _linear_stationary(self, a, b) -> float:
        M, n = self._affine(a[None, :], b[None, :])
        M = M[0]
        m = n * n
        A, _, _ = self._system(a[None, :], b[None, :])
        rad = np.max(np.abs(np.linalg.eigvals(A[0])), axis=-1)
        if np.any((rad >= 1.0) & self._active):
            return np.inf
        K, q = M[:, :m, :m], M[:, :m, m]
        s = np.linalg.solve(np.eye(m) - K, q[..., None])[..., 0]
        return float(0.5 * self.curvature @ s[:, self._loss_index()])

    def _scan_steps(self, t, a, b, limit):
        """Iterate the second-moment recursion; first k with loss <= t (or inf)."""
        n_runs = t.size
        out = np.full(n_runs, np.inf)
        rows = max(1, (_CHUNK // 8) // self.dims)
        idx = self._loss_index()
        h = self.curvature
        for s in range(0, n_runs, rows):
            sl = slice(s, s + rows)
            M, n = self._affine(a[sl, None], b[sl, None])
            K, q = M[..., : n * n, : n * n], M[..., : n * n, n * n]
            v = np.broadcast_to(self._s0(n)[:, : n * n], q.shape).copy()
            tt = t[sl]
            res = np.full(tt.size, np.inf)
            open_ = np.ones(tt.size, bool)
            with np.errstate(over="ignore", invalid="ignore"):
                for k in range(limit + 1):
                    loss = 0.5 * (v[..., idx] @ h)
                    hit = open_ & (loss <= tt)
                    res[hit] = k
                    open_ &= ~hit & np.isfinite(loss) & (loss < 1e300)
                    if not open_.any() or k == limit:
                        break
                    v = np.einsum("rdij,rdj->rdi", K, v) + q
            out[sl] = res
        return out
