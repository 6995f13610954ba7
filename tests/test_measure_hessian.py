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


def _mse(o, t):
    return ((o - t) ** 2).mean()


def _double_mlp(seed, d_in, hidden, n, device="cpu"):
    """Linear-tanh-linear float64 model and n random (input, target) pairs."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, 1))
    model = model.double().to(device)
    x = torch.randn(n, d_in, dtype=torch.float64).to(device)
    y = torch.randn(n, 1, dtype=torch.float64).to(device)
    return model, x, y


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
    model, x, y = _double_mlp(0, 3, 4, 12)
    res = hessian_noise_scale(model, _mse, x, y, ddof=1)
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
        return _mse(torch.tanh(xs @ w1.T + b1) @ w2.T + b2, ys)

    hess = torch.autograd.functional.hessian(lambda v: loss_flat(v, x, y), flat).numpy()
    per = np.stack([torch.autograd.functional.jacobian(
        lambda v, i=i: loss_flat(v, x[i:i + 1], y[i:i + 1]), flat).numpy() for i in range(12)])
    g = per.mean(0)
    sigma = np.cov(per.T, ddof=1)
    assert res.trace_h_sigma == pytest.approx(np.trace(hess @ sigma), rel=1e-9)
    assert res.ghg == pytest.approx(g @ hess @ g, rel=1e-9)
    assert res.b_simple == pytest.approx(np.trace(sigma) / (g @ g), rel=1e-9)


def test_chunks_change_nothing_but_round_off():
    model, x, y = _double_mlp(1, 3, 4, 12)
    whole = hessian_noise_scale(model, _mse, x, y)
    for hvps, grads in ((3, None), (5, 2), (None, 1), (64, 7)):
        part = hessian_noise_scale(model, _mse, x, y, chunk_size=hvps, grad_chunk_size=grads)
        for key in ("g2", "ghg", "trace_sigma", "trace_h_sigma"):
            assert getattr(part, key) == pytest.approx(getattr(whole, key), rel=1e-12)


def test_bad_input():
    model = nn.Linear(2, 1)
    model.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        hessian_noise_scale(model, _mean, torch.zeros(3, 2), torch.zeros(3))
    with pytest.raises(ValueError, match="ddof"):
        hessian_noise_scale(nn.Linear(2, 1), _mean, torch.zeros(1, 2), torch.zeros(1), ddof=1)
    lin, x3, y3 = nn.Linear(2, 1), torch.zeros(3, 2), torch.zeros(3)
    for bad in (-1, 0.5, True):
        with pytest.raises(ValueError, match="ddof must be a non-negative integer"):
            hessian_noise_scale(lin, _mean, x3, y3, ddof=bad)
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        hessian_noise_scale(lin, _mean, x3, y3, chunk_size=0)
    with pytest.raises(ValueError, match="grad_chunk_size must be >= 1"):
        hessian_noise_scale(lin, _mean, x3, y3, grad_chunk_size=0)
    with pytest.raises(ValueError, match=r"targets must have the batch size of inputs \(3\)"):
        hessian_noise_scale(lin, _mean, x3, torch.zeros(()))
    with pytest.raises(TypeError, match="inputs must be a tensor"):
        hessian_noise_scale(lin, _mean, [[0.0, 0.0]], y3)


def test_builtin_mse_loss_matches_handwritten():
    """F.mse_loss has no forward-mode backward on torch 2.13; the HVPs must not need it."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).double()
    x, y = torch.randn(32, 4, dtype=torch.float64), torch.randn(32, 1, dtype=torch.float64)
    builtin = hessian_noise_scale(model, F.mse_loss, x, y)
    manual = hessian_noise_scale(model, _mse, x, y)
    assert builtin.b_noise == pytest.approx(manual.b_noise, rel=1e-12)
    assert builtin.b_simple == pytest.approx(manual.b_simple, rel=1e-12)


class _Shift(nn.Module):
    """Per-example loss ½ (θ − x)ᵀ A (θ − x): gradient A(θ − x), Hessian A for every x."""

    def __init__(self, theta):
        super().__init__()
        self.theta = nn.Parameter(theta)

    def forward(self, x):
        return x - self.theta


