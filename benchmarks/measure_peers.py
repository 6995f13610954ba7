"""Other ways to get per-example gradient norms, run beside the collectors in
``bench_measure.py`` (each where it is installed: ``pip install .[bench]``).

Every peer is a training step that ends with the per-example squared norms
$|\\nabla\\ell_i|^2$ of a batch-mean loss, shape ``(B,)``, on the device:

- ``torch.func``: ``vmap(grad)`` over the examples, a second pass after the ordinary
  step (`per_example_sq_norms(method="vmap")`);
- ``torch.func`` single pass: the training step itself made of ``vmap(grad)`` (the
  per-sample gradients, their squared norms, and ``.grad`` set to their mean; no
  ordinary backward), as in the ``torch.func`` per-sample-gradients tutorial;
- Opacus ``GradSampleModule``: per-example gradients materialised in ``grad_sample``;
- Opacus ghost norms: ``GradSampleModuleFastGradientClipping(use_ghost_clipping=True)``,
  the norms of Li et al. (2022) without per-example gradients (one backward pass: the
  norms, not the clipping, which would need a second one);
- BackPACK ``BatchL2Grad``: per-example squared norms of the layers BackPACK supports
  (``nn.Linear`` here, without a weight tied to an embedding; LayerNorm and Embedding
  parameters are not measured by it).

A peer that is not installed or cannot handle a model is skipped with a note.
"""

from __future__ import annotations

import copy
import warnings

import torch

from empirical_batch.measure import per_example_sq_norms

# Opacus's hooks on a model whose inputs (token ids) need no gradient
warnings.filterwarnings("ignore", message="Full backward hook is firing")
# BackPACK on the modules it has no rule for (they are left out: see make_peer)
warnings.filterwarnings("ignore", message="Extension saving to")


class Skip(Exception):
    """The peer is missing or does not handle the model: the reason."""


def _opacus():
    try:
        import opacus  # noqa: F401
    except ImportError as err:
        raise Skip("opacus not installed (pip install opacus)") from err


def make_peer(name: str, model, loss_fn):
    """``(module to train, after_backward() -> (B,) norms, params it measures)``."""
    if name == "torch.func vmap(grad) (extra pass)":
        def after(x, y):
            return per_example_sq_norms(model, loss_fn, x, y, method="vmap")
        return model, after, None
    if name == SINGLE_PASS:
        return model, None, None
    if name == "Opacus GradSampleModule":
        _opacus()
        from opacus import GradSampleModule

        gsm = GradSampleModule(model)

        def after(x, y):
            gs = [p.grad_sample for p in gsm.parameters() if p.grad_sample is not None]
            b = gs[0].shape[0]
            return torch.stack([g.reshape(b, -1).square().sum(1) for g in gs]).sum(0)
        return gsm, after, None
    if name == "Opacus ghost norms":
        _opacus()
        from opacus.grad_sample import GradSampleModuleFastGradientClipping

        fgc = GradSampleModuleFastGradientClipping(model, use_ghost_clipping=True,
                                                   loss_reduction="mean")

        def after(x, y):
            return fgc.get_norm_sample().square()
        return fgc, after, None
    if name == "BackPACK BatchL2Grad":
        try:
            from backpack import extend
        except ImportError as err:
            raise Skip("backpack-for-pytorch not installed") from err
        ext = extend(model)
        # BackPACK's per-example norms cover the nn.Linear parameters that no other
        # module uses (a weight tied to an embedding gets only the Linear's share)
        other = {id(p) for m in ext.modules() if not isinstance(m, torch.nn.Linear)
                 for p in m.parameters(recurse=False)}
        linear = [p for m in ext.modules() if isinstance(m, torch.nn.Linear)
                  for p in m.parameters(recurse=False) if id(p) not in other]

        def after(x, y):
            b = x.shape[0]
            sq = [p.batch_l2 for p in linear if hasattr(p, "batch_l2")]
            if len(sq) != len(linear):
                raise Skip("BackPACK did not compute batch_l2 for every nn.Linear")
            return torch.stack(sq).sum(0) * (b * b)  # mean loss: BackPACK scales by 1/B
        return ext, after, linear
    raise ValueError(f"unknown peer {name!r}")


SINGLE_PASS = "torch.func per-sample step (single pass)"
PEERS = ("torch.func vmap(grad) (extra pass)", SINGLE_PASS, "Opacus GradSampleModule",
         "Opacus ghost norms", "BackPACK BatchL2Grad")


def single_pass(model, loss_fn):
    """``step(x, y) -> (B,) norms``: per-sample gradients by ``vmap(grad)`` of the loss of
    one example, their squared norms, and ``.grad`` = their mean (the batch-mean loss's
    gradient), in one pass."""
    from torch.func import functional_call, grad, vmap

    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())

    def one(ps, x, y):
        out = functional_call(model, {**buffers, **ps}, (x.unsqueeze(0),))
        return loss_fn(out, y.unsqueeze(0))

    per_sample = vmap(grad(one), in_dims=(None, 0, 0))

    def step(x, y):
        gs = per_sample({n: params[n].detach() for n in names}, x, y)
        sq = None
        for n in names:
            g = gs[n]
            part = g.reshape(g.shape[0], -1).square().sum(1)
            sq = part if sq is None else sq + part
            params[n].grad = g.mean(0)
        return sq
    return step


def backward(name: str, loss):
    """``loss.backward()``, inside BackPACK's context for the BackPACK peer."""
    if name == "BackPACK BatchL2Grad":
        from backpack import backpack
        from backpack.extensions import BatchL2Grad

        with backpack(BatchL2Grad()):
            loss.backward()
    else:
        loss.backward()


def peer_step(name, base, x, y, loss_fn, lr=1e-4, bf16=False):
    """A training step with the peer (a fresh copy of ``base``), or `Skip`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            module, after, _ = make_peer(name, copy.deepcopy(base), loss_fn)
        except Skip:
            raise
        except Exception as err:  # the peer refuses the model
            raise Skip(f"{type(err).__name__}: {str(err).splitlines()[0][:90]}") from err
    opt = torch.optim.SGD(module.parameters(), lr=lr)
    if name == SINGLE_PASS:
        fused = single_pass(module, loss_fn)

        def step():
            with torch.autocast(x.device.type, torch.bfloat16, enabled=bf16):
                fused(x, y)
            opt.step()
            module.zero_grad(set_to_none=True)
        step()
        return step

    def step():
        with torch.autocast(x.device.type, torch.bfloat16, enabled=bf16):
            loss = loss_fn(module(x), y)
        backward(name, loss)
        after(x, y)
        opt.step()
        module.zero_grad(set_to_none=True)  # Opacus: also clears grad_sample

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step()
    except Skip:
        raise
    except Exception as err:
        raise Skip(f"{type(err).__name__}: {str(err).splitlines()[0][:90]}") from err
    return step


def peer_norms(name, base, x, y, loss_fn):
    """The peer's per-example squared norms on a fresh copy of ``base`` (no update),
    and the names of the parameters they cover (``None``: all)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = copy.deepcopy(base)
        try:
            module, after, covered = make_peer(name, model, loss_fn)
            if name == SINGLE_PASS:
                out = single_pass(module, loss_fn)(x, y)
            else:
                backward(name, loss_fn(module(x), y))
                out = after(x, y)
        except Skip:
            raise
        except Exception as err:
            raise Skip(f"{type(err).__name__}: {str(err).splitlines()[0][:90]}") from err
    names = None
    if covered is not None:
        ids = {id(p) for p in covered}
        names = [n for n, p in model.named_parameters() if id(p) in ids]
    return out.detach(), names
