r"""`PerExampleNoiseScale`: the per-example noise scale collected during the training step.

Hooks on the fast-path layers (`empirical_batch.measure.per_example`: ``nn.Linear``,
Hugging Face's ``Conv1D``, ``nn.Embedding``, ``nn.LayerNorm``) record each layer's input
and output gradient during the ordinary forward/backward and add the per-example
squared norms (no second pass; per layer the cheaper of the Gram form and that layer's
per-example gradient, a few kernels per layer; an ``nn.Linear`` whose per-example
gradients cost less than the Gram form, measured once per shape, forms them once in
its own backward and takes ``.grad`` as their sum: `LinearWithNorms`, so its weight
gradient is not computed twice); a post-accumulate-grad hook on every measured parameter
(with ``params=None`` also on the others, for `grad_coverage`) notes which received a
gradient, and at the end of the backward pass (a
callback queued on autograd's engine) one ``torch._foreach_norm`` takes the batch
gradient's squared norms (so clipping or unscaling before `PerExampleNoiseScale.step`
changes nothing, and the number of kernels does not grow with the number of tensors), and

$$
|G_{small}|^2 = \frac1B\sum_i |g_i|^2 \ (b_{small} = 1),\qquad
|G_{big}|^2 = |\bar g|^2 \ (b_{big} = B)
$$

feed the estimator (McCandlish et al. 2018, App. A.1).

**Coverage.** Parameters outside those layers (a raw positional-embedding tensor, the
packed input projection of ``nn.MultiheadAttention``, convolutions) cannot be seen by
these hooks. `Coverage` says what is measured (fraction of the trainable parameters,
and at every step the fraction of the batch gradient's squared norm); the collector
warns below ``min_coverage``. For an exact value over every parameter, call
`per_example_sq_norms`, which falls back to ``torch.func`` for the rest.

**Tied weights** (a language model's token embedding shared with its output layer,
e.g. GPT-2): the example's gradient of the shared matrix is the sum of both uses,
$E_i + H_i$, so its squared norm needs the cross term
$2\langle E_i, H_i\rangle = 2\sum_{t,s}\delta^{head}_{is}[x_{it}]\,
(a_{is}\cdot\delta^{emb}_{it})$ (tokens $x_{it}$, head inputs $a_{is}$, output
gradients $\delta$), computed from quantities the hooks already hold.

**LayerNorm-only proxy and per-module scales** (Gray et al. 2024, "Normalization Layer
Per-Example Gradients are Sufficient to Predict Gradient Noise Scale in
Transformers", arXiv 2411.00999): ``params="layernorm"`` measures the noise scale of
the LayerNorm parameters' gradient only (a small fraction of the cost), and
``per_module=True`` keeps one estimator per layer (`module_noise_scales`).
"""

from __future__ import annotations

import math
import types
import weakref

import pandas as pd
import torch
from torch import nn

from .._validate import as_scalar
from ..errors import InputError, UsageError, warn
from ..estimators import GNSEstimator
from ._common import (
    FULL_DTYPES,
    EstimatorMixin,
    graph_task_id,
    resolve_scale,
    select_params,
    sq_norm_vector,
    stack_scalars,
)
from .coverage import Coverage, CoverageWarning, select_measured
from .per_example import (
    LinearWithNorms,
    check_no_batchnorm,
    functional_layers,
    inside_torch_func,
    layer_kind,
    module_sq_norms,
    per_example_gradients_win,
    tied_parameters,
    work_tensor,
)

__all__ = ["Coverage", "CoverageWarning", "PerExampleNoiseScale"]

# linear layers under a collector -> its _fused_sink (weak: a copy of the model, made
# with copy.deepcopy, is not in it and runs the plain forward)
_FUSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FUSED_NODE = LinearWithNorms._backward_cls


def _compiling() -> bool:
    is_compiling = getattr(torch.compiler, "is_compiling", None)
    return bool(is_compiling and is_compiling())


