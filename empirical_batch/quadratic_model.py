r"""The local quadratic model of the loss, `QuadraticModel`, and the built-in problems
(`anisotropic_quadratic`, `power_law_spectrum`). `empirical_batch.theory` re-exports them;
the model itself is described there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._frozen import Frozen
from ._validate import (
    as_array,
    as_float,
    check_dataset_size,
    check_nonnegative,
    check_psd,
    check_symmetric,
    scalar_or_array,
)
from .errors import InputError
from .one_step import check_momentum, inverse_batch, noise_scales_from_scalars, over_one_plus
from .params import Domain, validate_params

__all__ = ["QuadraticModel", "anisotropic_quadratic", "power_law_spectrum"]


def _square_or_diag(arr: np.ndarray, name: str, n: int) -> None:
    if arr.ndim == 2 and arr.shape[0] != arr.shape[1]:
        raise InputError(f"{name} must be a square matrix, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise InputError(
            f"{name} has shape {arr.shape}, which does not match gradient of length {n}"
        )


def _dense(arr: np.ndarray) -> np.ndarray:
    return np.diag(arr) if arr.ndim == 1 else arr


def _diagonal(arr: np.ndarray) -> np.ndarray:
    return arr if arr.ndim == 1 else np.diagonal(arr)


def _scale(m: np.ndarray, arr: np.ndarray) -> np.ndarray:
    """M A M for the diagonal M = diag(m), with A dense or diagonal."""
    out: np.ndarray = (m if arr.ndim == 1 else m[:, None]) * arr * m
    return out


class QuadraticModel(Frozen):
    r"""The local quadratic model of the loss around the current parameters.

    Parameters
    ----------
    gradient : array (n,)
        True (full-batch) gradient $G$; must not be zero.
    hessian : array (n, n) or (n,)
        Hessian $H$ (symmetric, with $G^THG > 0$), or its diagonal.
        $H$ need not be positive definite; only the curvature along the
        gradient must be positive for a best step to exist.
    noise_cov : array (n, n) or (n,)
        Per-example gradient covariance $\Sigma$ (symmetric PSD), or its diagonal.
    dataset_size : int, optional
        Sample batches without replacement from this many examples: the batch
        covariance becomes $\Sigma(1/B - 1/D)$ ($\Sigma$ with the
        $1/(D-1)$ normalisation).

    Examples
    --------
    >>> m = QuadraticModel(gradient=[1.0, 1.0], hessian=[1.0, 3.0], noise_cov=[4.0, 4.0])
    >>> m.b_noise, m.b_simple
    (4.0, 4.0)
    >>> m.eps_opt(4.0)
    0.25
    >>> m.eps_opt(4.0, momentum=0.5)  # the raw rate whose effective step is optimal
    0.125
    """

    def __init__(self, gradient: ArrayLike, hessian: ArrayLike, noise_cov: ArrayLike, *,
                 dataset_size: int | None = None) -> None:
        g = as_array(gradient, "gradient", ndim=1)
        n = g.shape[0]
        h = as_array(hessian, "hessian", ndim=(1, 2))
        s = as_array(noise_cov, "noise_cov", ndim=(1, 2))
        _square_or_diag(h, "hessian", n)
        _square_or_diag(s, "noise_cov", n)
        if h.ndim == 2:
            check_symmetric(h, "hessian")
        if s.ndim == 2:
            check_psd(s, "noise_cov")
        else:
            check_nonnegative(s, "noise_cov")
        with np.errstate(over="ignore", invalid="ignore"):
            g2 = float(g @ g)
            hg = h * g if h.ndim == 1 else h @ g
            if h.ndim == 2 and s.ndim == 2:
                tr_hs = float(np.sum(h * s.T))
            else:  # a diagonal factor sees only the other one's diagonal
                tr_hs = float(_diagonal(h) @ _diagonal(s))
            scalars = {"g2": g2, "ghg": float(g @ hg), "trace_sigma": float(np.sum(_diagonal(s))),
                       "trace_h_sigma": tr_hs}
        if g2 == 0.0:
            raise InputError("gradient must not be zero: the noise scales divide by |G|^2")
        over = [k for k, v in scalars.items() if not math.isfinite(v)]
        if over:
            raise InputError(f"gradient, hessian and noise_cov give {', '.join(over)} beyond "
                             "the largest float (values near 1e308 multiplied); rescale them")
        # own copies: they are made read-only, and must not alias the caller's arrays
        self.gradient, self.hessian, self.noise_cov = g.copy(), h.copy(), s.copy()
        self._init_scalars(**scalars, dataset_size=dataset_size)

    # --- alternative constructors ------------------------------------------------
    @classmethod
    def from_scalars(
        cls,
        *,
        g2: float,
        ghg: float,
        trace_sigma: float,
        trace_h_sigma: float,
        dataset_size: int | None = None,
    ) -> QuadraticModel:
        r"""Build the model from its four summary scalars.

        ``g2`` = $|G|^2$, ``ghg`` = $G^THG$, ``trace_sigma`` =
        $\operatorname{tr}\Sigma$, ``trace_h_sigma`` =
        $\operatorname{tr}(H\Sigma)$. Such a model has no matrices, so
        `preconditioned` is not available.

        >>> QuadraticModel.from_scalars(g2=2.0, ghg=4.0, trace_sigma=8.0, trace_h_sigma=16.0)
        QuadraticModel(b_noise=4, b_simple=4, eps_max=0.5, dl_max=0.5)
        """
        self = cls.__new__(cls)
        self.gradient = self.hessian = self.noise_cov = None  # type: ignore[assignment]
        self._init_scalars(
            g2=g2, ghg=ghg, trace_sigma=trace_sigma, trace_h_sigma=trace_h_sigma,
            dataset_size=dataset_size,
        )
        return self

    @classmethod
    def from_eigenbasis(
        cls,
        eigenvalues: ArrayLike,
        eigenvectors: ArrayLike,
        gradient: ArrayLike,
        noise_cov: ArrayLike,
        *,
        dataset_size: int | None = None,
        atol: float = 1e-8,
    ) -> QuadraticModel:
        r"""Build the model from the Hessian's spectrum $H = V\Lambda V^T$.

        Parameters
        ----------
        eigenvalues : array (n,)
            $\lambda_i$, the diagonal of $\Lambda$.
        eigenvectors : array (n, n)
            $V$, orthonormal columns (``eigenvectors[:, i]`` belongs to
            ``eigenvalues[i]``), as returned by `numpy.linalg.eigh`.
        gradient : array (n,)
            $G$ in the original coordinates.
        noise_cov : array (n, n) or (n,)
            $\Sigma$ in the original coordinates, or the 1-D vector of
            variances along the eigenvectors, $v_i^T \Sigma v_i$. Only those
            enter $\operatorname{tr}\Sigma$ and
            $\operatorname{tr}(H\Sigma) = \sum_i \lambda_i v_i^T\Sigma v_i$.
        atol : float
            Tolerance on $\max|V^TV - I|$.

        Returns
        -------
        QuadraticModel
            The model in the eigenbasis: ``gradient`` is
            $V^TG$, ``hessian`` the 1-D $\lambda$, ``noise_cov``
            $V^T\Sigma V$ (or the given variances). All scalars are basis-invariant.

        Examples
        --------
        >>> import numpy as np
        >>> v = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2)
        >>> m = QuadraticModel.from_eigenbasis([1.0, 3.0], v, v @ [1.0, 1.0], [4.0, 4.0])
        >>> round(m.b_noise, 12), round(m.eps_opt(4.0), 12)
        (4.0, 0.25)
        """
        lam = as_array(eigenvalues, "eigenvalues", ndim=1)
        v = as_array(eigenvectors, "eigenvectors", ndim=2)
        n = lam.shape[0]
        if v.shape != (n, n):
            raise InputError(
                f"eigenvectors must have shape ({n}, {n}) to match eigenvalues, got {v.shape}"
            )
        err = float(np.max(np.abs(v.T @ v - np.eye(n))))
        if err > atol:
            raise InputError(
                f"eigenvectors must be orthonormal columns; max |VᵀV - I| = {err:.3g}"
            )
        g = as_array(gradient, "gradient", ndim=1)
        if g.shape[0] != n:
            raise InputError(f"gradient has length {g.shape[0]}, expected {n}")
        s = as_array(noise_cov, "noise_cov", ndim=(1, 2))
        _square_or_diag(s, "noise_cov", n)
        if s.ndim == 2:
            check_psd(s, "noise_cov")
            s = v.T @ s @ v
            s = 0.5 * (s + s.T)
        return cls(v.T @ g, lam, s, dataset_size=dataset_size)

    def preconditioned(self, preconditioner: ArrayLike) -> QuadraticModel:
        r"""The model of the update $\theta \leftarrow \theta - \epsilon P G_{est}$.

        With $M = P^{1/2}$ and $\theta = M\phi$, the update is plain SGD on
        $\phi$ with gradient $MG$, Hessian $MHM$ and per-example
        covariance $M\Sigma M$, so (App. C)

        $$
        B_{noise} = \frac{\operatorname{tr}(PHP\Sigma)}{G^TPHPG},\quad
        \epsilon_{max} = \frac{G^TPG}{G^TPHPG},\quad
        B_{simple} = \frac{\operatorname{tr}(P\Sigma)}{G^TPG},
        $$

        and ``eps_opt``/``expected_improvement`` of the returned model refer to the
        learning rate $\epsilon$ multiplying $PG_{est}$.

        Parameters
        ----------
        preconditioner : array (n, n) or (n,)
            Symmetric positive definite $P$, or its (positive) diagonal, as for
            Adam/RMSProp with a frozen second-moment estimate.

        Examples
        --------
        >>> m = QuadraticModel(gradient=[1.0, 1.0], hessian=[1.0, 4.0], noise_cov=[1.0, 1.0])
        >>> p = m.preconditioned([1.0, 0.25])   # P = H⁻¹: Newton's direction
        >>> p.eps_max, p.b_noise
        (1.0, 1.0)
        """
        if self.gradient is None:
            raise InputError(
                "preconditioned() needs gradient, hessian and noise_cov; this model was "
                "built from scalars"
            )
        n = self.gradient.shape[0]
        p = as_array(preconditioner, "preconditioner", ndim=(1, 2))
        _square_or_diag(p, "preconditioner", n)
        if p.ndim == 1:
            if np.any(p <= 0):
                raise InputError(
                    f"preconditioner must be positive definite; smallest diagonal entry "
                    f"is {p.min():.3g}"
                )
            m = np.sqrt(p)
            g = m * self.gradient
            h, s = _scale(m, self.hessian), _scale(m, self.noise_cov)
        else:
            check_psd(p, "preconditioner", strict=True)
            w, u = np.linalg.eigh(p)
            m = (u * np.sqrt(w)) @ u.T
            m = 0.5 * (m + m.T)
            g = m @ self.gradient
            h = m @ _dense(self.hessian) @ m
            s = m @ _dense(self.noise_cov) @ m
            h, s = 0.5 * (h + h.T), 0.5 * (s + s.T)
        return QuadraticModel(g, h, s, dataset_size=self.dataset_size)

    def _init_scalars(self, *, g2: float, ghg: float, trace_sigma: float, trace_h_sigma: float,
                      dataset_size: int | None) -> None:
        self.g2 = as_float(g2, "g2")
        self.ghg = as_float(ghg, "ghg")
        self.trace_sigma = as_float(trace_sigma, "trace_sigma")
        self.trace_h_sigma = as_float(trace_h_sigma, "trace_h_sigma")
        if self.g2 <= 0:
            raise InputError(f"|G|^2 must be > 0, got {self.g2!r}")
        if self.ghg <= 0:
            raise InputError(
                f"GᵀHG must be > 0 for the step to have an optimum, got {self.ghg!r}: "
                "the loss is not curved upward along the gradient"
            )
        if self.trace_sigma < 0:
            raise InputError(f"tr(Σ) must be >= 0, got {self.trace_sigma!r}")
        if self.trace_h_sigma < 0:
            raise InputError(
                f"tr(HΣ) must be >= 0, got {self.trace_h_sigma!r}: "
                "a negative noise term would make larger steps always better"
            )
        if dataset_size is not None:
            dataset_size = check_dataset_size(dataset_size, 1)
        self.dataset_size = dataset_size
        self._derived = noise_scales_from_scalars(
            self.g2, self.ghg, self.trace_sigma, self.trace_h_sigma)
        over = [k for k, v in self._derived.items() if not math.isfinite(v)]
        if over:
            raise InputError(f"{', '.join(over)} of this model exceed the largest float "
                             "(the gradient, hessian or noise are too large or too small "
                             "relative to each other); rescale them")
        self._freeze()

    # --- the paper's scalars ---------------------------------------------------
    @property
    def b_noise(self) -> float:
        r"""$B_{noise} = \operatorname{tr}(H\Sigma) / G^THG$ (eq. 2.8)."""
        return float(self._derived["b_noise"])

    @property
    def b_simple(self) -> float:
        r"""$B_{simple} = \operatorname{tr}\Sigma / |G|^2$ (eq. 2.9)."""
        return float(self._derived["b_simple"])

    @property
    def eps_max(self) -> float:
        r"""$\epsilon_{max} = |G|^2 / G^THG$, the optimal step at infinite batch."""
        return float(self._derived["eps_max"])

    @property
    def dl_max(self) -> float:
        r"""$\Delta L_{max} = \tfrac12 |G|^4 / G^THG$, the best one-step improvement."""
        return float(self._derived["dl_max"])

    # --- batch-size dependent predictions -------------------------------------
    def _noise_factor(self, batch_size: ArrayLike) -> np.ndarray:
        """B_noise/B (with the finite-dataset correction when dataset_size is set)."""
        return self.b_noise * inverse_batch(batch_size, self.dataset_size)

    def _effective_batch(self, batch_size: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """(B_eff, B_noise) broadcast, with 1/B_eff = 1/B - 1/D (checked by
        `inverse_batch`), B_eff = B/(1 - B/D) formed without 1/B (no overflow for a tiny
        B; inf at B = D, where the gradient is exact)."""
        inverse_batch(batch_size, self.dataset_size)  # the checks
        b = np.asarray(batch_size, dtype=float)
        if self.dataset_size is not None:
            with np.errstate(divide="ignore"):
                b = b / (1.0 - b / float(self.dataset_size))
        b, n = np.broadcast_arrays(b, np.asarray(self.b_noise, dtype=float))
        return b, n

    def eps_opt(self, batch_size: ArrayLike, *, momentum: float = 0.0) -> Any:
        r"""$\epsilon_{opt}(B) = \epsilon_{max} / (1 + B_{noise}/B)$ (eq. 2.6).

        With heavy-ball ``momentum`` m, the raw rate $(1-m)\epsilon_{opt}(B)$,
        whose effective step $\epsilon/(1-m)$ is optimal.
        """
        m = check_momentum(momentum)
        return scalar_or_array(over_one_plus(np.asarray((1.0 - m) * self.eps_max),
                                              *self._effective_batch(batch_size)))

    def dl_opt(self, batch_size: ArrayLike) -> Any:
        r"""$\Delta L_{opt}(B) = \Delta L_{max} / (1 + B_{noise}/B)$ (eq. 2.7).

        Momentum only rescales the rate at which this is reached, not the value.
        """
        return scalar_or_array(over_one_plus(np.asarray(self.dl_max),
                                              *self._effective_batch(batch_size)))

    def expected_improvement(self, eps: ArrayLike, batch_size: ArrayLike, *,
                             momentum: float = 0.0) -> Any:
        r"""Expected loss decrease of one SGD step of size ε at batch size B.

        $$
        \epsilon |G|^2 - \tfrac12 \epsilon^2
        \left(G^THG + \operatorname{tr}(H\Sigma)/B\right)
        $$

        (eq. 2.5; $1/B \to 1/B - 1/D$ with ``dataset_size``; $\epsilon \to
        \epsilon/(1-m)$ with ``momentum``). Negative when the step increases the loss
        (ε > 2 ε_opt(B)). Broadcasts ``eps`` against ``batch_size``.
        """
        e = check_nonnegative(eps, "eps") / (1.0 - check_momentum(momentum))
        inv_b = inverse_batch(batch_size, self.dataset_size)
        return scalar_or_array(e * self.g2 - 0.5 * e**2 * (self.ghg + self.trace_h_sigma * inv_b))

    def gradient_noise_ratio(self, batch_size: ArrayLike) -> Any:
        r"""$E|G_{est} - G|^2 / |G|^2 = B_{simple}/B$ (eq. 2.10)."""
        return scalar_or_array(self.b_simple * inverse_batch(batch_size, self.dataset_size))

    def to_dict(self) -> dict[str, Any]:
        """The four input scalars and the derived ones, as plain floats."""
        return {
            "g2": self.g2,
            "ghg": self.ghg,
            "trace_sigma": self.trace_sigma,
            "trace_h_sigma": self.trace_h_sigma,
            "dataset_size": self.dataset_size,
            "b_noise": self.b_noise,
            "b_simple": self.b_simple,
            "eps_max": self.eps_max,
            "dl_max": self.dl_max,
        }

    def __repr__(self) -> str:
        return (
            f"QuadraticModel(b_noise={self.b_noise:.4g}, b_simple={self.b_simple:.4g}, "
            f"eps_max={self.eps_max:.4g}, dl_max={self.dl_max:.4g})"
        )


_DIMENSION = Domain(1.0, low_open=False, integer=True, meaning="parameters of the problem")


@validate_params(n=_DIMENSION, noise=Domain(0.0, low_open=False, meaning="noise scale c"))
def anisotropic_quadratic(n: int = 1000, *, noise: float = 100.0,
                          theta: float = 1.0) -> QuadraticModel:
    r"""The built-in demo problem: spectrum $h_i = 1/i$ and noise $\Sigma = cH$.

    The loss is $L(\theta) = \tfrac12\sum_i h_i\theta_i^2$ with
    $h_i = 1/i$, $i = 1..n$ (the noisy quadratic of Zhang et al. 2019),
    evaluated at $\theta_i = \theta$ (argument ``theta``) for all i, so $G_i = h_i\theta$;
    per-example gradient covariance $\Sigma = c\,H$ with $c$ the argument ``noise``.
    Then $B_{noise} = c\sum h_i^2 / (\theta^2\sum h_i^3)$ and
    $B_{simple} = c\sum h_i / (\theta^2\sum h_i^2)$.

    >>> m = anisotropic_quadratic(3, noise=1.0)
    >>> round(m.b_noise, 6)  # (1 + 1/4 + 1/9) / (1 + 1/8 + 1/27)
    1.171315
    """
    c = as_float(noise, "noise")
    t = as_float(theta, "theta")
    if t == 0:
        raise InputError("theta must not be 0: the gradient would vanish")
    h = power_law_spectrum(int(n))
    return QuadraticModel(gradient=h * t, hessian=h, noise_cov=c * h)


@validate_params(n=_DIMENSION)
def power_law_spectrum(n: int, exponent: float = 1.0) -> np.ndarray:
    r"""Hessian eigenvalues $h_i = i^{-\text{exponent}}$, $i = 1..n$: the spectrum of
    Zhang et al. (2019)'s noisy quadratic model (``exponent=1``), shared by
    `anisotropic_quadratic` (one step) and `NoisyQuadratic.zhang`/``power_law`` (the
    simulator).

    References
    ----------
    G. Zhang, L. Li, Z. Nado, J. Martens, S. Sachdeva, G. Dahl, C. Shallue, R. Grosse.
    "Which Algorithmic Choices Matter at Which Batch Sizes? Insights From a Noisy
    Quadratic Model." NeurIPS 2019, arXiv:1907.04164.

    >>> power_law_spectrum(3).tolist()
    [1.0, 0.5, 0.3333333333333333]
    """
    e = as_float(exponent, "exponent")
    return np.arange(1, int(n) + 1, dtype=float) ** (-e)
