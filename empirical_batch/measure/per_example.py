r"""Per-example squared gradient norms, and a per-example noise-scale collector.

For a batch of $B$ examples with per-example gradients $g_i$, the mean
$\frac1B\sum|g_i|^2$ and $|\frac1B\sum g_i|^2$ are the small (``b=1``)
and big (``b=B``) squared norms of the two-batch estimator (App. A.1); with
``b_small = 1`` the trace estimate is the Bessel-corrected sample variance.

Fast path for ``nn.Linear`` (never materialises the per-example gradients of all
layers at once): with layer input $a_i$ and gradient of the *batch-mean* loss w.r.t.
the layer output $\delta_i$ (so the example's own output gradient is $B\delta_i$),

$$
|\nabla_W \ell_i|^2 = B^2 |\delta_i|^2 |a_i|^2,\qquad
|\nabla_b \ell_i|^2 = B^2 |\delta_i|^2
$$

for 2-D inputs. For sequences (positions $t$) each layer takes the cheaper of two
exact forms, as in Bu et al. (2023, "Differentially Private Optimization on Large
Model at Small Cost", ICML, arXiv:2210.00038), who choose per layer between them:

* the Gram ("ghost norm") form of Li et al. (2022, "Large Language Models Can Be
  Strong Differentially Private Learners", ICLR, arXiv:2110.05679),
  $|\nabla_W\ell_i|^2 + |\nabla_b\ell_i|^2 = B^2\sum_{t,s}(\delta_{it}\cdot
  \delta_{is})(a_{it}\cdot a_{is} + 1)$, cost $O(T^2(d_{in}+d_{out}))$ per example;
* the materialised per-example gradient of that one layer,
  $\nabla_{[W|b]}\ell_i = B\sum_t \delta_{it}[a_{it}, 1]^\top$ (a batched matrix
  product), then its squared norm, cost $O(T d_{in} d_{out})$ per example;

the Gram form when $T(d_{in}+d_{out}) \le d_{in} d_{out}$. Both are computed with a
handful of kernels per layer (the bias folded into the same products).

``nn.Embedding`` (tokens $x_{it}$): $|\nabla_E\ell_i|^2 = B^2\sum_{t,s}
[x_{it}=x_{is}]\,\delta_{it}\cdot\delta_{is}$ (padding tokens excluded), or, when the
vocabulary is at most $8T$, the squared norm of each example's gradient table;
``nn.LayerNorm`` (normalised input $\hat x$): $|\nabla_w\ell_i|^2 =
B^2|\sum_t\delta_{it}\odot\hat x_{it}|^2$, $|\nabla_b\ell_i|^2 =
B^2|\sum_t\delta_{it}|^2$. Any other parameter goes through ``torch.func``.

Precision: each layer's (or, on the ``torch.func`` path, each parameter's)
per-example term above is computed in the dtype of its activations and gradients
(float32 for a float32 model, float64 for a float64 one; fp16/bf16 are upcast to
float32): the products, Gram matrices and the sums over positions and features
inside one layer. The sum of those terms over layers/parameters is float64 (float32
on Apple MPS, which has no float64), so a layer whose term is below float32
resolution of the total still counts; the result is float64.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from ._common import (
    FULL_DTYPES,
    acc_dtype,
    check_batch,
    fixed_state,
    select_params,
    stack_scalars,
    total_sq_norm,
)

__all__ = ["check_no_batchnorm", "per_example_sq_norms"]


def work_tensor(t: torch.Tensor) -> torch.Tensor:
    """Detached, in the dtype of the per-layer products (float32 for fp16/bf16)."""
    return _upcast(t.detach())


def _upcast(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself, or float32 for fp16/bf16 (callers run under ``no_grad``)."""
    return t if t.dtype in FULL_DTYPES else t.float()


HALF_DTYPES = (torch.float16, torch.bfloat16)


