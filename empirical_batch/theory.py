r"""One SGD step on a quadratic loss (McCandlish et al. 2018, §2.2).

Per-example gradients have mean :math:`G` and covariance :math:`\Sigma`; a batch of
:math:`B` of them has mean :math:`G_{est}` with covariance :math:`\Sigma/B`. With
Hessian :math:`H`, the expected loss after the update :math:`\theta \leftarrow
\theta - \epsilon G_{est}` is (eq. 2.5)

.. math::

    E[L(\theta - \epsilon G_{est})] = L(\theta) - \epsilon |G|^2
        + \tfrac12 \epsilon^2 \left(G^T H G + \frac{\operatorname{tr}(H\Sigma)}{B}\right).

Everything the model predicts depends on four scalars, :math:`|G|^2`,
:math:`G^THG`, :math:`\operatorname{tr}\Sigma` and :math:`\operatorname{tr}(H\Sigma)`;
:class:`QuadraticModel` computes them once from dense, diagonal or eigenbasis
inputs (or takes them directly) and derives the rest.
"""

from __future__ import annotations

import numpy as np

from ._validate import as_array, check_positive

__all__ = ["QuadraticModel", "dl_opt", "eps_opt"]


def _batch(batch_size, dataset_size=None) -> np.ndarray:
    """1/B, or 1/B − 1/D for sampling without replacement from D examples."""
    b = check_positive(batch_size, "batch_size")
    inv = 1.0 / b
    if dataset_size is not None:
        if np.any(b > dataset_size):
            raise ValueError(
                f"batch_size must be <= dataset_size={dataset_size} when sampling "
                f"without replacement, got {b.max()!r}"
            )
        inv = inv - 1.0 / dataset_size
    return inv


def eps_opt(batch_size, eps_max, b_noise):
    r"""Optimal learning rate at batch size B (eq. 2.6).

    .. math:: \epsilon_{opt}(B) = \frac{\epsilon_{max}}{1 + B_{noise}/B}

    Broadcasts over arrays; returns a float for scalar input.

    >>> eps_opt(10.0, eps_max=1.0, b_noise=10.0)
    0.5
    """
    b = check_positive(batch_size, "batch_size")
    e = check_positive(eps_max, "eps_max")
    n = _nonneg(b_noise, "b_noise")
    return _out(e / (1.0 + n / b))


def dl_opt(batch_size, dl_max, b_noise):
    r"""Expected loss improvement of one step at the optimal rate (eq. 2.7).

    .. math:: \Delta L_{opt}(B) = \frac{\Delta L_{max}}{1 + B_{noise}/B}

    >>> dl_opt(30.0, dl_max=2.0, b_noise=10.0)
    1.5
    """
    b = check_positive(batch_size, "batch_size")
    d = check_positive(dl_max, "dl_max")
    n = _nonneg(b_noise, "b_noise")
    return _out(d / (1.0 + n / b))


def _nonneg(x, name):
    arr = as_array(x, name)
    if np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0, got {arr.min()!r}")
    return arr


def _out(arr: np.ndarray):
    return float(arr) if np.ndim(arr) == 0 else arr


