"""per_example_sq_norms (fast path, vmap, loop) and PerExampleNoiseScale."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"  # raised inside torch.func
)
from torch import nn  # noqa: E402

from empirical_batch.estimators import gns_two_batch  # noqa: E402
from empirical_batch.measure import PerExampleNoiseScale, per_example_sq_norms  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402


class TinySeq(nn.Module):
    """Embedding + LayerNorm + Linear over a sequence: every code path."""

    def __init__(self, vocab=11, d=6, wide=40):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)  # padding rows get no gradient
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, wide)  # T(din+dout) = 138 <= 240: Gram trick
        self.down = nn.Linear(wide, 2, bias=False)  # 126 > 80: materialised, no bias
        self.head = nn.Linear(2, 1)  # 9 > 2: materialised per-example weight grad

    def forward(self, tok):
        h = self.down(torch.tanh(self.up(self.norm(self.emb(tok)))))
        return self.head(h).mean(1)


def _mse(out, y):
    return ((out - y) ** 2).mean()


@pytest.mark.parametrize("method", ["auto", "vmap"])
def test_matches_loop_mlp(method):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    x, y = torch.randn(7, 4, dtype=torch.float64), torch.randn(7, 3, dtype=torch.float64)
    got = per_example_sq_norms(model, _mse, x, y, method=method)
    ref = per_example_sq_norms(model, _mse, x, y, method="loop")
    # float64 model: float64 products and sums, agreement to rounding (~1e-15 relative)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=0)
    assert all(p.grad is None for p in model.parameters())  # .grad untouched


@pytest.mark.parametrize("method", ["auto", "vmap"])
def test_matches_loop_sequence_model(method):
    torch.manual_seed(1)
    model = TinySeq().double()
    tok = torch.randint(0, 11, (5, 3))
    y = torch.randn(5, 1, dtype=torch.float64)
    got = per_example_sq_norms(model, _mse, tok, y, method=method)
    ref = per_example_sq_norms(model, _mse, tok, y, method="loop")
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=0)  # float64, as above
    sub = per_example_sq_norms(model, _mse, tok, y, params=["head.weight", "emb.weight"])
    ref_sub = per_example_sq_norms(model, _mse, tok, y, params=["head.weight", "emb.weight"],
                                   method="loop")
    torch.testing.assert_close(sub, ref_sub, rtol=1e-12, atol=0)


def test_exact_norms_and_recovery():
    x, y = orc.dataset()
    m = orc.model()
    g = orc.per_example_grads(m, x, y)
    got = per_example_sq_norms(m, orc.loss_fn, x, y).double().numpy()
    np.testing.assert_allclose(got, np.sum(g**2, 1), rtol=1e-10)  # float64 throughout
    # with-replacement batches of 16: mean |g_i|^2 (b=1) vs |mean g_i|^2 (b=16)
    rng = np.random.default_rng(2)
    rows = []
    bsz = 16
    for _ in range(500):
        idx = rng.integers(0, orc.N, bsz)
        small = float(per_example_sq_norms(m, orc.loss_fn, x[idx], y[idx]).mean())
        big = float(np.sum(g[idx].mean(0) ** 2))
        rows.append(gns_two_batch(small, 1, big, bsz))
    import pandas as pd

    frame = pd.DataFrame(rows, columns=["g2", "trace_sigma"])
    orc.check_recovers(frame, *orc.exact(m, x, y))


def test_collector_in_training_step():
    x, y = orc.dataset()
    m = orc.model()
    col = PerExampleNoiseScale(m, beta=0.99)
    g = orc.per_example_grads(m, x, y)
    rng = np.random.default_rng(3)
    bsz = 16
    for t in range(400):
        idx = rng.integers(0, orc.N, bsz)
        orc.loss_fn(m(x[idx]), y[idx]).backward()
        col.step()
        m.zero_grad()
        if t == 0:
            row = col.to_frame().iloc[0]
            np.testing.assert_allclose(row.sq_norm_small, np.mean(np.sum(g[idx] ** 2, 1)),
                                       rtol=1e-10)  # float64 model: rounding only
            np.testing.assert_allclose(row.sq_norm_big, np.sum(g[idx].mean(0) ** 2), rtol=1e-10)
    orc.check_recovers(col.to_frame(), *orc.exact(m, x, y))


def test_bad_input():
    m = orc.model()
    x, y = orc.dataset()
    with pytest.raises(ValueError, match="method"):
        per_example_sq_norms(m, orc.loss_fn, x, y, method="fast")
    with pytest.raises(ValueError, match="batch size"):
        per_example_sq_norms(m, orc.loss_fn, x, y[:3])
    raw = nn.Module()
    raw.w = nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError, match=r"nn\.Linear"):
        PerExampleNoiseScale(raw)
    with pytest.raises(ValueError, match=r"nn\.Linear"):
        PerExampleNoiseScale(raw, params=[raw.w])
    frozen = orc.model().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        per_example_sq_norms(frozen, orc.loss_fn, x, y)
    col = PerExampleNoiseScale(m)
    with pytest.raises(RuntimeError, match="before any backward"):
        col.step()


def test_collector_refuses_two_passes():
    x, y = orc.dataset()
    m = orc.model()
    col = PerExampleNoiseScale(m)
    for _ in range(2):
        orc.loss_fn(m(x[:8]), y[:8]).backward()
    with pytest.raises(RuntimeError, match="more than once"):
        col.step()


def test_collector_sequence_model_matches_loop():
    """In-step hooks on Embedding + LayerNorm + Linear equal the per-example loop."""
    torch.manual_seed(2)
    model = TinySeq().double()
    tok = torch.randint(0, 11, (6, 3))
    y = torch.randn(6, 1, dtype=torch.float64)
    ref = per_example_sq_norms(model, _mse, tok, y, method="loop").double()
    col = PerExampleNoiseScale(model)
    _mse(model(tok), y).backward()
    col.step()
    g = [p.grad for p in model.parameters()]
    row = col.to_frame().iloc[0]
    # float64 model: float64 products in the hooks, float64 sums: rounding only
    assert row.sq_norm_small == pytest.approx(float(ref.mean()), rel=1e-12)
    assert row.sq_norm_big == pytest.approx(float(sum((t**2).sum() for t in g)), rel=1e-10)


def test_collector_ignores_torch_func_passes():
    """hessian_noise_scale (torch.func transforms) between steps must not count as a
    training pass of an attached PerExampleNoiseScale, nor change what it records."""
    import torch.nn.functional as F

    from empirical_batch.measure import hessian_noise_scale

    def run(interleave: bool) -> dict:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).double()
        x = torch.randn(16, 4, dtype=torch.float64)
        y = torch.randn(16, 1, dtype=torch.float64)
        pe = PerExampleNoiseScale(model)
        for _ in range(3):
            model.zero_grad()
            F.mse_loss(model(x), y).backward()
            if interleave:
                hessian_noise_scale(model, F.mse_loss, x, y)
            pe.step()
        return pe.estimator.history()

    plain, mixed = run(False), run(True)
    for key in plain:
        np.testing.assert_array_equal(plain[key], mixed[key])


def _norms_and_collector(device, method):
    """per_example_sq_norms and one PerExampleNoiseScale step of TinySeq on ``device``."""
    torch.manual_seed(1)
    model = TinySeq().double().to(device)
    tok = torch.randint(0, 11, (6, 3)).to(device)
    y = torch.randn(6, 1, dtype=torch.float64).to(device)
    norms = per_example_sq_norms(model, _mse, tok, y, method=method)
    assert norms.device == tok.device
    col = PerExampleNoiseScale(model)
    _mse(model(tok), y).backward()
    col.step()
    row = col.to_frame().iloc[0]
    return norms.cpu().double(), row.sq_norm_small, row.sq_norm_big


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["auto", "vmap", "loop"])
def test_cuda_matches_cpu(method):
    cpu = _norms_and_collector(torch.device("cpu"), method)
    gpu = _norms_and_collector(torch.device("cuda"), method)
    # a float64 model computes in float64 throughout on both devices: only the
    # summation order differs, ~1e-15 relative
    torch.testing.assert_close(gpu[0], cpu[0], rtol=1e-10, atol=0)
    assert gpu[1] == pytest.approx(cpu[1], rel=1e-10)
    assert gpu[2] == pytest.approx(cpu[2], rel=1e-10)  # float64 .grad norms


class _Fan(nn.Module):
    """Many Linear(4, 1) layers, each scaled by s_j, summed: per-example squared
    norms of layer j are s_j² (|x_i|² + 1)/B² when the loss is linear in the output."""

    def __init__(self, scales):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 1) for _ in scales)
        self.scales = [float(s) for s in scales]

    def forward(self, x):
        out = 0.0
        for s, layer in zip(self.scales, self.layers, strict=True):
            out = out + s * layer(x)
        return out


def _linear_loss(out, y):
    return (out * y).mean()  # δ_i = y_i / B exactly: no forward rounding in the gradients


def test_float64_sum_over_layers():
    """Layer norms spanning 9 orders of magnitude: the sum over layers must not drop the
    small ones (a float32 running sum does: each is below half an ulp of the total)."""
    from torch.func import functional_call, grad, vmap

    rng = np.random.default_rng(0)
    # one dominant layer, 1024 with squared-norm ratios 1e-9..2.5e-8 to it (float32 half
    # an ulp is >= 2**-25 = 3e-8 relative): together ~1.3e-5 of the total
    scales = np.concatenate([[1.0], np.sqrt(rng.uniform(1e-9, 2.5e-8, 1024))])
    torch.manual_seed(0)
    model = _Fan(scales)
    x = torch.randn(8, 4)
    y = torch.tensor([1.0, -1.0] * 4).unsqueeze(1)
    got = per_example_sq_norms(model, _linear_loss, x, y)
    assert got.dtype == torch.float64

    ref_model = _Fan(scales).double()
    ref_model.load_state_dict(model.state_dict())
    params = {n: p.detach().double() for n, p in model.named_parameters()}

    def one(p, xi, yi):
        return _linear_loss(functional_call(ref_model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    g = vmap(grad(one), in_dims=(None, 0, 0))(params, x.double(), y.double())
    ref = sum(v.reshape(8, -1).square().sum(1) for v in g.values())
    # float32 products per layer (~1e-7 relative each), summed in float64: within 1e-6;
    # dropping the small layers would be off by ~1.3e-5
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=0)

    col = PerExampleNoiseScale(model)
    _linear_loss(model(x), y).backward()
    col.step()
    small = col.to_frame().sq_norm_small.iloc[0]
    assert small == pytest.approx(float(ref.mean()), rel=1e-6)