def _bmm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``torch.bmm`` in float32 or float64 precision.

    fp16/bf16 operands on CUDA go to the tensor cores with a float32 result
    (``out_dtype``: float32 accumulation, as exact as upcasting the operands first,
    which hold the same values, at a fraction of the cost); elsewhere they are upcast.
    """
    if x.dtype in HALF_DTYPES and x.dtype == y.dtype and x.is_cuda:
        try:
            return torch.bmm(x, y, out_dtype=torch.float32)
        except (TypeError, RuntimeError, NotImplementedError):  # torch without out_dtype
            pass
    return torch.bmm(_upcast(x), _upcast(y))


def _rowsq(x: torch.Tensor) -> torch.Tensor:
    """Σ over all but the first dimension of x², shape ``(B,)``."""
    return x.square().sum(tuple(range(1, x.ndim)))


def _example_sq(x: torch.Tensor) -> torch.Tensor:
    """|x_i|² per example (first dimension) as the square of one fused norm per example:
    no temporary of ``x``'s size (unlike `_rowsq`, whose ``square()`` allocates one; on a
    CPU a fresh buffer of megabytes costs page faults that can exceed the product)."""
    return torch.linalg.vector_norm(x.reshape(x.shape[0], -1), dim=1).square()


# per-example gradient elements the materialised form holds at once (1 GiB in float32)
MATERIALISED_ELEMENTS = 2**28


def uses_gram(t: int, d_in: int, d_out: int) -> bool:
    r"""Whether the Gram form ($T^2(d_{in}+d_{out})$ per example) is cheaper than the
    materialised per-example gradient ($T d_{in} d_{out}$) for a linear layer."""
    return t * (d_in + d_out) <= d_in * d_out


def _linear_sq(a: torch.Tensor, d: torch.Tensor, weight: bool, bias: bool) -> torch.Tensor:
    r"""$|\nabla_W|^2 + |\nabla_b|^2$ per example of an ``nn.Linear``, without the B²
    factor, for the parameters asked for (at least one).

    ``a``, ``d``: ``(B, T, d_in)``, ``(B, T, d_out)`` (or ``(B, d)`` for one position)
    in the products' dtype; returns ``(B,)`` in that dtype.
    """
    if a.ndim == 2:  # one position: |δ|² (|a|² + 1)
        a, d = _upcast(a), _upcast(d)
        dd = _rowsq(d)
        if not weight:
            return dd
        aa = _rowsq(a)
        return dd * (aa + 1 if bias else aa)
    if not weight:
        return _rowsq(_upcast(d).sum(1))
    if uses_gram(a.shape[1], a.shape[-1], d.shape[-1]):
        ga = _bmm(a, a.mT)
        if bias:
            ga.add_(1)
        return (ga * _bmm(d, d.mT)).sum((1, 2))
    if bias:  # [W | b] = Σ_t δ_t [a_t, 1]ᵀ in one product
        a = F.pad(a, (0, 1), value=1.0)
    per_example = a.shape[-1] * d.shape[-1]
    chunk = max(1, MATERIALISED_ELEMENTS // per_example)
    if chunk >= a.shape[0]:
        return _rowsq(_bmm(d.mT, a))
    # a wide layer (an output layer over a large vocabulary): a few examples at a time,
    # so that the per-example gradients held at once stay under MATERIALISED_ELEMENTS
    return torch.cat([_rowsq(_bmm(dc.mT, ac))
                      for ac, dc in zip(a.split(chunk), d.split(chunk), strict=True)])


class LinearWithNorms(torch.autograd.Function):
    r"""``F.linear`` whose backward forms the per-example weight gradients once and
    derives both the parameters' gradients and the per-example squared norms from them.

    In the materialised regime the per-example gradients $G_i = \sum_t\delta_{it}
    [a_{it}, 1]^\top$ cost as much as the weight gradient itself; forming them in the
    layer's backward (one batched product) and summing them over the examples gives the
    weight and bias gradients (autograd's values up to the order of the float sums), so
    the weight gradient is computed once instead of twice (the bias part
    $\sum_t\delta_{it}$ apart, without copying the input to append a column of ones).
    ``sink((B,) tensor)`` receives $|G_i|^2$ per example, without the $B^2$ factor, in
    the products' dtype (the bias part only when the bias is trained). The backward is made of
    differentiable ops (double backward works); the norms are taken on detached tensors.
    """

    @staticmethod
    def forward(ctx, a, weight, bias, sink):
        ctx.save_for_backward(a, weight)
        ctx.sink = sink
        out = F.linear(a, weight, bias)
        # F.linear of a 3-D input returns a view of its 2-D product: autograd forbids an
        # in-place op (an in-place activation) on a view made in a custom Function
        return torch.ops.aten._unsafe_view(out, out.shape) if out._is_view() else out

    @staticmethod
    def backward(ctx, d):
        a, weight = ctx.saved_tensors
        _, w_grad, b_grad, _ = ctx.needs_input_grad
        grad_a = d.matmul(weight) if ctx.needs_input_grad[0] else None
        bsz, d_in, d_out = a.shape[0], a.shape[-1], d.shape[-1]
        a3, d3 = a.reshape(bsz, -1, d_in), d.reshape(bsz, -1, d_out)
        gb = d3.sum(1) if b_grad else None  # (B, d_out): the per-example bias gradients
        grad_w, sq = None, []
        if w_grad:
            chunk = max(1, MATERIALISED_ELEMENTS // (d_in * d_out))
            for ac, dc in zip(a3.split(chunk), d3.split(chunk), strict=True):
                g = torch.bmm(dc.mT, ac)  # (b, d_out, d_in): the per-example gradients
                sq.append(_example_sq(g.detach()))
                part = g.sum(0)
                grad_w = part if grad_w is None else grad_w + part
        per_example = (sq[0] if len(sq) == 1 else torch.cat(sq)) if sq else None
        if gb is not None:
            sq_b = _example_sq(gb.detach())
            per_example = sq_b if per_example is None else per_example + sq_b
        ctx.sink(per_example)
        return grad_a, grad_w, gb.sum(0) if gb is not None else None, None


def time_linear_forms(bsz: int, t: int, d_in: int, d_out: int, bias: bool, dtype,
                      device, reps: int = 3) -> tuple[float, float]:
    """Seconds (best of ``reps``) that the two exact per-example forms of a linear layer
    add to a training step, on random tensors of the layer's shapes: the Gram form
    (`_linear_sq`, beside autograd's weight gradient), and the per-example gradients
    of `LinearWithNorms` (the batched product, its squared norms and its sum over the
    examples) less the weight-gradient product they replace."""
    import time

    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(bsz, t, d_in, generator=g, device=device, dtype=dtype)
    d = torch.randn(bsz, t, d_out, generator=g, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)

    def best(fn):
        fn()  # warm-up
        out = math.inf
        for _ in range(reps):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            out = min(out, time.perf_counter() - t0)
        return out

    def gram():
        ga = _bmm(a, a.mT)
        if bias:
            ga.add_(1)
        return (ga * _bmm(d, d.mT)).sum((1, 2))

    chunk = max(1, MATERIALISED_ELEMENTS // (d_in * d_out))

    def per_example():
        for ac, dc in zip(a.split(chunk), d.split(chunk), strict=True):
            pe = torch.bmm(dc.mT, ac)
            _example_sq(pe)
            pe.sum(0)
        if bias:
            _example_sq(d.sum(1))

    def weight_grad():
        return d.reshape(-1, d_out).mT.mm(a.reshape(-1, d_in))

    with torch.no_grad():
        return best(gram), best(per_example) - best(weight_grad)


# (sequence rounded up to a power of 2, widths, bias, dtype, device) -> the per-example
# gradients of LinearWithNorms cost less than the Gram form (measured)
_FORMS: dict[tuple, bool] = {}


def per_example_gradients_win(bsz: int, t: int, d_in: int, d_out: int, bias: bool, dtype,
                              device) -> bool:
    """Whether `LinearWithNorms` (the per-example gradients, formed once) adds less to a
    step than the Gram form for a linear layer of these shapes.

    Measured with `time_linear_forms` (a few products on random tensors of the layer's
    shapes, on its device) the first time a layer of these widths meets a sequence length
    in a new power-of-2 bucket, then cached for the process (so a training run with
    sequences of varying length measures a handful of times). Where the Gram form needs
    fewer operations by more than a factor of 4 it is taken without measuring.
    """
    if 4 * t * (d_in + d_out) <= d_in * d_out:
        return False
    key = (1 << max(0, t - 1).bit_length(), d_in, d_out, bias, dtype, str(device))
    hit = _FORMS.get(key)
    if hit is None:
        gram, per_example = time_linear_forms(bsz, t, d_in, d_out, bias, dtype, device)
        hit = _FORMS[key] = per_example < gram
    return hit


def embedding_materialised(t: int, vocab: int) -> bool:
    r"""Whether an embedding's per-example gradients (a ``(vocab, d)`` table per
    example) are formed instead of the Gram form ($T^2$ products of output gradients):
    when the table holds at most 8 times the layer's output ($vocab \le 8T$, a position
    embedding or a small vocabulary; then the $T^2 d$ products cost more than writing
    and reading it) and the sequence is not short ($T \ge 16$)."""
    return t >= 16 and vocab <= 8 * t


def _embedding_sq(idx: torch.Tensor, d: torch.Tensor, vocab: int) -> torch.Tensor:
    """|grad_i|² of an embedding from its per-example gradient tables, a few examples at
    a time (at most MATERIALISED_ELEMENTS held): ``d`` (B, T, dim) already masked at
    padding tokens, ``idx`` (B, T)."""
    bsz, dim = d.shape[0], d.shape[-1]
    chunk = max(1, MATERIALISED_ELEMENTS // (vocab * dim))
    out = []
    for i0 in range(0, bsz, chunk):
        ic, dc = idx[i0:i0 + chunk], d[i0:i0 + chunk]
        n = ic.shape[0]
        rows = (ic + torch.arange(n, device=ic.device).unsqueeze(1) * vocab).reshape(-1)
        table = torch.zeros(n * vocab, dim, dtype=dc.dtype, device=dc.device)
        table.index_add_(0, rows, dc.reshape(-1, dim))
        out.append(_example_sq(table.view(n, -1)))
    return out[0] if len(out) == 1 else torch.cat(out)


def layer_kind(m: nn.Module) -> str | None:
    """Which fast path computes this layer's per-example norms, if any.

    ``nn.Linear`` and subclasses that keep its ``forward``; Hugging Face's ``Conv1D``
    (GPT-2: ``x @ W + b`` with ``W`` of shape ``(in, out)``: the same norms as a
    linear layer); ``nn.Embedding`` without ``max_norm``/``scale_grad_by_freq``;
    ``nn.LayerNorm`` with affine parameters over the last dimension.
    """
    t = type(m)
    if isinstance(m, nn.Linear) and t.forward is nn.Linear.forward:
        return "linear"
    if t.__name__ == "Conv1D" and getattr(m, "weight", None) is not None and \
            m.weight.ndim == 2 and hasattr(m, "nf"):
        return "linear"
    if t is nn.Embedding:
        return "embedding" if m.max_norm is None and not m.scale_grad_by_freq else None
    if t is nn.LayerNorm:
        ok = bool(m.elementwise_affine) and len(m.normalized_shape) == 1  # type: ignore[arg-type]
        return "layernorm" if ok else None
    return None


def _is_fast(m: nn.Module) -> bool:
    return layer_kind(m) is not None


def functional_layers(model: nn.Module) -> set[int]:
    """Ids of layers whose weights their parent uses without calling them (the
    ``out_proj`` of ``nn.MultiheadAttention``): their forward hooks never fire."""
    return {id(sub) for m in model.modules() if isinstance(m, nn.MultiheadAttention)
            for sub in m.modules() if sub is not m}


def check_no_batchnorm(model: nn.Module) -> None:
    """Refuse a model with batch normalisation in training mode: it mixes the examples
    of a batch, so per-example gradients (and the estimator's independence) do not
    exist."""
    bad = [n or type(model).__name__ for n, m in model.named_modules()
           if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training]
    if bad:
        raise InputError(
            f"per-example gradients are undefined with batch normalisation in training "
            f"mode (it couples the examples of a batch): {', '.join(bad[:5])}. Use "
            "GradientNoiseScale (micro-batches) or DDPNoiseScaleHook instead, or replace "
            "BatchNorm by GroupNorm/LayerNorm")


def tied_parameters(model: nn.Module) -> dict[int, list[str]]:
    """Parameters registered under more than one name: id → names."""
    names: dict[int, list[str]] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    return {k: v for k, v in names.items() if len(v) > 1}


def _fast_modules(model: nn.Module, chosen_ids: set[int]):
    """Fast-path modules (see `layer_kind`) whose parameters are all chosen and belong to no
    other module (tied weights go to ``torch.func``), and their parameter ids."""
    tied = tied_parameters(model)
    skip = functional_layers(model)
    mods, covered = [], set()
    for m in model.modules():
        if _is_fast(m) and id(m) not in skip:
            ids = {id(p) for p in m.parameters(recurse=False) if p.requires_grad}
            if ids and ids <= chosen_ids and not ids & tied.keys():
                mods.append(m)
                covered |= ids
    return mods, covered


@torch.no_grad()
def module_sq_norms(m: nn.Module, inputs: list, grads: list) -> torch.Tensor:
    """Per-example Σ|grad|² of one module's parameters, without the B² factor.

    ``inputs``/``grads``: the module's input and output gradient for each call in
    this pass (several calls = weight sharing: one longer "sequence"). Returns
    ``(B,)`` in the products' dtype (the activations' dtype, float32 for fp16/bf16).
    """
    bsz = inputs[0].shape[0]

    def seq(ts, keep_2d=False, upcast=True):
        ts = [_upcast(t) for t in ts] if upcast else list(ts)
        if len(ts) == 1 and (ts[0].ndim == 3 or (keep_2d and ts[0].ndim == 2)):
            return ts[0]  # already (B, T, d) (or (B, d)): no reshape, no copy
        ts = [t.reshape(bsz, -1, t.shape[-1]) for t in ts]
        return ts[0] if len(ts) == 1 else torch.cat(ts, 1)  # cat of one would copy

    kind = layer_kind(m)
    if kind == "embedding":
        d = seq(grads)
        # grad_i[v] = Σ_{t: x_t = v} δ_t  =>  |grad_i|² = Σ_{t,s} [x_t = x_s] δ_t·δ_s
        idx = inputs[0].reshape(bsz, -1) if len(inputs) == 1 else \
            torch.cat([x.reshape(bsz, -1) for x in inputs], 1)
        pad = m.padding_idx
        if isinstance(pad, int):
            d = d * torch.ne(idx, pad).unsqueeze(-1)
        vocab = int(m.num_embeddings)  # type: ignore[arg-type]
        if embedding_materialised(idx.shape[1], vocab):
            return _embedding_sq(idx, d, vocab)
        same = idx.unsqueeze(2) == idx.unsqueeze(1)
        return (torch.bmm(d, d.mT) * same).sum((1, 2))
    wgrad = bool(m.weight.requires_grad)
    bgrad = m.bias is not None and bool(m.bias.requires_grad)
    if kind == "linear":
        # fp16/bf16 kept as they are: _linear_sq's products give float32 results
        a, d = seq(inputs, keep_2d=True, upcast=False), seq(grads, keep_2d=True, upcast=False)
        if a.ndim != d.ndim:
            a, d = a.reshape(bsz, -1, a.shape[-1]), d.reshape(bsz, -1, d.shape[-1])
        if a.dtype != d.dtype:
            a, d = (t.to(torch.promote_types(a.dtype, d.dtype)) for t in (a, d))
        return _linear_sq(a, d, wgrad, bgrad)
    # LayerNorm: out = x̂ ⊙ w + b  =>  grad_w = Σ_t δ_t ⊙ x̂_t, grad_b = Σ_t δ_t
    d = seq(grads)
    if not wgrad:
        return _rowsq(d.sum(1))
    xhat = F.layer_norm(seq(inputs), m.normalized_shape, eps=m.eps)  # type: ignore[arg-type]
    if xhat.dtype != d.dtype:
        xhat = xhat.to(torch.promote_types(xhat.dtype, d.dtype))
        d = d.to(xhat.dtype)
    sw = xhat.mul_(d).sum(1)  # in place: x̂ is a fresh buffer
    # both sums in one reduction: (B, 2, d) -> (B,)
    return _rowsq(torch.stack([sw, d.sum(1)], 1)) if bgrad else _rowsq(sw)


def per_example_sq_norms(model, loss_fn, inputs, targets, *, params=None,
                         method: str = "auto") -> torch.Tensor:
    r"""Squared norms $|g_i|^2$ of each example's gradient, shape ``(B,)``.

    ``loss_fn(outputs, targets)`` is the batch-mean loss the training loop uses; the
    gradient of example ``i`` is that of ``loss_fn`` on the batch of that example
    alone. The model must treat examples independently (no batch norm in training
    mode). ``.grad`` is left untouched.

    Returns a float64 tensor (float32 on MPS) on the device of the activations: the
    per-layer terms are computed in the model's dtype (float32 for fp16/bf16) and
    summed over layers in float64 (see the module notes on precision).

    Parameters
    ----------
    method : {"auto", "vmap", "loop"}
        ``"auto"``: the fast paths (one ordinary forward/backward) for the
        parameters of ``nn.Linear``, ``nn.Embedding`` and ``nn.LayerNorm`` layers
        and ``torch.func.vmap(grad)`` for any other chosen parameters.
        ``"vmap"``: ``torch.func`` for all. ``"loop"``: one backward per example
        (the reference).
    params : iterable of parameters or names, optional
        Restrict to these parameters (default: all trainable).

    Examples
    --------
    >>> import torch
    >>> model = torch.nn.Linear(3, 1)
    >>> x, y = torch.randn(5, 3), torch.randn(5, 1)
    >>> mse = torch.nn.functional.mse_loss
    >>> fast = per_example_sq_norms(model, mse, x, y)
    >>> slow = per_example_sq_norms(model, mse, x, y, method="loop")
    >>> bool(torch.allclose(fast, slow, rtol=1e-4))
    True
    """
    chosen = select_params(model, params)
    bsz = check_batch(inputs, targets)
    check_no_batchnorm(model)
    if method not in ("auto", "vmap", "loop"):
        raise InputError(f"method must be 'auto', 'vmap' or 'loop', got {method!r}")
    if method == "loop":
        out = []
        ps = [p for _, p in chosen]
        for i in range(bsz):
            loss = loss_fn(model(inputs[i : i + 1]), targets[i : i + 1])
            grads = torch.autograd.grad(loss, ps, allow_unused=True)
            gs = [g.detach() for g in grads if g is not None]
            out.append(total_sq_norm(gs) if gs else
                       torch.zeros((), dtype=acc_dtype(inputs.device), device=inputs.device))
        return torch.stack(out)
    # (B,) per layer / parameter in the products' dtype, summed here in float64
    total = torch.zeros(bsz, dtype=acc_dtype(inputs.device), device=inputs.device)
    rest = chosen
    if method == "auto":
        mods, covered = _fast_modules(model, {id(p) for _, p in chosen})
        rest = [(n, p) for n, p in chosen if id(p) not in covered]
        if mods:
            parts, broadcast = _fast_path(model, mods, loss_fn, inputs, targets)
            total = total + _sum_layers(parts, total) * (bsz * bsz)
            gone = {id(p) for m in broadcast for p in m.parameters(recurse=False)}
            rest += [(n, p) for n, p in chosen if id(p) in gone]
    if rest:
        total = total + _sum_layers(_vmap_sq(model, loss_fn, inputs, targets, rest), total)
    return total.detach()


def _sum_layers(parts: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Σ of per-layer ``(B,)`` terms in ``like``'s dtype (float64) and on its device."""
    if not parts:  # every chosen layer was skipped by the forward pass
        return torch.zeros_like(like)
    return stack_scalars(parts, like.device).to(device=like.device, dtype=like.dtype).sum(0)


