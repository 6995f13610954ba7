r"""Gradient-noise-scale estimators from squared gradient norms (App. A.1).

A batch of $B$ examples drawn independently (with replacement) has mean
gradient $G_B$ with

$$
E|G_B|^2 = |G|^2 + \frac{\operatorname{tr}\Sigma}{B},
$$

where $G$ is the true gradient and $\Sigma$ the per-example gradient
covariance (McCandlish et al. 2018, App. A.1). Squared norms measured at two or more
batch sizes therefore give *unbiased* estimates of $|G|^2$ and
$\operatorname{tr}\Sigma$. Their ratio $B_{simple} =
\operatorname{tr}\Sigma/|G|^2$ (eq. 2.9) is not unbiased, so `GNSEstimator`
averages numerator and denominator separately and divides the averages.

Everything here is numpy only; the torch collectors that *measure* the squared
norms live in `empirical_batch.measure`.

Negative estimates
------------------
Single-step estimates of $|G|^2$ are noisy and may be negative; nothing is
clamped. When the smoothed $|G|^2$ is negative the gradient signal is not
resolved by the data seen so far (noise dominates at these batch sizes), and
`GNSEstimator.b_simple` is returned as the plain ratio, i.e. negative; when it
is exactly zero ``b_simple`` is ``±inf`` (``nan`` if both are zero). Read a
negative ``b_simple`` as "larger than can be resolved yet", never as a value.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ._validate import (
    as_array,
    as_float,
    check_broadcast,
    check_count,
    check_nonnegative,
    check_positive,
    scalar_or_array,
)
from .errors import InputError, UsageError
from .estimator_state import check_beta, check_dataset_size, check_max_history, checked_state
from .params import check
from .result import Interval, Result

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "GNSEstimate",
    "GNSEstimator",
    "ema",
    "gns_many",
    "gns_regression",
    "gns_two_batch",
]



def _sizes(b_small: ArrayLike, b_big: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    bs = check("b_small", b_small)
    bb = check("b_big", b_big)
    check_broadcast(("b_small", bs), ("b_big", bb))
    if np.any(bs >= bb):
        raise InputError(
            f"b_small must be < b_big (two different batch sizes are needed), got "
            f"b_small={_show(bs)} and b_big={_show(bb)}"
        )
    return bs, bb


def _show(arr: np.ndarray) -> str:
    return repr(float(arr)) if np.ndim(arr) == 0 else f"array of shape {np.shape(arr)}"


def gns_two_batch(sq_norm_small: ArrayLike, b_small: ArrayLike, sq_norm_big: ArrayLike,
                  b_big: ArrayLike, *, dataset_size: int | None = None) -> tuple[Any, Any]:
    r"""Unbiased $|G|^2$ and $\operatorname{tr}\Sigma$ from two batch sizes.

    Implements App. A.1 of McCandlish et al. (2018):

    $$
    |\mathcal{G}|^2 = \frac{B_{big}|G_{big}|^2 - B_{small}|G_{small}|^2}
    {B_{big} - B_{small}},\qquad
    \mathcal{S} = \frac{|G_{small}|^2 - |G_{big}|^2}{1/B_{small} - 1/B_{big}}.
    $$

    Each is unbiased when $E|G_B|^2 = |G|^2 + \operatorname{tr}\Sigma/B$, i.e.
    for examples drawn independently. The two norms may come from nested batches
    (the small batch inside the big one); unbiasedness holds either way.

    With ``dataset_size`` $D$ (batches drawn *without* replacement from $D$
    examples, $\Sigma$ Bessel-corrected) the expectation is
    $|G|^2 + \operatorname{tr}\Sigma\,(1/B - 1/D)$: $\mathcal S$ is unchanged and
    $|\mathcal G|^2$ gains $\mathcal S/D$ (the plain formula is biased low by
    $\operatorname{tr}\Sigma/D$).

    Parameters
    ----------
    sq_norm_small, sq_norm_big : float or array
        Squared norms $|G_{small}|^2$, $|G_{big}|^2$ of mean gradients
        (or, for ``sq_norm_small``, an average of several such squared norms).
    b_small, b_big : float or array
        The batch sizes, ``0 < b_small < b_big``. Everything broadcasts.

    Returns
    -------
    (g2, trace_sigma) : floats or arrays
        The estimates; ``g2`` may be negative for a single noisy step.

    Examples
    --------
    >>> # exact expectations for |G|^2 = 2, tr(Σ) = 40 at B = 4 and 16
    >>> gns_two_batch(2 + 40 / 4, 4, 2 + 40 / 16, 16)
    (2.0, 40.0)
    """
    s = check("sq_norm_small", sq_norm_small)
    g = check("sq_norm_big", sq_norm_big)
    bs, bb = _sizes(b_small, b_big)
    check_broadcast(("sq_norm_small", s), ("b_small", bs), ("sq_norm_big", g), ("b_big", bb))
    # = (B_big g - B_small s)/(B_big - B_small) and (s - g)/(1/B_small - 1/B_big), written
    # so that no intermediate product overflows when the estimates themselves are finite
    with np.errstate(over="ignore"):
        g2 = g + (g - s) * (bs / (bb - bs))
        trace_sigma = (s - g) * (bs / (1.0 - bs / bb))
    _finite_estimates(g2, trace_sigma)
    if dataset_size is not None:
        d = check_dataset_size(dataset_size, bb)
        g2 = g2 + trace_sigma / d
    return scalar_or_array(g2), scalar_or_array(trace_sigma)


def _finite_estimates(g2: ArrayLike, trace_sigma: ArrayLike) -> None:
    if not (np.all(np.isfinite(g2)) and np.all(np.isfinite(trace_sigma))):
        raise InputError("the estimates of |G|^2 and tr(Sigma) overflow a float for these "
                         "squared norms and batch sizes (rescale the norms)")


def gns_many(sq_norms: ArrayLike, sq_norm_mean: ArrayLike, batch_size: ArrayLike, *,
             n: int | None = None, axis: int = -1,
             dataset_size: int | None = None) -> tuple[Any, Any]:
    r"""Unbiased $|G|^2$, $\operatorname{tr}\Sigma$ from ``n`` equal batches.

    ``n`` micro-batches (or data-parallel replicas) of ``batch_size`` examples each
    have mean gradients $g_1..g_n$; their mean $\bar g$ is a batch of
    $nb$. With $\overline{|g|^2} = \frac1n\sum_j |g_j|^2$,

    $$
    |\mathcal{G}|^2 = \frac{n|\bar g|^2 - \overline{|g|^2}}{n - 1},\qquad
    \mathcal{S} = \frac{b\,n}{n-1}\left(\overline{|g|^2} - |\bar g|^2\right),
    $$

    which is `gns_two_batch` with ``b_small = b`` and ``b_big = n b``
    (App. A.1). With ``batch_size=1`` (per-example gradients), $\mathcal{S}$
    is the Bessel-corrected sample variance.

    Parameters
    ----------
    sq_norms : array
        $|g_j|^2$ with the ``n >= 2`` batches along ``axis``; or, when ``n`` is
        given, their mean $\overline{|g|^2}$ already taken (broadcasts).
    sq_norm_mean : float or array
        $|\bar g|^2$, broadcasting against ``sq_norms`` with ``axis`` removed.
    batch_size : float or array
        Examples per micro-batch ``b > 0``.
    dataset_size : int, optional
        Batches drawn without replacement from this many examples (see
        `gns_two_batch`).

    Examples
    --------
    >>> gns_many([12.0, 12.0, 12.0, 12.0], 4.5, 4)  # |G|^2 = 2, tr Σ = 40
    (2.0, 40.0)
    >>> gns_many(12.0, 4.5, 4, n=4)  # the same from the mean of the |g_j|^2
    (2.0, 40.0)
    """
    b = check("batch_size", batch_size)
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int | np.integer):
            raise InputError(f"n must be an integer, got {n!r}")
        if n < 2:
            raise InputError(f"n must be >= 2 micro-batches, got {n}")
        n = check_count(n, "n", 2)
        return gns_two_batch(sq_norms, b, sq_norm_mean, _big(n, b), dataset_size=dataset_size)
    sq = as_array(sq_norms, "sq_norms")
    if sq.ndim == 0:
        raise InputError("sq_norms must have an axis of micro-batches, got a scalar")
    n = sq.shape[axis]
    if n < 2:
        raise InputError(f"sq_norms needs >= 2 micro-batches along axis {axis}, got {n}")
    check_nonnegative(sq, "sq_norms")
    return gns_two_batch(np.mean(sq, axis=axis), b, sq_norm_mean, _big(n, b),
                         dataset_size=dataset_size)


def _big(n: int, b: np.ndarray) -> np.ndarray:
    """n micro-batches of b examples: n b, refused naming both where it overflows."""
    with np.errstate(over="ignore"):
        big = n * b
    if not np.all(np.isfinite(big)):
        raise InputError(f"n * batch_size overflows a float (n={n}, batch_size up to "
                         f"{float(np.max(b)):g})")
    return big


def gns_regression(sq_norms: ArrayLike, batch_sizes: ArrayLike, *,
                   axis: int = -1) -> tuple[Any, Any]:
    r"""Least-squares fit of $E|G_B|^2 = |G|^2 + \operatorname{tr}\Sigma / B$.

    Ordinary least squares of the squared norms against $1/B$ over three or
    more batch sizes (App. A.1 generalised): the intercept estimates $|G|^2$,
    the slope $\operatorname{tr}\Sigma$. With the batch sizes fixed the OLS
    coefficients are linear in the norms, so both are unbiased; with exactly two
    batch sizes this reduces to `gns_two_batch`.

    Parameters
    ----------
    sq_norms : array
        Squared mean-gradient norms, one per entry of ``batch_sizes`` along ``axis``
        (other axes broadcast: e.g. one fit per training step).
    batch_sizes : array (m,)
        Batch sizes, at least two distinct values (three or more to be useful).

    Examples
    --------
    >>> b = np.array([2.0, 8.0, 32.0])
    >>> g2, tr = gns_regression(1.5 + 30.0 / b, b)
    >>> round(g2, 12), round(tr, 12)
    (1.5, 30.0)
    """
    y = check_nonnegative(sq_norms, "sq_norms")
    b = check_positive(batch_sizes, "batch_sizes")
    if b.ndim != 1:
        raise InputError(f"batch_sizes must be 1-D, got shape {b.shape}")
    if y.ndim == 0 or y.shape[axis] != b.shape[0]:
        raise InputError(
            f"sq_norms must have {b.shape[0]} entries (one per batch size) along axis "
            f"{axis}, got shape {y.shape}"
        )
    if np.unique(b).size < 2:
        raise InputError("batch_sizes needs at least two distinct values")
    # least squares of y on x = 1/B, on x and y scaled to at most 1 (no overflow in the
    # sums of products for values near the float limits), scaled back at the end
    x = 1.0 / b
    sx = float(np.max(x))
    sy = float(np.max(y)) or 1.0
    xs = x / sx
    xc = xs - xs.mean()
    ys = np.moveaxis(y, axis, -1) / sy
    slope_s = (ys @ xc) / (xc @ xc)
    intercept_s = ys.mean(axis=-1) - slope_s * xs.mean()
    with np.errstate(over="ignore"):
        intercept, slope = sy * intercept_s, slope_s * (sy / sx)
    _finite_estimates(intercept, slope)
    return scalar_or_array(intercept), scalar_or_array(slope)


def ema(values: ArrayLike, beta: float) -> np.ndarray:
    r"""Bias-corrected exponential moving average of a sequence (offline).

    $m_t = \beta m_{t-1} + (1-\beta)x_t$, $\hat m_t = m_t/(1-\beta^t)$;
    returns the array of $\hat m_t$. This is what `GNSEstimator`
    computes online, so smoothing can be redone with another ``beta`` from the
    raw components of `GNSEstimator.to_frame`.

    >>> ema([1.0, 3.0], 0.5).tolist()
    [1.0, 2.3333333333333335]
    """
    x = as_array(values, "values", ndim=1)
    beta = check_beta(beta)
    out = np.empty_like(x)
    m = 0.0
    for t, v in enumerate(x, start=1):
        m = beta * m + (1.0 - beta) * v
        out[t - 1] = m / (1.0 - beta**t)
    return out


def _ratio(num: float, den: float) -> float:
    """num/den without warnings: ±inf for den == 0 (nan when both are 0)."""
    if den == 0.0:
        return math.nan if num == 0.0 else math.copysign(math.inf, num)
    return num / den


@dataclass(frozen=True, repr=False)
class GNSEstimate(Result):
    """Smoothed noise-scale estimate at one step (see `GNSEstimator`).

    ``b_simple_se`` is the delta-method standard error and ``b_simple_interval`` the
    Fieller interval (an `Interval` at confidence ``level``); both are ``nan`` until
    two steps have been seen, and the interval is ``(-inf, inf)`` when the data cannot
    bound the ratio (|G|² not resolved).
    """

    steps: int
    g2: float
    trace_sigma: float
    b_simple: float
    b_simple_se: float
    b_simple_interval: Interval
    n_eff: float

    @property
    def level(self) -> float:
        """Confidence level of the interval."""
        return self.b_simple_interval.level

    def to_dict(self) -> dict[str, Any]:
        """The fields, with the interval's ends flat (``b_simple_low``,
        ``b_simple_high``, ``level``) as in the noise log's columns."""
        out = super().to_dict()
        del out["b_simple_interval"]
        ci = self.b_simple_interval
        return {**out, "b_simple_low": ci.low, "b_simple_high": ci.high, "level": ci.level}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GNSEstimate:
        """The estimate of `to_dict` (the interval from its flat ends)."""
        ends = {"low": "b_simple_low", "high": "b_simple_high", "level": "level"}
        ci = {k: d.get(v) for k, v in ends.items()} if isinstance(d, Mapping) else None
        return super().from_dict({**d, "b_simple_interval": ci} if ci else d)


