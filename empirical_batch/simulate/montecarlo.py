r"""Monte Carlo SGD on the noisy quadratic, in torch (CPU or CUDA).

One tensor program advances every (batch size × learning rate × seed) run at once:
the state has shape ``(n_batch, n_lr, n_seed, dims)``. Each step draws the
*batch-mean* gradient noise directly, $\hat\xi_i \sim N(0, c_i/B)$, which has
exactly the distribution of the mean of $B$ independent Gaussian per-example
noises $N(0, c_i)$; this costs O(dims) per run and step instead of O(B·dims).

With ``dataset_size=N`` the per-example noises are instead a fixed table of
$N$ vectors, and each step averages $B$ rows drawn *with replacement*.
The table is centred and rescaled per direction so that its mean is exactly 0 and
its (population) variance exactly $c_i$; conditional on the table the batch
mean then has mean 0 and variance $c_i/B$, the same second moments as the
exact dynamics, but it is not Gaussian and the same examples recur (a finite-data
effect the exact dynamics do not model beyond second moments).

torch is imported inside `monte_carlo_sgd` only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._numeric import log_steps
from .._optional import optional_import, torch_device
from .._validate import (
    as_array,
    check_count,
    check_dataset_size,
    check_positive,
)
from ..errors import InputError
from ..params import instance_of, removed_keywords, validate_params
from ..result import Result
from .powers import Dtype
from .quadratic import NoisyQuadratic

__all__ = ["MonteCarloResult", "log_steps", "monte_carlo_sgd"]


def _int_at_least(value, name: str, low: int) -> int:
    return check_count(value, name, low)


@dataclass(frozen=True)
class MonteCarloResult(Result):
    """Losses of Monte Carlo SGD runs.

    ``loss[i, j, s, t]`` is the loss of seed ``s`` at batch size ``batch_sizes[i]``,
    learning rate ``learning_rates[j]`` after ``steps[t]`` steps (inf/NaN once a run
    diverges).
    """

    batch_sizes: np.ndarray
    learning_rates: np.ndarray
    steps: np.ndarray
    loss: np.ndarray
    device: str
    dtype: str
    dataset_size: int | None

    def mean(self) -> np.ndarray:
        """Mean loss over seeds, shape ``(n_batch, n_lr, n_steps)``."""
        return self.loss.mean(axis=2)

    def stderr(self) -> np.ndarray:
        """Standard error of that mean (sample std over seeds / √seeds)."""
        n = self.loss.shape[2]
        if n < 2:
            raise InputError("stderr needs at least 2 seeds")
        return self.loss.std(axis=2, ddof=1) / np.sqrt(n)

    def to_dict(self) -> dict:
        return {
            "batch_sizes": self.batch_sizes.tolist(),
            "learning_rates": self.learning_rates.tolist(),
            "steps": self.steps.tolist(),
            "loss": self.loss.tolist(),
            "device": self.device,
            "dtype": self.dtype,
            "dataset_size": self.dataset_size,
        }

    def to_frame(self) -> pd.DataFrame:
        """Long table: batch_size, learning_rate, seed, step, loss."""
        nb, nl, ns, nt = self.loss.shape
        grid = np.meshgrid(np.arange(nb), np.arange(nl), np.arange(ns), np.arange(nt),
                           indexing="ij")
        return pd.DataFrame(
            {
                "batch_size": self.batch_sizes[grid[0].ravel()],
                "learning_rate": self.learning_rates[grid[1].ravel()],
                "seed": grid[2].ravel(),
                "step": self.steps[grid[3].ravel()],
                "loss": self.loss.ravel(),
            }
        )


@removed_keywords(seeds="n_seeds")
@validate_params(problem=instance_of(NoisyQuadratic), dtype=Dtype)
def monte_carlo_sgd(
    problem: NoisyQuadratic,
    batch_sizes,
    learning_rates,
    steps: int,
    *,
    n_seeds: int = 8,
    record_steps=None,
    n_points: int = 50,
    seed: int = 0,
    device: str = "cpu",
    dtype: Dtype = "float32",
    dataset_size: int | None = None,
    progress: bool = False,
    max_elements: int = 1 << 26,
) -> MonteCarloResult:
    r"""Run SGD on the noisy quadratic for every (B, lr, seed) in one tensor program.

    Each run starts from $\theta_i(0) \sim N(0, E[\theta_i(0)^2])$ and applies
    the same update as `NoisyQuadratic` (preconditioner, heavy-ball momentum
    with zero initial velocity, EMA of iterates: the EMA iterate's loss is recorded).

    Parameters
    ----------
    problem : NoisyQuadratic
    batch_sizes, learning_rates : 1-D arrays of positive numbers
    steps : int
        Steps to run.
    n_seeds : int
        Independent replicas per (B, lr).
    record_steps : 1-D int array, optional
        Steps at which the loss is recorded (default `log_steps`).
    seed : int
        Seed of the torch generator.
    device : str
        ``"cpu"`` or ``"cuda"`` (or any torch device string).
    dtype : str
        ``"float32"`` or ``"float64"``.
    dataset_size : int, optional
        Use a finite table of per-example noises sampled with replacement.
    progress : bool
        Show a tqdm progress bar over steps.
    max_elements : int
        Largest state tensor; the learning-rate axis is split into chunks above it.

    Returns
    -------
    MonteCarloResult
    """
    with optional_import("torch", by="monte_carlo_sgd"):
        import torch

    bs = check_positive(as_array(batch_sizes, "batch_sizes", ndim=1), "batch_sizes")
    lrs = check_positive(as_array(learning_rates, "learning_rates", ndim=1), "learning_rates")
    steps = _int_at_least(steps, "steps", 0)
    seeds = _int_at_least(n_seeds, "n_seeds", 1)
    if record_steps is None:
        rec = log_steps(steps, n_points) if steps >= 1 else np.array([0])
    else:
        rec = np.unique(as_array(record_steps, "record_steps", ndim=1)).astype(np.int64)
        if rec.size == 0 or rec.min() < 0 or rec.max() > steps:
            raise InputError(f"record_steps must lie in [0, steps={steps}]")
    if dataset_size is not None:
        dataset_size = check_dataset_size(dataset_size)
        if np.any(bs != np.round(bs)):
            raise InputError("batch_sizes must be integers with a finite dataset")
        dataset_size = int(dataset_size)
    tdtype = getattr(torch, dtype)
    dev = torch_device(device)
    gen = torch.Generator(device=dev).manual_seed(int(seed))

    d = problem.dims
    per_lr = bs.size * seeds * d
    chunk = max(1, int(max_elements) // max(per_lr, 1))
    out = np.empty((bs.size, lrs.size, seeds, rec.size))
    table = None
    if dataset_size is not None:
        x = torch.randn(dataset_size, d, generator=gen, device=dev, dtype=torch.float64)
        x = x - x.mean(dim=0)
        std = x.pow(2).mean(dim=0).sqrt()
        if torch.any(std == 0):  # pragma: no cover - probability zero
            raise InputError("degenerate noise table; use a larger dataset_size")
        c = torch.as_tensor(problem.update_noise, device=dev, dtype=torch.float64)
        table = (x / std * c.sqrt()).to(tdtype)  # preconditioned per-example noise
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps * int(np.ceil(lrs.size / chunk)), desc="monte carlo", unit="step")
    for s in range(0, lrs.size, chunk):
        sl = slice(s, s + chunk)
        out[:, sl] = _run_chunk(problem, bs, lrs[sl], steps, seeds, rec, gen, dev, tdtype,
                                table, bar)
    if bar is not None:
        bar.close()
    return MonteCarloResult(bs, lrs, rec, out, str(dev), dtype, dataset_size)


def _run_chunk(problem, bs, lrs, steps, seeds, rec, gen, dev, tdtype, table, bar):
    with optional_import("torch", by="monte_carlo_sgd"):
        import torch

    d = problem.dims
    shape = (bs.size, lrs.size, seeds, d)

    def t(x):
        return torch.as_tensor(np.asarray(x, dtype=float), device=dev).to(tdtype)

    h = t(problem.curvature)
    hp = t(problem.update_curvature).view(1, 1, 1, d)
    a = t(lrs).view(1, -1, 1, 1)
    beta = problem.momentum
    u = 1.0 + beta - a * hp  # (1, n_lr, 1, d): θ' = u θ - β θ_prev - a ξ
    if table is None:
        # a·sqrt(c_p/B): scale of the batch-mean noise term, (n_b, n_lr, 1, d)
        scale = a * (t(problem.update_noise).view(1, 1, 1, d) / t(bs).view(-1, 1, 1, 1)).sqrt()
    else:
        scale = a.expand(bs.size, -1, -1, -1)
    theta = torch.randn(shape, generator=gen, device=dev, dtype=tdtype) * t(problem.init).sqrt()
    prev = theta.clone() if beta > 0 else None
    gamma = problem.ema
    avg = theta.clone() if gamma is not None else None
    xi = torch.empty(shape, device=dev, dtype=tdtype)
    rec_set = {int(k): i for i, k in enumerate(rec)}
    res = torch.empty((bs.size, lrs.size, seeds, rec.size), dtype=torch.float64, device=dev)
    bint = [int(b) for b in bs]
    h64 = h.to(torch.float64)

    def record(k):
        i = rec_set.get(k)
        if i is not None:
            x = avg if avg is not None else theta
            res[..., i] = 0.5 * (x.to(torch.float64).pow(2) @ h64)

    record(0)
    for k in range(1, steps + 1):
        if table is None:
            xi.normal_(generator=gen)
        else:
            for i, b in enumerate(bint):
                idx = torch.randint(0, table.shape[0], (lrs.size, seeds, b), generator=gen,
                                    device=dev)
                xi[i] = table[idx].mean(dim=2)
        if prev is not None:  # momentum (beta > 0)
            # prev <- u θ - β prev - scale ξ, then swap: fused, no new tensors
            prev.mul_(-beta).addcmul_(theta, u).addcmul_(xi, scale, value=-1.0)
            theta, prev = prev, theta
        else:
            theta.mul_(u).addcmul_(xi, scale, value=-1.0)
        if avg is not None:
            avg.mul_(gamma).add_(theta, alpha=1.0 - gamma)
        record(k)
        if bar is not None:
            bar.update(1)
    return res.cpu().numpy()
