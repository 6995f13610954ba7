"""Exact oracle shared by the measure tests: linear least squares on a fixed data set.

Per-example loss l_i = ½(w·x_i + c − y_i)², so the per-example gradient is
g_i = r_i [x_i, 1] with residual r_i. Batches drawn *with replacement* from the N
examples have E|G_B|² = |G|² + tr(Σ)/B exactly, with G the mean of g_i and Σ their
population covariance: B_simple is known exactly.
"""

from __future__ import annotations

import math

import numpy as np

try:
    import torch
except ImportError:  # collected by --doctest-modules without torch; tests skip
    torch = None

N, D = 64, 5


def dataset(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D))
    y = x @ rng.normal(size=D) + 0.5 * rng.normal(size=N)
    return torch.tensor(x), torch.tensor(y).unsqueeze(1)


def model(seed: int = 1) -> torch.nn.Linear:
    torch.manual_seed(seed)
    m = torch.nn.Linear(D, 1).double()
    with torch.no_grad():
        m.weight.mul_(2.0)
        m.bias.fill_(0.7)
    return m


def loss_fn(out, target):
    """Batch-mean of ½ squared error (what the training loop would use)."""
    return 0.5 * ((out - target) ** 2).mean()


def per_example_grads(m: torch.nn.Linear, x, y) -> np.ndarray:
    """(N, D+1) exact per-example gradients, numpy, no autograd."""
    w = m.weight.detach().numpy().ravel()
    c = float(m.bias.detach())
    xn, yn = x.numpy(), y.numpy().ravel()
    r = xn @ w + c - yn
    return np.concatenate([r[:, None] * xn, r[:, None]], axis=1)


def exact(m, x, y) -> tuple[float, float]:
    """(|G|², tr Σ) of the finite data set."""
    g = per_example_grads(m, x, y)
    mean = g.mean(0)
    return float(mean @ mean), float(((g - mean) ** 2).sum(1).mean())


def check_recovers(frame, g2, tr, n_sd: float = 4.0) -> None:
    """Means of the per-step unbiased components match the truth within n_sd SE,
    and their ratio recovers B_simple within n_sd delta-method SE.

    The per-step estimates are independent across steps (fresh draws), so the
    standard error of their mean is sd/√T.
    """
    t = len(frame)
    eg, es = frame["g2"].to_numpy(), frame["trace_sigma"].to_numpy()
    se_g, se_s = eg.std(ddof=1) / math.sqrt(t), es.std(ddof=1) / math.sqrt(t)
    assert abs(eg.mean() - g2) < n_sd * se_g, (eg.mean(), g2, se_g)
    assert abs(es.mean() - tr) < n_sd * se_s, (es.mean(), tr, se_s)
    r = es.mean() / eg.mean()
    cov = np.cov(es, eg) / t
    se_r = math.sqrt(cov[0, 0] - 2 * r * cov[0, 1] + r * r * cov[1, 1]) / abs(eg.mean())
    assert abs(r - tr / g2) < n_sd * se_r, (r, tr / g2, se_r)
    # and the test has power: the tolerance is well below B_simple itself
    assert se_r < 0.25 * tr / g2, se_r


def free_port() -> int:
    """A free TCP port on 127.0.0.1 for a test's process group."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