def _fast_path(model, mods, loss_fn, inputs, targets):
    """Per-module ``(B,)`` sums for the fast-path modules, without the B² factor, and the
    modules called with a batch of one and broadcast over the examples (GPT-2's position
    embedding), whose per-example norms these hooks cannot see."""
    acts: dict[nn.Module, list] = {m: [] for m in mods}

    def fwd(m, inp, out):
        acts[m].append((inp[0], out))

    handles = [m.register_forward_hook(fwd) for m in mods]
    try:
        loss = loss_fn(model(inputs), targets)
    finally:
        for h in handles:
            h.remove()
    outs = [o for m in mods for _, o in acts[m]]
    grads = iter(torch.autograd.grad(loss, outs, allow_unused=True))
    parts, broadcast = [], []
    bsz = inputs.shape[0]
    for m in mods:
        ins, ds = [], []
        for a, o in acts[m]:
            d = next(grads)
            ins.append(a)
            ds.append(d if d is not None else torch.zeros_like(o))
        if any(a.shape[0] != bsz for a in ins):
            broadcast.append(m)
        elif ins:
            parts.append(module_sq_norms(m, ins, ds))
    return parts, broadcast


def _vmap_sq(model, loss_fn, inputs, targets, chosen) -> list[torch.Tensor]:
    """Per-parameter ``(B,)`` squared norms of the per-example gradients (torch.func)."""
    from torch.func import functional_call, grad, vmap

    diff = {n: p.detach() for n, p in chosen}
    fixed = fixed_state(model, diff)

    def one(pdict, x, y):
        out = functional_call(model, {**fixed, **pdict}, (x.unsqueeze(0),))
        return loss_fn(out, y.unsqueeze(0))

    g = vmap(grad(one), in_dims=(None, 0, 0))(diff, inputs, targets)
    return [_rowsq(work_tensor(v)) for v in g.values()]


try:
    from torch._C._functorch import maybe_current_level as _functorch_level
except ImportError:  # pragma: no cover - older/newer torch without this helper
    _functorch_level = None  # type: ignore[assignment]


def inside_torch_func() -> bool:
    """True inside a ``torch.func`` transform (vmap, grad, jvp): not a training pass.

    ``hessian_noise_scale`` and ``per_example_sq_norms`` call the model through
    ``functional_call`` under such transforms, which also fires forward hooks; those
    passes must not count as a training step's forward.
    """
    return _functorch_level is not None and _functorch_level() is not None
