"""ATen ops a noise-scale collector adds to a training step, counted with ``torch.profiler``.

On a GPU every ATen op that computes something is (at least) one kernel launch of a few
microseconds, so a collector whose ops grow with the number of parameter tensors costs
time that no FLOP count shows. The counts are exact and deterministic (unlike timings),
so ``tests/test_measure_fused.py`` checks them and ``bench_measure.py`` prints them.

The model is a stack of ``n_tensors / 2`` ``nn.Linear(d, d)`` layers (weight and bias
each), on inputs of shape ``(batch, seq, d)``; a step is ``k`` micro-batch backward
passes (micro-batch collector) or one (per-example collectors), then the collector's
``step()`` and ``zero_grad``. The count is that of the ``aten::`` ops the profiler records
that are not called from inside another ``aten::`` op (the ops issued by Python and
autograd: on CUDA, ``torch._foreach_norm`` over any number of tensors is one such op and
a few fused kernels, while the CPU runs it as a loop of per-tensor norms inside it), with
the collector minus without it, on the second of two identical steps.

The same steps also give the Python function calls a collector adds (`python_calls`:
frames entered, counted with ``sys.setprofile``): on a GPU the Python a step runs per
parameter tensor costs host time that neither the op count nor a FLOP count shows.
"""

from __future__ import annotations

import os
import warnings

import torch
from torch import nn

K = 4  # micro-batches per step (micro-batch collector)


def _stack(layer, n_tensors: int, d: int) -> nn.Module:
    """``n_tensors / 2`` layers ``layer(d)`` (two parameter tensors each), ``tanh`` between."""
    if n_tensors < 2 or n_tensors % 2:
        raise ValueError(f"n_tensors must be an even number >= 2, got {n_tensors}")
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for i in range(n_tensors // 2):
        if i:
            layers.append(nn.Tanh())
        layers.append(layer(d))
    return nn.Sequential(*layers)


def linear_stack(n_tensors: int, d: int = 16) -> nn.Module:
    """``n_tensors / 2`` linear layers with bias, ``tanh`` between them."""
    return _stack(lambda k: nn.Linear(k, k), n_tensors, d)


def layernorm_stack(n_tensors: int, d: int = 16) -> nn.Module:
    """``n_tensors / 2`` LayerNorm layers (weight and bias), ``tanh`` between them."""
    return _stack(nn.LayerNorm, n_tensors, d)


def aten_ops(fn) -> int:
    """Number of ``aten::`` ops the profiler records while ``fn()`` runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(1 for e in prof.events() if _top_level_aten(e))


def _top_level_aten(event) -> bool:
    """An ``aten::`` op not called from inside another ``aten::`` op."""
    if not event.name.startswith("aten::"):
        return False
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return False
        parent = parent.cpu_parent
    return True


def python_calls(fn) -> int:
    """Number of Python function calls (frames entered, builtins not counted) while
    ``fn()`` runs: the per-tensor Python that a constant ATen op count hides."""
    import sys

    n = 0

    def count(frame, event, arg):
        nonlocal n
        if event == "call":
            n += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n


def added_python_calls(collector: str, n_tensors: int, **kw) -> int:
    """Python function calls per step that ``collector`` adds to the plain step (hooks,
    callbacks, the collector's own code; the same arguments as `added_ops`)."""
    return added_ops(collector, n_tensors, counter=python_calls, **kw)


def added_ops(collector: str, n_tensors: int, *, batch: int = 8, seq: int = 4,
              d: int = 16, counter=None) -> int:
    """ATen ops per step that ``collector`` adds to the plain step.

    ``collector``: ``"micro-batch"`` (`GradientNoiseScale`, k = 4) or
    ``"per-example"`` (`PerExampleNoiseScale`) on the linear stack, or
    ``"layernorm"`` (`PerExampleNoiseScale(params="layernorm")`) on the LayerNorm stack.
    ``counter``: what to count (default `aten_ops`; `python_calls` for Python calls).
    """
    counter = aten_ops if counter is None else counter
    from empirical_batch.measure import GradientNoiseScale, PerExampleNoiseScale

    def step_fn(with_collector: bool):
        model = (layernorm_stack if collector == "layernorm" else linear_stack)(n_tensors, d)
        g = torch.Generator().manual_seed(1)
        x = torch.randn(batch * (K if collector == "micro-batch" else 1), seq, d, generator=g)
        tracker = None
        if with_collector:
            if collector == "micro-batch":
                tracker = GradientNoiseScale(model, micro_batch_size=batch,
                                             accumulation_steps=K, sync_every=10**6)
            elif collector in ("per-example", "layernorm"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tracker = PerExampleNoiseScale(
                        model, sync_every=10**6,
                        params="layernorm" if collector == "layernorm" else None)
            else:
                raise ValueError(f"unknown collector {collector!r}")

        def step():
            if collector == "micro-batch":
                for j in range(K):
                    (model(x[j * batch:(j + 1) * batch]).square().mean() / K).backward()
            else:
                model(x).square().mean().backward()
            if tracker is not None:
                tracker.step()
            model.zero_grad(set_to_none=True)
        return step

    counts = []
    for with_collector in (False, True):
        fn = step_fn(with_collector)
        fn()  # warm-up: the first step may set things up
        counts.append(counter(fn))
    return counts[1] - counts[0]


def main() -> None:
    """Print the counts for 4 and 200 tensors, for the ``empirical_batch`` on the path
    (``PYTHONPATH=<another checkout> python benchmarks/op_counts.py`` counts another
    version's)."""
    import empirical_batch

    torch.set_num_threads(1)
    print(f"empirical_batch from {os.path.dirname(empirical_batch.__file__)}")
    print("| collector | ATen ops, 4 tensors | 200 tensors | Python calls, 4 tensors | "
          "200 tensors |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind, kw, label in ROWS:
        print(f"| {label} | {added_ops(kind, 4, **kw)} | {added_ops(kind, 200, **kw)} | "
              f"{added_python_calls(kind, 4, **kw)} | {added_python_calls(kind, 200, **kw)} |")


ROWS = (("micro-batch", {}, "micro-batch (GradientNoiseScale), k=4"),
        ("per-example", {}, "per-example, linear layers, T=4 (Gram)"),
        ("per-example", {"seq": 16, "d": 8}, "per-example, linear layers, T=16 d=8 "
         "(materialised)"),
        ("layernorm", {}, "LayerNorm-only per-example"))


if __name__ == "__main__":
    if not os.environ.get("PYTHONPATH"):  # this checkout's package, not an installed one
        import sys

        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    main()
