"""Fused collectors: ops per step that do not grow with the number of parameter tensors,
the same values under ``torch.compile``, and both per-example forms of a linear layer
(Gram and materialised) exact against a float64 per-example reference."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, note  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import nn  # noqa: E402

from empirical_batch.measure import (  # noqa: E402
    GradientNoiseScale,
    PerExampleNoiseScale,
    per_example_sq_norms,
)
from empirical_batch.measure.per_example import uses_gram  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import op_counts  # noqa: E402

pytestmark = [
    pytest.mark.usefixtures("one_torch_thread"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script:DeprecationWarning"),
]


# ------------------------------------------------------------------ op counts
def test_micro_batch_ops_do_not_grow_with_the_number_of_tensors():
    """k = 4 micro-batches: the same ATen ops per step for 4 and for 200 tensors (one
    fused norm per backward pass, not one norm per tensor)."""
    small, large = op_counts.added_ops("micro-batch", 4), op_counts.added_ops("micro-batch", 200)
    assert small == large
    assert small <= 40  # a handful per backward pass


@pytest.mark.parametrize(("seq", "d"), [(4, 16), (16, 8), (1, 16)],
                         ids=["gram", "materialised", "one-position"])
def test_per_example_ops_at_most_8_per_tensor(seq, d):
    if seq > 1:  # the shapes pick the form they are named after
        assert uses_gram(seq, d, d) == (seq * 2 * d <= d * d)
    for n in (4, 200):
        ops = op_counts.added_ops("per-example", n, seq=seq, d=d)
        assert ops <= 8 * n, (n, ops)
    # and the cost per tensor does not creep up with depth
    assert op_counts.added_ops("per-example", 200, seq=seq, d=d) <= \
        50 * op_counts.added_ops("per-example", 4, seq=seq, d=d)


def test_layernorm_ops_at_most_4_per_tensor():
    ops = op_counts.added_ops("layernorm", 200)
    assert ops <= 4 * 200, ops


def test_micro_batch_python_is_one_hook_call_per_tensor_and_pass():
    """The per-step Python of the micro-batch collector: each parameter's hook (a few
    bytecodes) once per backward pass, everything else the same for 4 and 200 tensors."""
    small = op_counts.added_python_calls("micro-batch", 4)
    large = op_counts.added_python_calls("micro-batch", 200)
    assert large - small == (200 - 4) * op_counts.K, (small, large)


def test_layernorm_only_reads_only_the_layernorm_gradients():
    """params="layernorm" hooks and norms the LayerNorm parameters only: a model with
    many other tensors adds nothing per step for them."""
    torch.manual_seed(0)

    def model(n_linear):
        layers = [nn.Linear(6, 6) for _ in range(n_linear)]
        return nn.Sequential(*layers, nn.LayerNorm(6), nn.Linear(6, 1))

    x = torch.randn(4, 3, 6)
    calls = []
    for n in (2, 60):
        m = model(n)
        pe = PerExampleNoiseScale(m, params="layernorm", sync_every=1)
        m(x).square().mean().backward()
        ids, sq = pe._big
        assert sorted(ids) == sorted(id(p) for p in m[n].parameters()) and sq.numel() == 2
        pe.step()
        m.zero_grad(set_to_none=True)
        assert np.isnan(pe.grad_coverage)  # an explicit selection reads nothing else

        def step(m=m, pe=pe):
            m(x).square().mean().backward()
            pe.step()
            m.zero_grad(set_to_none=True)
        calls.append(op_counts.python_calls(step))
        m2 = model(n)

        def plain(m2=m2):
            m2(x).square().mean().backward()
            m2.zero_grad(set_to_none=True)
        plain()
        calls[-1] -= op_counts.python_calls(plain)
    assert calls[0] == calls[1], calls


def test_micro_batch_checkpointed_model_gives_the_same_norms():
    """Reentrant and non-reentrant activation checkpointing (a nested backward pass per
    checkpointed segment) give the norms of the plain model."""
    from torch.utils.checkpoint import checkpoint

    class Net(nn.Module):
        def __init__(self, mode):
            super().__init__()
            self.a, self.b, self.c = nn.Linear(5, 6), nn.Linear(6, 6), nn.Linear(6, 1)
            self.mode = mode

        def forward(self, x):
            h = self.a(x)
            if self.mode is None:
                h = torch.tanh(self.b(torch.tanh(h)))
            else:
                h = checkpoint(lambda t: torch.tanh(self.b(torch.tanh(t))), h,
                               use_reentrant=self.mode)
            return self.c(h)

    frames = []
    for mode in (None, True, False):
        torch.manual_seed(0)
        m = Net(mode).double()
        gns = GradientNoiseScale(m, micro_batch_size=4, accumulation_steps=3)
        g = torch.Generator().manual_seed(1)
        for _ in range(3):
            for _ in range(3):
                (m(torch.randn(4, 5, generator=g).double()).square().mean() / 3).backward()
            gns.step()
            m.zero_grad()
        frames.append(gns.to_frame())
    for f in frames[1:]:
        for col in ("sq_norm_small", "sq_norm_big"):
            np.testing.assert_allclose(f[col], frames[0][col], rtol=1e-12)


# ---------------------------------------------------------------- torch.compile
def _micro_run(model, steps=3, k=4, b=8):
    x, y = orc.dataset()
    gns = GradientNoiseScale(model, micro_batch_size=b, accumulation_steps=k)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        for _ in range(k):
            idx = rng.integers(0, orc.N, b)
            (orc.loss_fn(model(x[idx]), y[idx]) / k).backward()
        gns.step()
        model.zero_grad()
    return gns.to_frame()


@pytest.mark.parametrize("backend", ["aot_eager",
                                     pytest.param("inductor", marks=pytest.mark.slow)])
def test_compiled_step_gives_identical_values(backend):
    torch._dynamo.reset()
    eager = _micro_run(orc.model())
    model = orc.model()
    compiled = _micro_run(torch.compile(model, backend=backend))
    for col in ("sq_norm_small", "sq_norm_big"):
        if backend == "aot_eager":  # the same ATen ops: bit for bit
            np.testing.assert_array_equal(compiled[col], eager[col])
        else:  # generated kernels may sum in another order: float64 rounding only
            np.testing.assert_allclose(compiled[col], eager[col], rtol=1e-12)


def test_compiled_model_per_example_matches_eager():
    torch._dynamo.reset()
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.LayerNorm(7), nn.Linear(7, 2)).double()
    x = torch.randn(6, 3, 5, dtype=torch.float64)

    def run(model, measured):
        pe = PerExampleNoiseScale(measured, sync_every=1)
        for _ in range(2):
            model(x).square().mean().backward()
            pe.step()
            measured.zero_grad()
        return pe.to_frame()

    eager = run(base, base)
    twin = nn.Sequential(*[m for m in base])  # same parameters, fresh hooks
    got = run(torch.compile(twin, backend="aot_eager"), twin)
    for col in ("sq_norm_small", "sq_norm_big"):
        np.testing.assert_allclose(got[col], eager[col], rtol=1e-12)


# ------------------------------------------------ both forms against float64 reference
class Lin(nn.Module):
    def __init__(self, d_in, d_out, bias):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out, bias=bias)

    def forward(self, x):
        return torch.tanh(self.lin(x)).sum(1)


def _per_example_reference(model, x) -> torch.Tensor:
    """|g_i|² from one backward per example, float64 (loss of example i alone)."""
    out = []
    for i in range(x.shape[0]):
        grads = torch.autograd.grad(model(x[i:i + 1]).square().mean(), model.parameters())
        out.append(sum(g.double().square().sum() for g in grads))
    return torch.stack(out)


@given(b=st.integers(2, 5), t=st.integers(1, 12), d_in=st.integers(1, 9),
       d_out=st.integers(1, 9), bias=st.booleans(), seed=st.integers(0, 2**16))
def test_linear_forms_match_the_float64_reference(b, t, d_in, d_out, bias, seed):
    note(f"Gram form: {uses_gram(t, d_in, d_out)}")
    torch.manual_seed(seed)
    model = Lin(d_in, d_out, bias).double()
    x = torch.randn(b, t, d_in, dtype=torch.float64)
    ref = _per_example_reference(model, x)
    got = per_example_sq_norms(model, lambda out, _: out.square().mean(), x, None)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-14)
    pe = PerExampleNoiseScale(model)
    model(x).square().mean().backward()
    pe.step()
    # the collector's small-batch norm is the mean of the per-example squared norms
    np.testing.assert_allclose(pe.to_frame().sq_norm_small[0], float(ref.mean()), rtol=1e-10)


def test_both_forms_are_exercised():
    assert uses_gram(4, 16, 16) and not uses_gram(16, 8, 8)


@given(b=st.integers(2, 5), t=st.integers(1, 8), d=st.integers(2, 9),
       bias=st.booleans(), seed=st.integers(0, 2**16))
def test_layernorm_matches_the_float64_reference(b, t, d, bias, seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.LayerNorm(d, bias=bias), nn.Tanh()).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    x = torch.randn(b, t, d, dtype=torch.float64)
    ref = _per_example_reference(model, x)
    got = per_example_sq_norms(model, lambda out, _: out.square().mean(), x, None)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-14)


def test_materialised_form_in_chunks_is_exact(monkeypatch):
    """A layer too wide to hold every example's gradient at once goes a few examples at
    a time, with the same values."""
    from empirical_batch.measure import per_example as pe

    torch.manual_seed(3)
    model = Lin(5, 7, True).double()
    x = torch.randn(5, 9, 5, dtype=torch.float64)  # 9 * 12 > 35: materialised
    assert not uses_gram(9, 5, 7)
    whole = per_example_sq_norms(model, lambda out, _: out.square().mean(), x, None)
    monkeypatch.setattr(pe, "MATERIALISED_ELEMENTS", 2 * 6 * 7)  # two examples at a time
    parts = per_example_sq_norms(model, lambda out, _: out.square().mean(), x, None)
    torch.testing.assert_close(parts, whole, rtol=1e-13, atol=0)
    torch.testing.assert_close(parts, _per_example_reference(model, x), rtol=1e-10, atol=0)


# ---------------------------------------------------------------------- CUDA
@pytest.mark.gpu
@pytest.mark.parametrize("collector", ["micro-batch", "per-example"])
def test_cuda_step_issues_no_host_sync_and_matches_cpu(collector):
    """With ``sync_every > 1`` the backward passes and ``step()`` never wait for the
    device (``torch.cuda.set_sync_debug_mode("error")`` raises on any sync), and the
    values equal the CPU ones."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 3))
    x = torch.randn(3, 8, 5, 6)

    def run(device, steps=3):
        model = copy.deepcopy(base).to(device).double()
        xs = x.to(device, torch.float64)
        if collector == "micro-batch":
            c = GradientNoiseScale(model, micro_batch_size=8, accumulation_steps=3,
                                   sync_every=100)
        else:
            c = PerExampleNoiseScale(model, sync_every=100)
        for s in range(steps):
            if device == "cuda" and s:  # the first step builds cached index tensors
                torch.cuda.set_sync_debug_mode("error")
            try:
                if collector == "micro-batch":
                    for j in range(3):
                        (model(xs[j]).square().mean() / 3).backward()
                else:
                    model(xs[0]).square().mean().backward()
                c.step()
            finally:
                if device == "cuda":
                    torch.cuda.set_sync_debug_mode(0)
            model.zero_grad()
        return c.to_frame()

    cpu, cuda = run("cpu"), run("cuda")
    for col in ("sq_norm_small", "sq_norm_big"):
        np.testing.assert_allclose(cuda[col], cpu[col], rtol=1e-10)


