"""hessian_noise_scale against theory.QuadraticModel and a brute-force Hessian."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"  # raised inside torch.func
)
from torch import nn  # noqa: E402

from empirical_batch.measure import hessian_noise_scale  # noqa: E402
from empirical_batch.theory import QuadraticModel  # noqa: E402


class Quadratic(nn.Module):
    """Per-example loss ½(θ−θ*)ᵀH(θ−θ*) + x_iᵀθ: gradient H(θ−θ*) + x_i, Hessian H."""

    def __init__(self, h, theta_star, theta):
        super().__init__()
        self.register_buffer("h", h)
        self.register_buffer("theta_star", theta_star)
        self.theta = nn.Parameter(theta)

    def forward(self, x):
        d = self.theta - self.theta_star
        return 0.5 * d @ self.h @ d + x @ self.theta  # (B,)


def _mean(out, _target):
    return out.mean()


def test_equals_quadratic_model_closed_form():
    rng = np.random.default_rng(0)
    n, d = 40, 5
    a = rng.normal(size=(d, d))
    h = a @ a.T + np.eye(d)  # SPD, not ∝ I, so B_noise ≠ B_simple
    x = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, d)
    theta_star, theta = rng.normal(size=d), rng.normal(size=d)
    model = Quadratic(*(torch.tensor(v) for v in (h, theta_star, theta)))
    res = hessian_noise_scale(model, _mean, torch.tensor(x), torch.zeros(n, dtype=torch.float64))
    g = h @ (theta - theta_star) + x.mean(0)
    sigma = np.cov(x.T, bias=True)  # population covariance of the per-example gradients
    qm = QuadraticModel(g, h, sigma)
    assert abs(qm.b_noise - qm.b_simple) > 0.05 * qm.b_simple  # the two really differ
    # float64 throughout: agreement to rounding
    assert res.b_noise == pytest.approx(qm.b_noise, rel=1e-10)
    assert res.b_simple == pytest.approx(qm.b_simple, rel=1e-10)
    assert res.quadratic_model().b_noise == pytest.approx(qm.b_noise, rel=1e-12)
    assert res.to_dict()["n_examples"] == n


def test_brute_force_hessian_on_mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    x, y = torch.randn(12, 3, dtype=torch.float64), torch.randn(12, 1, dtype=torch.float64)

    def mse(o, t):
        return ((o - t) ** 2).mean()

    res = hessian_noise_scale(model, mse, x, y, ddof=1)
    params = list(model.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    shapes = [p.shape for p in params]

    def loss_flat(v, xs, ys):
        chunks, i = [], 0
        for s in shapes:
            k = int(np.prod(s))
            chunks.append(v[i:i + k].reshape(s))
            i += k
        w1, b1, w2, b2 = chunks
        return mse(torch.tanh(xs @ w1.T + b1) @ w2.T + b2, ys)

    hess = torch.autograd.functional.hessian(lambda v: loss_flat(v, x, y), flat).numpy()
    per = np.stack([torch.autograd.functional.jacobian(
        lambda v, i=i: loss_flat(v, x[i:i + 1], y[i:i + 1]), flat).numpy() for i in range(12)])
    g = per.mean(0)
    sigma = np.cov(per.T, ddof=1)
    assert res.trace_h_sigma == pytest.approx(np.trace(hess @ sigma), rel=1e-9)
    assert res.ghg == pytest.approx(g @ hess @ g, rel=1e-9)
    assert res.b_simple == pytest.approx(np.trace(sigma) / (g @ g), rel=1e-9)


def test_bad_input():
    model = nn.Linear(2, 1)
    model.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        hessian_noise_scale(model, _mean, torch.zeros(3, 2), torch.zeros(3))
    with pytest.raises(ValueError, match="ddof"):
        hessian_noise_scale(nn.Linear(2, 1), _mean, torch.zeros(1, 2), torch.zeros(1), ddof=1)


def test_builtin_mse_loss_matches_handwritten():
    """F.mse_loss has no forward-mode backward on torch 2.13; the HVPs must not need it."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).double()
    x, y = torch.randn(32, 4, dtype=torch.float64), torch.randn(32, 1, dtype=torch.float64)
    builtin = hessian_noise_scale(model, F.mse_loss, x, y)
    manual = hessian_noise_scale(model, lambda o, t: ((o - t) ** 2).mean(), x, y)
    assert builtin.b_noise == pytest.approx(manual.b_noise, rel=1e-12)
    assert builtin.b_simple == pytest.approx(manual.b_simple, rel=1e-12)
