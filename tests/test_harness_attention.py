"""The transformer tasks' attention (`scaled_dot_product_attention`, causal) is the
explicit softmax(q kᵀ/√d + M) v to float64 round-off, under the transforms the harness
applies (vmap over members, per-example gradients, Hessian-vector products)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from torch.func import grad, vmap  # noqa: E402

from empirical_batch.harness.tasks.sequence import CausalBlock, causal_attention  # noqa: E402
from empirical_batch.validation.experiments.scales import hessian_scales  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def explicit(q, k, v):
    t = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v


def qkv(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g, dtype=torch.float64) for _ in range(3)]


def test_attention_is_the_explicit_form():
    q, k, v = qkv(3, 2, 9, 4)
    torch.testing.assert_close(causal_attention(q, k, v), explicit(q, k, v),
                               rtol=1e-13, atol=1e-13)
    members = qkv(5, 3, 2, 9, 4, seed=1)
    torch.testing.assert_close(vmap(causal_attention)(*members), vmap(explicit)(*members),
                               rtol=1e-13, atol=1e-13)


def test_attention_gradients_and_hessian_vector_products_are_the_explicit_ones():
    q, _, v = qkv(2, 2, 7, 4, seed=2)
    direction = qkv(4, 2, 2, 7, 4, seed=3)[0]

    def loss(x, f):
        return f(x, 2 * x.sin(), x * v).pow(2).sum()

    def hvp(d, f):
        return grad(lambda t: (grad(lambda x: loss(x, f))(t) * d).sum())(q)

    per_example = [vmap(grad(lambda x, f=f: loss(x, f)))(q) for f in (causal_attention,
                                                                       explicit)]
    torch.testing.assert_close(*per_example, rtol=1e-12, atol=1e-12)
    hvps = [vmap(lambda d, f=f: hvp(d, f))(direction) for f in (causal_attention, explicit)]
    torch.testing.assert_close(*hvps, rtol=1e-12, atol=1e-12)


def test_block_and_hessian_scales_run_with_it():
    torch.manual_seed(0)
    block = CausalBlock(8, 2).double()
    x = torch.randn(6, 5, 8, dtype=torch.float64)
    out = block(x)
    assert out.shape == x.shape and torch.isfinite(out).all()
    model = torch.nn.Sequential(block, torch.nn.Flatten(), torch.nn.Linear(40, 1)).double()
    hs = hessian_scales(model, lambda o, y: (o.squeeze(-1) - y).pow(2).mean(), x,
                        torch.randn(6, dtype=torch.float64))
    assert math.isfinite(hs["ghg"]) and math.isfinite(hs["b_noise"])