@pytest.mark.gpu
@pytest.mark.parametrize(("t", "d_in", "d_out"), [(4, 32, 48), (64, 8, 8), (1, 16, 24)])
def test_cuda_half_products_equal_the_upcast_ones(t, d_in, d_out):
    """bf16 layer inputs and gradients on CUDA: the per-example products run on the
    tensor cores with float32 results and give what float32 copies give."""
    from empirical_batch.measure.per_example import _linear_sq

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(6, t, d_in, device="cuda", generator=g).bfloat16()
    d = torch.randn(6, t, d_out, device="cuda", generator=g).bfloat16()
    if t == 1:
        a, d = a[:, 0], d[:, 0]
    got = _linear_sq(a, d, True, True)
    want = _linear_sq(a.float(), d.float(), True, True)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)


def test_a_failed_backward_does_not_stop_later_passes_from_being_measured():
    """A backward pass that raises half-way never reaches its end-of-pass callback; the
    next passes must still be measured (each pass queues its own callback)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    gns = GradientNoiseScale(model, micro_batch_size=4, accumulation_steps=2)

    def fail(_):
        raise RuntimeError("boom")

    h = model[0](x[0])
    h.register_hook(fail)  # raises after the last layer's parameter hooks have fired
    with pytest.raises(RuntimeError, match="boom"):
        model[2](torch.tanh(h)).sum().backward()
    model.zero_grad()
    assert gns.step() is None and gns.skipped["single_backward"] == 1

    def two_passes(tracker):
        for j in range(2):
            (model(x[j]).square().mean() / 2).backward()
        out = tracker.step()
        model.zero_grad()
        return out

    got = two_passes(gns)
    gns.remove()
    fresh = GradientNoiseScale(model, micro_batch_size=4, accumulation_steps=2)
    assert got is not None and got == two_passes(fresh)
