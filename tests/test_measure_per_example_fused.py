"""PerExampleNoiseScale's linear layers whose backward forms the per-example gradients
once (`LinearWithNorms`): the same norms and the same ``.grad`` as autograd, and the
plain forward wherever that path does not apply."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from empirical_batch.measure import PerExampleNoiseScale, per_example_sq_norms  # noqa: E402
from empirical_batch.measure import per_example as pe_mod  # noqa: E402
from empirical_batch.measure import per_example_collector as col_mod  # noqa: E402


class Net(nn.Module):
    """Linear layers over a sequence, an in-place activation, a frozen bias and a layer
    on the raw input (no input gradient)."""

    def __init__(self, d_in=3, wide=5):
        super().__init__()
        self.a = nn.Linear(d_in, wide)
        self.b = nn.Linear(wide, wide)
        self.c = nn.Linear(wide, 2)
        self.c.bias.requires_grad_(False)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.c(torch.tanh(self.b(self.act(self.a(x))))).sum(1)


def _loss(out, y):
    return ((out - y) ** 2).mean()


@pytest.fixture
def always_fused(monkeypatch):
    """Take the per-example gradients wherever the path applies (not the measured
    choice), so that the tests exercise it."""
    seen = []

    def win(*args):
        seen.append(args)
        return True
    monkeypatch.setattr(col_mod, "per_example_gradients_win", win)
    return seen


def _run(model, x, y, steps=2):
    col = PerExampleNoiseScale(model, sync_every=1)
    grads = []
    for _ in range(steps):
        _loss(model(x), y).backward()
        col.step()
        grads.append([p.grad.clone() if p.grad is not None else None
                      for p in model.parameters()])
        model.zero_grad()
    return col, grads


def test_norms_and_grads_equal_autograd(always_fused):
    torch.manual_seed(0)
    model = Net().double()
    x, y = torch.randn(6, 7, 3, dtype=torch.float64), torch.randn(6, 2, dtype=torch.float64)
    ref = per_example_sq_norms(model, _loss, x, y, method="loop")
    plain = copy.deepcopy(model)
    _loss(plain(x), y).backward()
    col, grads = _run(model, x, y, steps=1)
    assert len(col._fused) == 3 and always_fused  # a, b, c: all took the path
    frame = col.to_frame()
    np.testing.assert_allclose(frame.sq_norm_small[0], float(ref.mean()), rtol=1e-12)
    for p, g in zip(plain.parameters(), grads[0], strict=True):
        if p.grad is None:
            assert g is None
        else:
            torch.testing.assert_close(g, p.grad, rtol=1e-12, atol=1e-15)
    # the frozen bias has no gradient and no per-example term
    assert model.c.bias.grad is None


def test_double_backward_through_the_layer(always_fused):
    """A gradient penalty (create_graph=True) differentiates the layer's backward."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    twin = copy.deepcopy(model)
    x = torch.randn(5, 6, 3, dtype=torch.float64, requires_grad=True)
    PerExampleNoiseScale(model)

    def penalty(m):
        out = m(x).square().mean()
        (gx,) = torch.autograd.grad(out, x, create_graph=True)
        gx.square().sum().backward()
        return [p.grad for p in m.parameters()]

    for got, want in zip(penalty(model), penalty(twin), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-14)


def test_plain_forward_where_the_path_does_not_apply(always_fused):
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 7, 3)
    col = PerExampleNoiseScale(model, sync_every=1)
    with torch.no_grad():  # no gradient: the plain forward
        out = model(x)
    assert out.grad_fn is None
    with torch.autocast("cpu", torch.bfloat16):  # autocast: the plain forward
        out = model.a(x)
    assert type(out.grad_fn) is not col_mod._FUSED_NODE
    out = model.a(x[:, 0])  # one position: the plain forward (|δ|²(|a|²+1))
    assert type(out.grad_fn) is not col_mod._FUSED_NODE
    out = model.a(x)
    assert type(out.grad_fn) is col_mod._FUSED_NODE
    col.remove()
    assert "forward" not in model.a.__dict__
    assert type(model.a(x).grad_fn) is not col_mod._FUSED_NODE


def test_measured_choice_is_cached_per_bucket(monkeypatch):
    calls = []

    def fake(bsz, t, d_in, d_out, bias, dtype, device, reps=3):
        calls.append(t)
        return 1.0, 0.5
    monkeypatch.setattr(pe_mod, "time_linear_forms", fake)
    monkeypatch.setattr(pe_mod, "_FORMS", {})
    win = pe_mod.per_example_gradients_win
    assert win(4, 100, 8, 8, True, torch.float32, "cpu")
    assert win(2, 120, 8, 8, True, torch.float32, "cpu")  # same bucket (128)
    assert win(4, 200, 8, 8, True, torch.float32, "cpu")  # next bucket
    assert calls == [100, 200]
    assert not win(4, 2, 64, 64, True, torch.float32, "cpu")  # Gram clearly cheaper
    assert calls == [100, 200]


def test_a_removed_collector_leaves_the_forward_alone(always_fused):
    """After remove(), the layers' forward is the class's again; a second collector on
    the same model takes the path over."""
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 7, 3)
    PerExampleNoiseScale(model).remove()
    assert all("forward" not in m.__dict__ for m in model.modules())
    col = PerExampleNoiseScale(model, sync_every=1)
    model(x).square().mean().backward()
    assert col.step() is not None


def test_timing_of_the_two_forms_runs():
    gram, per_example = pe_mod.time_linear_forms(2, 8, 4, 4, True, torch.float32, "cpu",
                                                 reps=1)
    assert gram > 0 and np.isfinite(per_example)


def test_no_timing_inside_a_compiled_trace(monkeypatch):
    """Under torch.compile the layers run their own forward (the trace sees no
    LinearWithNorms and no timing); the norms equal the eager ones."""
    torch._dynamo.reset()
    monkeypatch.setattr(pe_mod, "_FORMS", {})
    seen = []
    real = pe_mod.time_linear_forms

    def spy(*args, **kw):
        seen.append(torch.compiler.is_compiling())
        return real(*args, **kw)
    monkeypatch.setattr(pe_mod, "time_linear_forms", spy)
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).double()
    x = torch.randn(4, 9, 3, dtype=torch.float64)

    def run(model, measured):
        col = PerExampleNoiseScale(measured, sync_every=1)
        model(x).square().mean().backward()
        col.step()
        measured.zero_grad()
        col.remove()
        return col.to_frame()

    twin = nn.Sequential(*[m for m in base])
    got = run(torch.compile(twin, backend="aot_eager"), twin)
    assert not any(seen)
    want = run(base, base)
    for col in ("sq_norm_small", "sq_norm_big"):
        np.testing.assert_allclose(got[col], want[col], rtol=1e-12)