def estimator_of(source: Any, name: str = "source") -> GNSEstimator:
    """The `GNSEstimator` of a noise-scale collector (its ``estimator``) or the estimator
    itself; anything else (a model, an optimizer) is an `InputError` naming ``name``."""
    est = getattr(source, "estimator", source)
    if not isinstance(est, GNSEstimator):
        raise InputError(f"{name} must be a noise-scale collector of empirical_batch.measure "
                         "(GradientNoiseScale, a DDP/FSDP collector, a callback's "
                         f"collector) or its GNSEstimator, got {type(source).__name__}")
    return est


class GNSEstimator:
    r"""Exponential moving averages of the two-batch estimates, and their ratio.

    Each `update` turns two squared norms into per-step unbiased estimates
    $|\mathcal G|^2_t$, $\mathcal S_t$ (`gns_two_batch`) and
    folds them into separate bias-corrected EMAs with decay ``beta``;
    `b_simple` is $\bar{\mathcal S}/\overline{|\mathcal G|^2}$ (eq. 2.9,
    App. A.1). ``beta = 0`` uses the last step only. With ``dataset_size`` $D$ (batches
    drawn without replacement) each step's $|\mathcal G|^2$ gains $\mathcal S/D$
    (`gns_two_batch`).

    **Uncertainty.** The bias-corrected EMA is the weighted mean with weights
    $w_i \propto \beta^{t-i}$. Treating steps as independent draws around a
    slowly varying mean, $\operatorname{Var}(\bar x) = \sigma_x^2 \sum w_i^2$,
    with the effective sample size $n_{eff} = 1/\sum w_i^2$ and
    $\sigma^2$, the covariance of $(\mathcal S_t, |\mathcal G|^2_t)$,
    estimated by the weighted (reliability-corrected) sample covariance of the
    same steps. Then `b_simple_se` is the delta-method standard error

    $$
    \operatorname{se}(R)^2 = \frac{\operatorname{Var}\bar S - 2R
    \operatorname{Cov}(\bar S, \bar G) + R^2 \operatorname{Var}\bar G}{\bar G^2}
    $$

    and `estimate` also gives Fieller's interval for the ratio, which stays
    honest (unbounded) when $\bar G$ is not distinguishable from zero.
    Steps are assumed uncorrelated; with autocorrelated steps (e.g. a slowly
    changing model sampled often) the error is underestimated. Coverage on
    independent synthetic steps is checked in ``tests/test_estimators.py``.

    The raw per-step inputs and estimates are kept (`to_frame`), so the
    smoothing can be redone offline (`ema`): all of them by default, the last
    ``max_history`` with a bound (a ring buffer, for long runs), none with
    ``keep_history=False``; the averages never depend on it. `state_dict` /
    `load_state_dict` give bit-identical continuation.

    Examples
    --------
    >>> est = GNSEstimator(beta=0.9)
    >>> for _ in range(3):
    ...     _ = est.update(2 + 40 / 4, 4, 2 + 40 / 16, 16)
    >>> est.g2, est.trace_sigma, est.b_simple
    (2.0, 40.0, 20.0)
    """

    _COLUMNS = ("step", "sq_norm_small", "b_small", "sq_norm_big", "b_big", "g2", "trace_sigma")

    def __init__(self, beta: float = 0.99, *, keep_history: bool = True,
                 max_history: int | None = None, dataset_size: int | None = None):
        self.beta = check_beta(beta)
        self.keep_history = bool(keep_history)
        self.max_history = check_max_history(max_history)
        self.dataset_size = None if dataset_size is None else int(
            check_dataset_size(dataset_size, 0))
        self.reset()

    def reset(self) -> None:
        """Forget all steps."""
        self.steps = 0
        self._w = 0.0  # Σ β^{t-i}
        self._w2 = 0.0  # Σ β^{2(t-i)}
        self._mean_s = 0.0
        self._mean_g = 0.0
        self._css = 0.0  # Σ w (S - S̄)²  (unnormalised weights)
        self._cgg = 0.0
        self._csg = 0.0
        self._history = self._empty_history()

    def _empty_history(self, rows: Mapping[str, Iterable[float]] | None = None,
                       ) -> dict[str, deque[float]]:
        rows = rows or {}
        return {c: deque(rows.get(c, ()), maxlen=self.max_history) for c in self._COLUMNS}

    # ------------------------------------------------------------------ updates
    def update(self, sq_norm_small: float, b_small: float, sq_norm_big: float,
               b_big: float) -> tuple[float, float]:
        """Fold one step's pair of squared norms into the averages (scalars only).

        Returns this step's ``(g2, trace_sigma)`` (the values `gns_two_batch`
        gives: the same operations in float64), which the collectors report per step.
        """
        vals = {}
        for name, v in (("sq_norm_small", sq_norm_small), ("b_small", b_small),
                        ("sq_norm_big", sq_norm_big), ("b_big", b_big)):
            # plain finite Python numbers skip numpy (the collectors call this per step)
            t = type(v)
            x = float(v) if (t is float and math.isfinite(v)) or (t is int and abs(v) < 2**1000) \
                else as_float(v, name)
            vals[name] = x
            if x < 0 or (x == 0 and name.startswith("b_")):
                raise InputError(f"{name} must be {'> 0' if name[0] == 'b' else '>= 0'}, "
                                 f"got {x!r}")
        sq_s, bs, sq_b, bb = vals.values()
        if bs >= bb:
            raise InputError(f"b_small must be < b_big (two different batch sizes are "
                             f"needed), got b_small={bs!r} and b_big={bb!r}")
        # the same arithmetic as gns_two_batch, on Python floats
        g2 = sq_b + (sq_b - sq_s) * (bs / (bb - bs))
        s = (sq_s - sq_b) * (bs / (1.0 - bs / bb))
        _finite_estimates(g2, s)
        if self.dataset_size is not None:  # without replacement: 1/B - 1/D
            if bb > self.dataset_size:
                raise InputError(f"b_big={bb:g} exceeds dataset_size={self.dataset_size}")
            g2 += s / self.dataset_size
        self._fold(s, g2)
        if self.keep_history:
            row = (self.steps, sq_s, bs, sq_b, bb, g2, s)
            for c, v in zip(self._COLUMNS, row, strict=True):
                self._history[c].append(v)
        return g2, s

    def _fold(self, s: float, g: float) -> None:
        # West's incremental weighted mean/co-moment with decaying weights: the mean
        # equals the bias-corrected EMA exactly (up to rounding).
        b = self.beta
        self.steps += 1
        self._w = b * self._w + 1.0
        self._w2 = b * b * self._w2 + 1.0
        ds = s - self._mean_s
        dg = g - self._mean_g
        self._mean_s += ds / self._w
        self._mean_g += dg / self._w
        self._css = b * self._css + ds * (s - self._mean_s)
        self._cgg = b * self._cgg + dg * (g - self._mean_g)
        self._csg = b * self._csg + ds * (g - self._mean_g)

    # --------------------------------------------------------------- estimates
    def _require(self) -> None:
        if self.steps == 0:
            raise UsageError("GNSEstimator has no steps yet: call update() first")

    @property
    def g2(self) -> float:
        r"""Smoothed $|G|^2$ (may be negative: see the module notes)."""
        self._require()
        return self._mean_g

    @property
    def trace_sigma(self) -> float:
        r"""Smoothed $\operatorname{tr}\Sigma$."""
        self._require()
        return self._mean_s

    @property
    def b_simple(self) -> float:
        r"""$B_{simple} = \bar{\mathcal S} / \overline{|\mathcal G|^2}$ (no clamping)."""
        self._require()
        return _ratio(self._mean_s, self._mean_g)

    @property
    def n_eff(self) -> float:
        r"""Effective number of steps in the average, $1/\sum w_i^2$."""
        return self._w**2 / self._w2 if self.steps else 0.0

    def _var_of_means(self) -> tuple[float, float, float]:
        """(Var S̄, Var Ḡ, Cov(S̄, Ḡ)); nan before two steps."""
        denom = self._w - self._w2 / self._w if self.steps else 0.0
        if self.steps < 2 or denom <= 0.0:
            return math.nan, math.nan, math.nan
        f = (self._w2 / self._w**2) / denom
        return self._css * f, self._cgg * f, self._csg * f

    @property
    def b_simple_se(self) -> float:
        """Delta-method standard error of `b_simple` (``nan`` before 2 steps)."""
        self._require()
        vss, vgg, vsg = self._var_of_means()
        if math.isnan(vss):
            return math.nan
        r = self.b_simple
        if not math.isfinite(r):
            return math.inf
        var = (vss - 2.0 * r * vsg + r * r * vgg) / self._mean_g**2
        return math.sqrt(max(var, 0.0))

    def b_simple_interval(self, level: float = 0.95) -> Interval:
        r"""Fieller confidence interval for $\bar S/\bar G$ at ``level`` (an `Interval`,
        as `GNSEstimate.b_simple_interval`; it unpacks like the pair ``low, high``).

        Solves $(\bar S - R\bar G)^2 \le z^2 \operatorname{Var}(\bar S - R\bar G)$
        for $R$; returns ``(-inf, inf)`` when $\bar G$ is not significantly
        different from zero (the ratio is then unbounded), ``(nan, nan)`` before two
        steps.
        """
        self._require()
        level = float(check("level", as_float(level, "level")))
        vss, vgg, vsg = self._var_of_means()
        if math.isnan(vss):
            return Interval(math.nan, math.nan, level)
        from statistics import NormalDist

        z2 = NormalDist().inv_cdf(0.5 + level / 2.0) ** 2
        s, g = self._mean_s, self._mean_g
        a = g * g - z2 * vgg
        b = s * g - z2 * vsg
        c = s * s - z2 * vss
        disc = b * b - a * c
        if a <= 0.0 or disc < 0.0:
            return Interval(-math.inf, math.inf, level)
        root = math.sqrt(disc)
        return Interval((b - root) / a, (b + root) / a, level)

    def estimate(self, level: float = 0.95) -> GNSEstimate:
        """All smoothed quantities at the current step as a frozen dataclass."""
        self._require()
        return GNSEstimate(
            steps=self.steps, g2=self.g2, trace_sigma=self.trace_sigma,
            b_simple=self.b_simple, b_simple_se=self.b_simple_se,
            b_simple_interval=self.b_simple_interval(level), n_eff=self.n_eff,
        )

    # ------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """Plain-Python state; `load_state_dict` resumes bit-identically."""
        return {
            "beta": self.beta, "keep_history": self.keep_history,
            "max_history": self.max_history, "dataset_size": self.dataset_size,
            "steps": self.steps,
            "w": self._w, "w2": self._w2, "mean_s": self._mean_s, "mean_g": self._mean_g,
            "css": self._css, "cgg": self._cgg, "csg": self._csg,
            "history": {c: list(v) for c, v in self._history.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict` (replaces everything, ``beta`` and ``dataset_size``
        included; a state written before ``dataset_size`` was saved keeps this
        estimator's own). Every entry is checked first: on an error nothing changes."""
        new = checked_state(state, self.dataset_size, self._COLUMNS)
        self.beta, self.keep_history, self.max_history = new["beta"], new["keep_history"], \
            new["max_history"]
        self.dataset_size, self.steps = new["dataset_size"], new["steps"]
        self._w, self._w2 = new["w"], new["w2"]
        self._mean_s, self._mean_g = new["mean_s"], new["mean_g"]
        self._css, self._cgg, self._csg = new["css"], new["cgg"], new["csg"]
        self._history = self._empty_history(new["history"])

    # ----------------------------------------------------------------- views
    def history(self) -> dict[str, np.ndarray]:
        """Raw per-step inputs and estimates as numpy arrays (one per column)."""
        return {c: np.asarray(v, dtype=float if c != "step" else int)
                for c, v in self._history.items()}

    def to_frame(self) -> pd.DataFrame:
        """The raw per-step components as a pandas DataFrame (one row per update)."""
        import pandas as pd

        return pd.DataFrame(self.history())

    def __repr__(self) -> str:
        if not self.steps:
            return f"GNSEstimator(beta={self.beta}, steps=0)"
        return (f"GNSEstimator(beta={self.beta}, steps={self.steps}, "
                f"b_simple={self.b_simple:.4g} ± {self.b_simple_se:.2g})")
