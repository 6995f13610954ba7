r"""Exact $B_{noise}$ of a small model from per-example gradients and HVPs.

Treating the given examples as the data set (batches drawn from it with
replacement), the per-example gradients $g_i$ give $G = \bar g$ and
$\Sigma = \frac{1}{n-\text{ddof}}\sum_i (g_i-G)(g_i-G)^T$, and with
Hessian-vector products of the mean loss

$$
\operatorname{tr}(H\Sigma) = \frac{1}{n-\text{ddof}}\sum_i (g_i-G)^T H (g_i-G),
\qquad B_{noise} = \frac{\operatorname{tr}(H\Sigma)}{G^THG}\ \text{(eq. 2.8)},
\qquad B_{simple} = \frac{\operatorname{tr}\Sigma}{|G|^2}\ \text{(eq. 2.9)}.
$$

The plug-in $|G|^2$ and $G^THG$ of a finite sample carry sampling noise,
$\operatorname{tr}\Sigma/n$ and $\operatorname{tr}(H\Sigma)/n$; when the
examples are a sample of a larger population (the training data),
`HessianNoiseScale.unbiased` removes it (App. A.1, with $H$ held fixed).

Cost: ``n`` per-example gradients and ``n + 1`` Hessian-vector products, all held
in memory (``n × parameters``): for small models and data sets. Each product is a
double backward through all ``n`` examples, so the products cost about ``n²``
single-example steps.

**Probes.** With ``n_probes = m < n`` the products are taken for ``m`` of the
deviations only, drawn uniformly without replacement, and the sum over all ``n`` is
estimated by the expansion estimator of simple random sampling (Cochran, *Sampling
Techniques*, 3rd ed., 1977, ch. 2: a sample's estimate of the population total and its
variance): with
$q_i = (g_i-G)^T H (g_i-G)$ on the probes $S$,

$$
\widehat{\textstyle\sum_i q_i} = \frac{n}{m}\sum_{i\in S} q_i,\qquad
\widehat{\operatorname{Var}} = n^2\Big(1-\frac{m}{n}\Big)\frac{s_q^2}{m},
$$

$s_q^2$ the probes' sample variance (divisor $m-1$), both unbiased. The cost falls
to about ``m n`` single-example steps; the estimate's standard error is stated as
``trace_h_sigma_se`` and, by the delta method ($G^THG$ is exact on the sample),
``b_noise_se``. With every example a probe (the default) both are 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from .._validate import as_scalar
from ..errors import InputError
from ..result import Result
from ..theory import noise_scales_from_scalars
from ._common import check_batch, check_batch_size, fixed_state, select_params

__all__ = ["HessianNoiseScale", "hessian_noise_scale"]


@dataclass(frozen=True)
class HessianNoiseScale(Result):
    """The four scalars of the local quadratic model and the two noise scales."""

    b_noise: float
    b_simple: float
    g2: float
    ghg: float
    trace_sigma: float
    trace_h_sigma: float
    n_examples: int
    ddof: int = 0
    unbiased_for_population: bool = False
    #: the deviations the Hessian-vector products were taken for (None: not recorded)
    n_probes: int | None = None
    #: standard errors of ``trace_h_sigma`` and ``b_noise`` from subsampled probes
    #: (0 when every example is a probe)
    trace_h_sigma_se: float = 0.0
    b_noise_se: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def unbiased(self, population_size: float | None = None) -> HessianNoiseScale:
        r"""The estimate for the population the ``n`` examples were drawn from.

        With $\hat\Sigma$ rescaled to the Bessel-corrected covariance $s$,

        $$
        \operatorname{tr}\Sigma = \tfrac{n-\text{ddof}}{n-1}\operatorname{tr}\hat\Sigma,\quad
        |G|^2 = |\bar g|^2 - \operatorname{tr}\Sigma / n,\quad
        G^THG = \bar g^T H \bar g - \operatorname{tr}(H\Sigma) / n,
        $$

        (and likewise $\operatorname{tr}(H\Sigma)$): unbiased for independent
        examples when $H$ does not vary between them (exact for a quadratic
        loss). For ``ddof=0`` this B_simple equals `gns_many`
        on the per-example squared norms. Like that estimator, the corrected
        $|G|^2$ may be negative when noise dominates.

        ``population_size`` $D$ (default: an unbounded population): the ``n`` examples
        were drawn *without* replacement from a finite set of $D$, and batches are drawn
        *with* replacement from that set, so the batch covariance is $\Sigma_D/B$ with
        $\Sigma_D$ the set's covariance (``ddof=0``). Then
        $E|\bar g|^2 = |G_D|^2 + \operatorname{tr}s\,(1/n - 1/D)$ with $E\,s = \tfrac{D}{D-1}
        \Sigma_D$ (the finite-population correction), so

        $$
        \operatorname{tr}\Sigma_D = \tfrac{D-1}{D}\operatorname{tr}s,\quad
        |G_D|^2 = |\bar g|^2 - \operatorname{tr}s\,(1/n - 1/D),
        $$

        and the same for $\operatorname{tr}(H\Sigma_D)$ and $G_D^THG_D$. At $n = D$ this
        is the uncorrected (``ddof=0``) value: the whole set is measured. The result is
        labelled ``ddof=0`` then (the set's covariance).
        """
        if self.unbiased_for_population:
            raise InputError("this estimate is already corrected for the sample size")
        n = self.n_examples
        if n < 2:
            raise InputError(f"the sample-size correction needs n >= 2 examples, got {n}")
        big_d = (None if population_size is None or math.isinf(population_size)
                 else float(population_size))
        if big_d is not None and not big_d >= n:
            raise InputError(f"population_size must be >= the {n} examples measured, got "
                             f"{population_size}")
        scale = (n - self.ddof) / (n - 1)
        trs, trhs = self.trace_sigma * scale, self.trace_h_sigma * scale
        inv = 1.0 / n - (0.0 if big_d is None else 1.0 / big_d)
        g2, ghg = self.g2 - trs * inv, self.ghg - trhs * inv
        keep = 1.0 if big_d is None else (big_d - 1.0) / big_d
        trs, trhs = trs * keep, trhs * keep
        d = noise_scales_from_scalars(g2, ghg, trs, trhs)
        # b_noise = keep s T / (ghg0 - s inv T) in the measured T = trace_h_sigma:
        # d b_noise / dT = keep s ghg0 / (ghg0 - s inv T)^2 (the delta method)
        slope = keep * scale * self.ghg / ghg**2 if ghg != 0 else math.inf
        se_t = self.trace_h_sigma_se
        return HessianNoiseScale(
            b_noise=d["b_noise"], b_simple=d["b_simple"],
            g2=g2, ghg=ghg, trace_sigma=trs, trace_h_sigma=trhs, n_examples=n,
            ddof=1 if big_d is None else 0, unbiased_for_population=True,
            n_probes=self.n_probes, trace_h_sigma_se=se_t * scale * keep,
            b_noise_se=abs(slope) * se_t if se_t > 0 else 0.0,
        )

    def quadratic_model(self):
        """The `QuadraticModel` with these scalars."""
        from ..theory import QuadraticModel

        return QuadraticModel.from_scalars(g2=self.g2, ghg=self.ghg,
                                           trace_sigma=self.trace_sigma,
                                           trace_h_sigma=self.trace_h_sigma)


def hessian_noise_scale(model, loss_fn, inputs, targets, *, params=None, ddof: int = 0,
                        chunk_size: int | None = None,
                        grad_chunk_size: int | None = None,
                        n_probes: int | None = None, seed: int = 0) -> HessianNoiseScale:
    """$B_{noise}$ and $B_{simple}$ at the current parameters.

    ``loss_fn(outputs, targets)`` is the batch-mean loss; ``ddof=0`` treats the
    ``n`` examples as the whole data set (population covariance), ``ddof=1`` as a
    sample from a larger one. ``chunk_size`` limits how many HVPs run at once (each
    a double backward through all ``n`` examples) and ``grad_chunk_size`` how many
    per-example gradients (default: ``chunk_size``); neither changes the result
    beyond round-off. ``n_probes``: take the Hessian-vector products for that many of
    the ``n`` deviations, drawn without replacement with ``seed`` (module notes:
    unbiased, with its standard error); ``None`` or ``n_probes >= n``: all of them.
    Computation is in the parameters' dtype (use float64 for exact checks).
    """
    from torch.func import functional_call, grad, vmap

    chosen = select_params(model, params)
    n = check_batch(inputs, targets)
    ddof = as_scalar(ddof)
    if isinstance(ddof, bool) or not isinstance(ddof, int) or ddof < 0:
        raise InputError(f"ddof must be a non-negative integer (0 or 1), got {ddof!r}")
    if chunk_size is not None:
        chunk_size = check_batch_size(chunk_size, "chunk_size")
    if grad_chunk_size is None:
        grad_chunk_size = chunk_size
    else:
        grad_chunk_size = check_batch_size(grad_chunk_size, "grad_chunk_size")
    if n - ddof < 1:
        raise InputError(f"need more than ddof={ddof} examples, got {n}")
    m = n if n_probes is None else min(check_batch_size(n_probes, "n_probes"), n)
    if m < 2 <= n:
        raise InputError(f"n_probes must be >= 2 (a standard error needs two probes), "
                         f"got {n_probes!r}")
    names = [k for k, _ in chosen]
    shapes = [p.shape for _, p in chosen]
    sizes = [p.numel() for _, p in chosen]
    theta = torch.cat([p.detach().reshape(-1) for _, p in chosen])
    fixed = fixed_state(model, set(names))

    def unflat(vec):
        return {k: v.reshape(s) for k, v, s in zip(names, vec.split(sizes), shapes,
                                                     strict=True)}

    def loss_at(vec, x, y):
        return loss_fn(functional_call(model, {**fixed, **unflat(vec)}, (x,)), y)

    per = vmap(grad(lambda v, x, y: loss_at(v, x.unsqueeze(0), y.unsqueeze(0))),
               in_dims=(None, 0, 0), chunk_size=grad_chunk_size)(theta, inputs, targets)
    g = per.mean(0)
    dev = per - g
    g_full = grad(lambda v: loss_at(v, inputs, targets))

    def hvp(v):
        # reverse-over-reverse: H v = ∇(∇L · v). Forward-over-reverse (jvp of grad)
        # is faster but fails on losses whose backward formula lacks forward-mode
        # support (torch 2.13: F.mse_loss raises "ZeroTensors are immutable").
        return grad(lambda t: torch.dot(g_full(t), v))(theta)

    probes = dev
    if m < n:
        gen = torch.Generator().manual_seed(int(seed))
        probes = dev[torch.randperm(n, generator=gen)[:m].to(dev.device)]
    prod = probes * vmap(hvp, chunk_size=chunk_size)(probes)
    hg = hvp(g)
    denom = n - ddof
    if m < n:  # the expansion estimate n mean(q) and its variance
        q = prod.sum(1)
        shs, var_q = n * q.mean(), q.var()
    else:
        shs, var_q = prod.sum(), torch.zeros((), dtype=prod.dtype, device=prod.device)
    # one device->host transfer for the five sums
    g2, ghg, ss, shs, var_q = torch.stack([g @ g, g @ hg, dev.square().sum(),
                                           shs, var_q]).tolist()
    trace_sigma, trace_h_sigma = ss / denom, shs / denom
    se = n * math.sqrt(max(var_q, 0.0) * (1.0 - m / n) / m) / denom
    d = noise_scales_from_scalars(g2, ghg, trace_sigma, trace_h_sigma)
    return HessianNoiseScale(
        b_noise=d["b_noise"], b_simple=d["b_simple"],
        g2=g2, ghg=ghg, trace_sigma=trace_sigma, trace_h_sigma=trace_h_sigma,
        n_examples=int(n), ddof=ddof, n_probes=int(m), trace_h_sigma_se=se,
        b_noise_se=se / abs(ghg) if se > 0 else 0.0,
    )