class QuadraticModel:
    r"""The local quadratic model of the loss around the current parameters.

    Parameters
    ----------
    gradient : array (n,)
        True (full-batch) gradient :math:`G`; must not be zero.
    hessian : array (n, n) or (n,)
        Hessian :math:`H` (symmetric, with :math:`G^THG > 0`), or its diagonal.
    noise_cov : array (n, n) or (n,)
        Per-example gradient covariance :math:`\Sigma` (symmetric PSD), or its diagonal.
    dataset_size : int, optional
        Sample batches without replacement from this many examples: the batch
        covariance becomes :math:`\Sigma(1/B - 1/D)`.

    Examples
    --------
    >>> m = QuadraticModel(gradient=[1.0, 1.0], hessian=[1.0, 3.0], noise_cov=[4.0, 4.0])
    >>> m.b_noise, m.b_simple
    (4.0, 4.0)
    >>> m.eps_opt(4.0)
    0.25
    """

    def __init__(self, gradient, hessian, noise_cov, *, dataset_size: int | None = None):
        from ._validate import check_nonnegative, check_psd, check_symmetric

        g = as_array(gradient, "gradient", ndim=1)
        n = g.shape[0]
        h = as_array(hessian, "hessian", ndim=(1, 2))
        s = as_array(noise_cov, "noise_cov", ndim=(1, 2))
        for name, arr in (("hessian", h), ("noise_cov", s)):
            if arr.shape[0] != n or (arr.ndim == 2 and arr.shape[1] != n):
                raise ValueError(
                    f"{name} has shape {arr.shape}, which does not match gradient of length {n}"
                )
        if h.ndim == 2:
            check_symmetric(h, "hessian")
        if s.ndim == 2:
            check_psd(s, "noise_cov")
        else:
            check_nonnegative(s, "noise_cov")
        g2 = float(g @ g)
        if g2 == 0.0:
            raise ValueError("gradient must not be zero: the noise scales divide by |G|^2")
        hg = h * g if h.ndim == 1 else h @ g
        if s.ndim == 1 and h.ndim == 1:
            tr_hs = float(h @ s)
        else:
            hm = np.diag(h) if h.ndim == 1 else h
            sm = np.diag(s) if s.ndim == 1 else s
            tr_hs = float(np.sum(hm * sm.T))
        self.gradient, self.hessian, self.noise_cov = g, h, s
        self._init_scalars(
            g2=g2,
            ghg=float(g @ hg),
            trace_sigma=float(np.sum(s) if s.ndim == 1 else np.trace(s)),
            trace_h_sigma=tr_hs,
            dataset_size=dataset_size,
        )

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

        ``g2`` = :math:`|G|^2`, ``ghg`` = :math:`G^THG`, ``trace_sigma`` =
        :math:`\operatorname{tr}\Sigma`, ``trace_h_sigma`` =
        :math:`\operatorname{tr}(H\Sigma)`.
        """
        self = cls.__new__(cls)
        self.gradient = self.hessian = self.noise_cov = None
        self._init_scalars(
            g2=g2, ghg=ghg, trace_sigma=trace_sigma, trace_h_sigma=trace_h_sigma,
            dataset_size=dataset_size,
        )
        return self

    def _init_scalars(self, *, g2, ghg, trace_sigma, trace_h_sigma, dataset_size):
        from ._validate import as_float

        self.g2 = as_float(g2, "g2")
        self.ghg = as_float(ghg, "ghg")
        self.trace_sigma = as_float(trace_sigma, "trace_sigma")
        self.trace_h_sigma = as_float(trace_h_sigma, "trace_h_sigma")
        if self.g2 <= 0:
            raise ValueError(f"|G|^2 must be > 0, got {self.g2!r}")
        if self.ghg <= 0:
            raise ValueError(
                f"GᵀHG must be > 0 for the step to have an optimum, got {self.ghg!r}: "
                "the loss is not curved upward along the gradient"
            )
        if self.trace_sigma < 0:
            raise ValueError(f"tr(Σ) must be >= 0, got {self.trace_sigma!r}")
        if self.trace_h_sigma < 0:
            raise ValueError(
                f"tr(HΣ) must be >= 0, got {self.trace_h_sigma!r}: "
                "a negative noise term would make larger steps always better"
            )
        if dataset_size is not None:
            if isinstance(dataset_size, bool) or int(dataset_size) != dataset_size:
                raise TypeError(f"dataset_size must be an integer, got {dataset_size!r}")
            if dataset_size < 1:
                raise ValueError(f"dataset_size must be >= 1, got {dataset_size!r}")
            dataset_size = int(dataset_size)
        self.dataset_size = dataset_size

    # --- the paper's scalars ---------------------------------------------------
    @property
    def b_noise(self) -> float:
        r""":math:`B_{noise} = \operatorname{tr}(H\Sigma) / G^THG` (eq. 2.8)."""
        return self.trace_h_sigma / self.ghg

    @property
    def b_simple(self) -> float:
        r""":math:`B_{simple} = \operatorname{tr}\Sigma / |G|^2` (eq. 2.9)."""
        return self.trace_sigma / self.g2

    @property
    def eps_max(self) -> float:
        r""":math:`\epsilon_{max} = |G|^2 / G^THG`, the optimal step at infinite batch."""
        return self.g2 / self.ghg

    @property
    def dl_max(self) -> float:
        r""":math:`\Delta L_{max} = \tfrac12 |G|^4 / G^THG`, the best one-step improvement."""
        return 0.5 * self.g2**2 / self.ghg

    # --- batch-size dependent predictions -------------------------------------
    def _noise_factor(self, batch_size) -> np.ndarray:
        """B_noise/B (with the finite-dataset correction when dataset_size is set)."""
        return self.b_noise * _batch(batch_size, self.dataset_size)

    def eps_opt(self, batch_size):
        r""":math:`\epsilon_{opt}(B) = \epsilon_{max} / (1 + B_{noise}/B)` (eq. 2.6)."""
        return _out(self.eps_max / (1.0 + self._noise_factor(batch_size)))

    def dl_opt(self, batch_size):
        r""":math:`\Delta L_{opt}(B) = \Delta L_{max} / (1 + B_{noise}/B)` (eq. 2.7)."""
        return _out(self.dl_max / (1.0 + self._noise_factor(batch_size)))

    def expected_improvement(self, eps, batch_size):
        r"""Expected loss decrease of one SGD step of size ε at batch size B.

        .. math:: \epsilon |G|^2 - \tfrac12 \epsilon^2
                  \left(G^THG + \operatorname{tr}(H\Sigma)/B\right)

        Negative when the step increases the loss (ε > 2 ε_opt(B)).
        """
        e = as_array(eps, "eps")
        if np.any(e < 0):
            raise ValueError(f"eps must be >= 0, got {e.min()!r}")
        inv_b = _batch(batch_size, self.dataset_size)
        return _out(e * self.g2 - 0.5 * e**2 * (self.ghg + self.trace_h_sigma * inv_b))

    def __repr__(self) -> str:
        return (
            f"QuadraticModel(b_noise={self.b_noise:.4g}, b_simple={self.b_simple:.4g}, "
            f"eps_max={self.eps_max:.4g}, dl_max={self.dl_max:.4g})"
        )