def _fused_forward(self, input):
    """The forward of an ``nn.Linear`` under a `PerExampleNoiseScale`: `LinearWithNorms`
    where the collector chooses it, else ``nn.Linear.forward``."""
    decide = _FUSED.get(self)
    sink = decide(self, input) if decide is not None else None
    if sink is None:
        return nn.Linear.forward(self, input)
    return LinearWithNorms.apply(input, self.weight, self.bias, sink)


_fused_forward.__name__ = "forward"  # a pickled model reads back with the plain forward

_task_id = getattr(torch._C, "_current_graph_task_id", None) or graph_task_id
_queue_callback = torch.autograd.Variable._execution_engine.queue_callback


class PerExampleNoiseScale(EstimatorMixin):
    r"""Per-example noise scale collected during the training step itself.

    See the module notes for the estimator, coverage, tied weights and the
    LayerNorm-only proxy.

    Parameters
    ----------
    model : nn.Module
        The model being trained. Batch normalisation in training mode is refused (it
        couples the examples; use `GradientNoiseScale`), when the collector is built and
        at every `step` (a model built in eval mode and trained later).
    beta : float
        EMA decay of `GNSEstimator`.
    params : None, "layernorm", or iterable of parameters or names
        ``None`` (default): every parameter the fast paths can see, with a
        `CoverageWarning` when that is less than ``min_coverage`` of the model.
        ``"layernorm"``: the LayerNorm parameters only (Gray et al.'s proxy). Explicit
        parameters must all be in fast-path layers (whole layers).
    scaler : torch.amp.GradScaler, optional
        Mixed precision: both squared norms are divided by ``scale²``.
    max_history : int, optional
        Keep the per-step rows of the last ``max_history`` steps only (default: all).
    min_coverage : float
        Warn when the measured fraction of the parameters is below this (default 0.9;
        only with ``params=None``).
    per_module : bool
        Also keep one estimator per layer (a tied pair counts as one, under the
        embedding's name): `module_noise_scales`.
    sync_every : int
        Steps between device-to-host transfers (default 1: every step, and `step`
        returns that step's values). With ``N > 1`` the step's sums stay on the device
        and are folded in at the next read of an estimate or every ``N`` steps (one
        transfer for all of them); `step` then returns ``None``.

    Notes
    -----
    One forward and one backward per step, each layer called once (both checked; use
    `GradientNoiseScale` for accumulation). ``loss`` must be the mean over the ``B``
    examples. Call `step` once per optimizer step after the backward pass; where
    exactly does not matter (before or after clipping, unscaling or ``zero_grad``).
    Passes inside ``torch.func`` transforms (e.g. `hessian_noise_scale`) are ignored.
    Call `remove` to detach the hooks.
    """

    def __init__(self, model: nn.Module, *, beta: float = 0.99, params=None, scaler=None,
                 max_history: int | None = None, min_coverage: float = 0.9,
                 per_module: bool = False, sync_every: int = 1):
        if not isinstance(model, nn.Module):
            raise InputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        min_coverage = as_scalar(min_coverage)
        if not (isinstance(min_coverage, int | float) and not isinstance(min_coverage, bool)
                and 0.0 <= min_coverage <= 1.0):
            raise InputError(f"min_coverage must be a fraction in [0, 1], got {min_coverage!r}")
        check_no_batchnorm(model)
        # kept to check at every step: a model built in eval mode (as from_pretrained
        # returns it) is switched to training mode by the training loop later
        self._batchnorms = [(n or type(model).__name__, m) for n, m in model.named_modules()
                            if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        every = select_params(model, None)
        chosen = every if params is None else select_measured(model, params)
        ids = {id(p) for _, p in chosen}
        tied = tied_parameters(model)
        functional = functional_layers(model)
        mods: list[tuple[str, nn.Module]] = []
        covered: set[int] = set()
        for name, m in model.named_modules():
            pids = {id(p) for p in m.parameters(recurse=False) if p.requires_grad}
            if layer_kind(m) and id(m) not in functional and pids and pids <= ids:
                mods.append((name or type(m).__name__, m))
                covered |= pids
        self._pairs = self._tie_pairs(mods, covered & tied.keys(), tied)
        names = {id(p): n for n, p in every}
        if params is not None and covered != ids:
            missing = [n for n, p in chosen if id(p) not in covered]
            raise InputError(
                "PerExampleNoiseScale measures only parameters of nn.Linear, Conv1D, "
                "nn.Embedding and nn.LayerNorm layers that are called as modules (whole "
                f"layers); not measurable: {', '.join(missing[:5])}")
        if not covered:
            raise InputError("model has no trainable nn.Linear, Conv1D, nn.Embedding or "
                             "nn.LayerNorm parameters for PerExampleNoiseScale")
        numel = {id(p): p.numel() for _, p in every}
        total = sum(numel.values())
        self.coverage = Coverage(
            parameters=sum(numel[i] for i in covered) / total, n_parameters=total,
            covered=tuple(names[i] for i in names if i in covered),
            uncovered=tuple(names[i] for i in names if i not in covered),
            tied=tuple(names[i] for i in names if i in covered and i in tied))
        if params is None and self.coverage.parameters < min_coverage:
            warn(f"PerExampleNoiseScale measures {self.coverage}; the result is the "
                          "noise scale of that part of the gradient", CoverageWarning)
        self.params = [(n, p) for n, p in every if id(p) in covered]
        self.scaler = scaler
        self._estimator = GNSEstimator(beta, max_history=max_history)
        self._init_sync(sync_every)
        self.skipped = {"non_finite": 0}
        self.per_module = bool(per_module)
        # group of each measured parameter: its layer's name (a tied pair: the embedding)
        self._group: dict[int, str] = {}
        for name, m in mods:
            for p in m.parameters(recurse=False):
                if id(p) in covered:
                    self._group.setdefault(id(p), name)
        for emb, lin in self._pairs.values():  # a tied pair is one group
            for p in lin[1].parameters(recurse=False):
                if id(p) in covered:
                    self._group[id(p)] = emb[0]
        self.module_estimators = {g: GNSEstimator(beta, max_history=max_history)
                                  for g in dict.fromkeys(self._group.values())} \
            if self.per_module else {}
        self._module_group = {id(m): self._group[next(
            id(p) for p in m.parameters(recurse=False) if id(p) in covered)]
            for _, m in mods}
        self._parts: list[tuple[str, torch.Tensor]] = []  # (group, (B,) per call)
        self._fwd_calls: dict[int, int] = {}
        # parameters whose .grad was accumulated this step, and |.grad|² of each at the end
        # of the backward pass (one fused norm): (ids in the vector's order, vector)
        # (post-accumulate-grad hooks: a list's append on the measured parameters, no
        # Python frame; with params=None a Python hook on the others, for grad_coverage;
        # an explicit selection, the LayerNorm-only proxy included, reads only its own)
        self._received: list[nn.Parameter] = []
        self._queued_task: int | None = None
        self._explicit = params is not None
        hooked = [p for _, p in every if id(p) in covered or not self._explicit]
        self._uniform = len({(p.device, p.dtype) for p in hooked}) == 1
        self._used_cache: dict[tuple, set[str]] = {}
        self._big: tuple[list[int], torch.Tensor] | None = None
        self._index_cache: dict[tuple, tuple] = {}
        self._covered = covered
        self._tie_idx: dict[int, torch.Tensor] = {}
        self._tie_m: dict[int, torch.Tensor] = {}
        self._tie_missing = False
        self._broadcast: set[str] = set()  # groups left out: called with a batch of one
        self._grad_share = [0.0, 0]  # Σ covered/total squared norm, steps
        # linear layers whose backward may form the per-example gradients once and derive
        # .grad from them (LinearWithNorms), where that is measured to cost less
        self._fused: dict[int, nn.Module] = {}
        self._sinks: dict[int, object] = {}
        self._decided: dict[tuple, object] = {}  # (layer, input shape, dtype) -> sink
        for _, m in mods:
            if layer_kind(m) == "linear" and isinstance(m, nn.Linear) and \
                    "forward" not in m.__dict__ and id(m.weight) not in self._pairs and \
                    m.weight.requires_grad and m not in _FUSED:
                group = self._module_group[id(m)]
                self._sinks[id(m)] = lambda sq, group=group: self._fused_part(group, sq)
                _FUSED[m] = self._fused_sink
                m.forward = types.MethodType(_fused_forward, m)  # type: ignore[method-assign]
                self._fused[id(m)] = m
        self._handles = [m.register_forward_hook(self._fwd) for _, m in mods]
        self._handles += [p.register_post_accumulate_grad_hook(
            self._received.append if id(p) in covered else self._post) for p in hooked]

    @staticmethod
    def _tie_pairs(mods, shared: set[int], tied) -> dict[int, tuple]:
        """Shared parameters measured by two fast-path layers: an (Embedding, Linear)
        pair is supported; any other sharing is refused."""
        pairs: dict[int, tuple] = {}
        for pid in shared:
            users = [(n, m) for n, m in mods
                     if any(id(p) == pid for p in m.parameters(recurse=False))]
            kinds = sorted(layer_kind(m) or "" for _, m in users)
            if kinds != ["embedding", "linear"] or any(
                    type(m).__name__ == "Conv1D" for _, m in users):
                raise InputError(
                    f"parameter {tied[pid][0]!r} is shared by {[n for n, _ in users]}: only "
                    "an nn.Embedding tied to an nn.Linear output layer is supported; pass "
                    "params= without it")
            emb = next(u for u in users if layer_kind(u[1]) == "embedding")
            lin = next(u for u in users if layer_kind(u[1]) == "linear")
            if lin[1].weight is not emb[1].weight:
                raise InputError(f"parameter {tied[pid][0]!r}: only weight tying is supported")
            pairs[pid] = (emb, lin)
        return pairs

    # ------------------------------------------------------------------ hooks
    def _post(self, param):
        # a parameter outside the measured layers (params=None): noted for grad_coverage;
        # the measured ones are noted by a list's append and queue the end-of-pass
        # callback from their layer's output hook
        self._received.append(param)
        self._queue_end()

    def _queue_end(self) -> None:
        """Queue `_end_of_backward` once per backward pass (autograd graph task)."""
        task = _task_id()
        if task != self._queued_task:
            self._queued_task = task
            _queue_callback(self._end_of_backward)

    @torch.no_grad()
    def _end_of_backward(self) -> None:
        self._queued_task = None
        params = self._received
        if not params:
            return
        ids = list(map(id, params))
        if len(set(ids)) < len(ids):  # a second backward pass in the step: each once
            params = list({id(p): p for p in params}.values())
            ids = list(map(id, params))
        got = [p.grad for p in params]
        gs = [g for g in got if g is not None]
        if len(gs) < len(got):
            ids = [i for i, g in zip(ids, got, strict=True) if g is not None]
        if gs:
            self._big = sq_norm_vector(gs, ids, uniform=self._uniform)

    def _fused_sink(self, m, x):
        """The sink for `LinearWithNorms` when layer ``m`` called on ``x`` is to form its
        per-example gradients once in its backward (``None``: the plain forward, and the
        norms from the output hook). The measured choice is cached per layer and input
        shape, so a layer that keeps the plain forward costs one dictionary look-up."""
        if x.ndim < 3 or not torch.is_grad_enabled():
            return None
        key = (id(m), x.shape, x.dtype)
        sink = self._decided.get(key, self)
        if sink is self:  # first call with this shape: decide (and measure if need be)
            if _compiling() or inside_torch_func():  # no timing inside a transform or trace
                return None
            sink = None
            if x.dtype in FULL_DTYPES and x.dtype == m.weight.dtype:
                bsz, d_in = x.shape[0], x.shape[-1]
                t = x.numel() // max(1, bsz * d_in)
                bias = m.bias is not None and m.bias.requires_grad
                if per_example_gradients_win(bsz, t, d_in, m.weight.shape[0], bias,
                                             x.dtype, x.device):
                    sink = self._sinks[id(m)]
            self._decided[key] = sink
        if sink is None or torch.is_autocast_enabled(x.device.type) or \
                inside_torch_func() or _compiling() or \
                self._module_group[id(m)] in self._broadcast:
            return None
        return sink

    def _fused_part(self, group, sq) -> None:
        self._queue_end()
        self._parts.append((group, sq))

    def _fwd(self, m, inp, out):
        if not out.requires_grad or not torch.is_grad_enabled() or inside_torch_func():
            return
        group = self._module_group[id(m)]
        if group in self._broadcast:
            return
        self._fwd_calls[id(m)] = self._fwd_calls.get(id(m), 0) + 1
        if type(out.grad_fn) is _FUSED_NODE:  # LinearWithNorms feeds the sink
            return
        a = inp[0]  # the products run under no_grad: no detach needed
        pid = id(getattr(m, "weight", None))
        pair = self._pairs.get(pid)
        if pair is not None and m is pair[0][1]:
            self._tie_idx[pid] = a  # the tokens, for the cross term

        def on_grad(d):
            self._queue_end()
            self._parts.append((group, module_sq_norms(m, [a], [d])))
            if pair is not None:
                self._tie_term(m, pair, pid, a, d)

        out.register_hook(on_grad)

    def _tie_term(self, m, pair, pid, a, d) -> None:
        (emb_name, emb), _ = pair
        if m is not emb:  # the output layer (backward reaches it first): Σ_s d_s[x_t] a_s
            idx = self._tie_idx.get(pid)
            if idx is None:
                self._tie_missing = True
                return
            bsz = idx.shape[0]
            x = idx.reshape(bsz, -1)
            dd, aa = work_tensor(d).reshape(bsz, -1, d.shape[-1]), work_tensor(a).reshape(bsz, -1,
                                                                                a.shape[-1])
            gathered = torch.gather(dd, 2, x.unsqueeze(1).expand(-1, dd.shape[1], -1))
            self._tie_m[pid] = torch.bmm(gathered.transpose(1, 2), aa.to(dd.dtype))
            return
        mt = self._tie_m.pop(pid, None)
        if mt is None:
            self._tie_missing = True
            return
        bsz = a.shape[0]
        de = work_tensor(d).reshape(bsz, -1, d.shape[-1]).to(mt.dtype)
        if isinstance(emb.padding_idx, int):
            de = de * torch.ne(a.reshape(bsz, -1), emb.padding_idx).unsqueeze(-1)
        self._parts.append((emb_name, 2 * (mt * de).sum((1, 2))))

    def remove(self) -> None:
        """Detach the hooks from the model (the collector stops counting)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        for m in self._fused.values():
            f = m.__dict__.get("forward")
            if getattr(f, "__func__", None) is _fused_forward:
                del m.forward
            if _FUSED.get(m) == self._fused_sink:
                del _FUSED[m]
        self._fused = {}

    # ------------------------------------------------------------------ step
    def step(self, *, loss_scale=None):
        """Feed this step's per-example and batch norms to the estimator.

        Call once per optimizer step, after ``loss.backward()``. Returns
        ``(g2, trace_sigma)`` of this step, or ``None`` when it was skipped (non-finite
        norms).
        """
        if not self._parts:
            raise UsageError("step() called before any backward pass through the measured "
                               "layers (call it after loss.backward())")
        training_bn = [n for n, m in self._batchnorms if m.training]
        parts, self._parts = self._parts, []
        calls, self._fwd_calls = self._fwd_calls, {}
        big, self._big = self._big, None
        received = self._received[:]
        self._received.clear()  # the hooks hold this list
        tie_missing, self._tie_missing = self._tie_missing, False
        self._tie_idx.clear()
        self._tie_m.clear()
        if training_bn:
            raise UsageError(
                "batch normalisation is in training mode at this step (the model was "
                "switched to training mode after the collector was built): it couples the "
                f"examples of a batch, so per-example gradients do not exist: "
                f"{', '.join(training_bn[:5])}. Use GradientNoiseScale (micro-batches) or "
                "DDPNoiseScaleHook instead, or replace BatchNorm by GroupNorm/LayerNorm")
        if max(calls.values()) > 1:
            raise UsageError(
                "a measured layer ran more than once since the last step() (several "
                "forward/backward passes, or weight sharing): PerExampleNoiseScale needs "
                "one forward and one backward per step; use GradientNoiseScale for "
                "accumulation")
        if tie_missing:
            raise UsageError("the tied embedding and output layer did not both run in "
                               "forward order (embedding first): the cross term is missing")
        used = self._used_groups(received)
        called = {self._module_group[i] for i in calls}
        if used - called:
            raise UsageError(
                f"layers {sorted(used - called)[:3]} received gradient but were not called as "
                f"modules (their weights were used functionally): their per-example norms "
                "are missing; pass params= without them")
        bsz = max(v.shape[0] for _, v in parts)
        if any(v.shape[0] != bsz for _, v in parts):
            parts = self._leave_out_broadcast(parts, bsz)
        if bsz < 2:
            raise InputError("the batch must hold >= 2 examples")
        if big is None or not any(i in self._covered for i in big[0]):
            raise UsageError("no measured parameter received a gradient this step")
        ids, sq = big
        scale = resolve_scale(loss_scale, self.scaler)
        dev = sq.device
        acc = sq.dtype
        groups = list(self.module_estimators) if self.per_module else []
        part_groups = [g for g, _ in parts]
        cov, part_g, big_g = self._indices(ids, part_groups, groups, dev)
        per_part = stack_scalars([v for _, v in parts], dev).to(acc)  # (L, B)
        # rows: mean_i Σ_layers |g_i|², |ḡ_measured|², |ḡ|², then per layer group (G each)
        rows = [per_part.sum(0).mean().reshape(1), (sq if cov is None else sq[cov]).sum(
            ).reshape(1), sq.sum().reshape(1)]
        if groups:  # one scatter-add over the layers, one over the parameters
            zero = torch.zeros(len(groups), dtype=acc, device=dev)
            rows.append(zero.index_add(0, part_g, per_part.mean(1)))
            rows.append(zero.index_add(0, big_g[1], sq[big_g[0]]))
        b2 = bsz * bsz
        n_g = len(groups)

        explicit = self._explicit

        def finish(vals):
            if not explicit and vals[2] > 0 and math.isfinite(vals[2]):
                self._grad_share[0] += vals[1] / vals[2]
                self._grad_share[1] += 1
            for j, g in enumerate(groups):
                small_g, big_g = vals[3 + j] * b2 / scale**2, vals[3 + n_g + j] / scale**2
                if g in self.module_estimators and math.isfinite(small_g) and \
                        math.isfinite(big_g):
                    self.module_estimators[g].update(small_g, 1, big_g, bsz)
            return self._feed(vals[0] * b2, 1, vals[1], bsz, scale)

        return self._defer(torch.cat(rows), finish)

    def _used_groups(self, received) -> set[str]:
        """The measured layers (groups) whose parameters received a gradient, cached by
        the parameters seen (the same every step)."""
        key = tuple(map(id, received))
        hit = self._used_cache.get(key)
        if hit is None:
            if len(self._used_cache) > 64:
                self._used_cache.clear()
            hit = self._used_cache[key] = {self._group[i] for i in key if i in self._covered}
        return hit

    def _indices(self, ids, part_groups, groups, dev):
        """Index tensors for this step's reductions, cached (the same every step): the
        measured entries of the norm vector (``None``: all), each part's group, and
        (positions, group) of the measured parameters."""
        key = (tuple(ids), tuple(part_groups))
        hit = self._index_cache.get(key)
        if hit is None:
            cov_pos = [k for k, i in enumerate(ids) if i in self._covered]
            cov = None if len(cov_pos) == len(ids) else torch.tensor(cov_pos, device=dev)
            part_g = big_g = None
            if groups:
                where = {g: j for j, g in enumerate(groups)}
                part_g = torch.tensor([where[g] for g in part_groups], device=dev)
                pos = [k for k in cov_pos if self._group[ids[k]] in where]
                big_g = (torch.tensor(pos, device=dev, dtype=torch.long),
                         torch.tensor([where[self._group[ids[k]]] for k in pos], device=dev,
                                      dtype=torch.long))
            hit = self._index_cache[key] = (cov, part_g, big_g)
        return hit

    def _leave_out_broadcast(self, parts, bsz):
        """Layers called with a batch of one whose output is broadcast over the examples
        (GPT-2's position embedding: ``wpe(position_ids)`` with ``position_ids`` of shape
        ``(1, T)``) get the gradient summed over the batch: their per-example norms do
        not exist in the hooks. They are left out from now on, with a warning."""
        groups = {g for g, v in parts if v.shape[0] != bsz}
        self._broadcast |= groups
        gone = {i for i in self._covered if self._group[i] in groups}
        self._index_cache.clear()
        self._used_cache.clear()
        self._covered -= gone
        self.params = [(n, p) for n, p in self.params if id(p) not in gone]
        for g in groups:
            self.module_estimators.pop(g, None)
        names = {n for n, p in self.params}
        c = self.coverage
        left = tuple(n for n in c.covered if n not in names)
        share = sum(p.numel() for _, p in self.params) / c.n_parameters
        self.coverage = Coverage(parameters=share, n_parameters=c.n_parameters,
                                 covered=tuple(n for n in c.covered if n in names),
                                 uncovered=(*c.uncovered, *left), tied=c.tied)
        warn(
            f"{', '.join(sorted(groups))}: called with a batch of one and broadcast over "
            f"the {bsz} examples, so per-example norms are not available; left out from now "
            f"on (PerExampleNoiseScale now measures {self.coverage}); give the layer "
            f"per-example inputs to measure it (for GPT-2, call the model with "
            f"position_ids expanded to the batch)", CoverageWarning)
        if not self.params:
            raise UsageError("no measurable layer is left")
        return [(g, v) for g, v in parts if g not in groups]

    # ---------------------------------------------------------------- views
    @property
    def grad_coverage(self) -> float:
        r"""Mean over the measured steps of $|\bar g_{measured}|^2/|\bar g|^2$: the share
        of the batch gradient's squared norm in the measured parameters (NaN before the
        first step, and with an explicit ``params=`` selection, the LayerNorm-only proxy
        included: the collector then reads only the selected parameters' gradients)."""
        total, n = self._grad_share
        return total / n if n else math.nan

    def module_noise_scales(self) -> pd.DataFrame:
        """Per-layer ``b_simple``, ``g2``, ``trace_sigma`` and ``parameters`` (a
        DataFrame, one row per layer; needs ``per_module=True``)."""
        self.flush()
        if not self.per_module:
            raise UsageError("module_noise_scales() needs PerExampleNoiseScale(..., "
                               "per_module=True)")
        sizes: dict[str, int] = {}
        for _, p in self.params:
            g = self._group[id(p)]
            sizes[g] = sizes.get(g, 0) + p.numel()
        rows = [{"module": g, "parameters": sizes.get(g, 0),
                 "b_simple": est.b_simple if est.steps else math.nan,
                 "g2": est.g2 if est.steps else math.nan,
                 "trace_sigma": est.trace_sigma if est.steps else math.nan}
                for g, est in self.module_estimators.items()]
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return f"PerExampleNoiseScale(measures {self.coverage}, {self._state_text()})"