def test_unbiased_removes_sample_size_bias():
    """x ~ N(μ, C): G = A(θ − μ), Σ = A C A. Over many samples of n examples the plug-in
    |G|², GᵀHG are biased by tr Σ/n, tr(HΣ)/n; unbiased() must remove that."""
    rng = np.random.default_rng(0)
    d, n, draws = 3, 6, 400
    a = np.diag([1.0, 2.0, 4.0])
    mu, theta = np.array([0.5, -0.3, 0.2]), np.zeros(d)
    g = a @ (theta - mu)
    sigma = a @ a  # C = I
    at = torch.tensor(a)

    def loss_fn(out, _t):
        return 0.5 * torch.einsum("ni,ij,nj->n", out, at, out).mean()

    model = _Shift(torch.tensor(theta)).double()
    raw, fixed = [], []
    for _ in range(draws):
        x = torch.tensor(mu + rng.standard_normal((n, d)))
        r = hessian_noise_scale(model, loss_fn, x, torch.zeros(n))
        u = r.unbiased()
        raw.append((r.g2, r.ghg))
        fixed.append((u.g2, u.ghg, u.trace_sigma, u.trace_h_sigma))
    raw, fixed = np.array(raw), np.array(fixed)
    truth = np.array([g @ g, g @ a @ g, np.trace(sigma), np.trace(a @ sigma)])
    se = fixed.std(axis=0, ddof=1) / np.sqrt(draws)
    np.testing.assert_array_less(np.abs(fixed.mean(axis=0) - truth), 4 * se)  # 4 MC SE
    # the plug-in values are off by tr Σ/n and tr(HΣ)/n, far beyond their MC error
    raw_se = raw.std(axis=0, ddof=1) / np.sqrt(draws)
    assert np.all(raw.mean(axis=0) - truth[:2] > 4 * raw_se)


def test_unbiased_b_simple_equals_the_many_batches_estimator():
    """For ddof=0 the corrected B_simple is gns_many on per-example squared norms."""
    from empirical_batch import gns_many
    from empirical_batch.measure import per_example_sq_norms

    model, x, y = _double_mlp(1, 4, 6, 20)
    u = hessian_noise_scale(model, _mse, x, y).unbiased()
    small = per_example_sq_norms(model, _mse, x, y).detach().numpy()
    model.zero_grad()
    _mse(model(x), y).backward()
    big = sum(float(p.grad.square().sum()) for p in model.parameters())
    g2, tr = gns_many(small, big, 1)
    # float64 model: float64 throughout, agreement to rounding
    assert u.g2 == pytest.approx(g2, rel=1e-10)
    assert u.trace_sigma == pytest.approx(tr, rel=1e-10)
    with pytest.raises(ValueError, match="already corrected"):
        u.unbiased()


def _mlp_scales(device):
    model, x, y = _double_mlp(0, 3, 4, 12, device)
    return hessian_noise_scale(model, _mse, x, y, chunk_size=5)


@pytest.mark.gpu
def test_cuda_matches_cpu():
    cpu, gpu = _mlp_scales(torch.device("cpu")), _mlp_scales(torch.device("cuda"))
    # float64 on both devices: summation order only
    for key in ("b_noise", "b_simple", "g2", "ghg", "trace_sigma", "trace_h_sigma"):
        assert getattr(gpu, key) == pytest.approx(getattr(cpu, key), rel=1e-9), key


def test_finite_population_correction_is_exact_over_every_sample():
    """A finite set of D examples, n of them drawn without replacement: averaged over all
    C(D, n) samples (brute force), unbiased(population_size=D) gives exactly the set's own
    |G|², GᵀHG, tr Σ_D and tr(HΣ_D) (ddof 0: batches drawn with replacement from the set),
    and at n = D it is the plug-in value. The unbounded correction is biased here."""
    from itertools import combinations

    rng = np.random.default_rng(3)
    d, big_d, n = 3, 8, 4
    a = np.diag([1.0, 2.0, 4.0])
    at = torch.tensor(a)
    xs = rng.standard_normal((big_d, d)) + np.array([0.5, -0.3, 0.2])
    theta = np.zeros(d)

    def loss_fn(out, _t):
        return 0.5 * torch.einsum("ni,ij,nj->n", out, at, out).mean()

    model = _Shift(torch.tensor(theta)).double()
    # the set's own values, from the per-example gradients a (θ − x_i) directly
    gi = (theta - xs) @ a
    g = gi.mean(axis=0)
    sig = (gi - g).T @ (gi - g) / big_d
    truth = np.array([g @ g, g @ a @ g, np.trace(sig), np.trace(a @ sig)])
    fpc, inf = [], []
    for idx in combinations(range(big_d), n):
        r = hessian_noise_scale(model, loss_fn, torch.tensor(xs[list(idx)]), torch.zeros(n))
        u = r.unbiased(population_size=big_d)
        fpc.append((u.g2, u.ghg, u.trace_sigma, u.trace_h_sigma))
        w = r.unbiased()
        inf.append((w.g2, w.ghg))
    np.testing.assert_allclose(np.mean(fpc, axis=0), truth, rtol=1e-10)
    assert np.all(np.abs(np.mean(inf, axis=0) - truth[:2]) > 1e-3 * np.abs(truth[:2]))
    whole = hessian_noise_scale(model, loss_fn, torch.tensor(xs), torch.zeros(big_d))
    u = whole.unbiased(population_size=big_d)
    assert (u.b_noise, u.b_simple) == pytest.approx((whole.b_noise, whole.b_simple), rel=1e-12)
    assert u.unbiased_for_population and u.ddof == 0
    assert whole.unbiased(float("inf")) == whole.unbiased()
    with pytest.raises(ValueError, match="population_size"):
        whole.unbiased(population_size=big_d - 1)
