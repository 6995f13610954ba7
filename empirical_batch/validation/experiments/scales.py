"""Noise scales at a model's current weights, by the library's two measurement paths.

`hessian_scales`: B_noise, B_simple and the four scalars |G|², GᵀHG, tr Σ, tr(HΣ) from
per-example gradients and Hessian-vector products
(`empirical_batch.measure.hessian_noise_scale`), in chunks sized to the model's
activations (`hvp_chunk`). `collector_b_simple`: B_simple from the per-example squared
norms (`empirical_batch.measure.per_example_sq_norms`) and the two-batch estimator
`empirical_batch.gns_two_batch` (McCandlish et al. 2018, App. A.1). Used along the
reference runs (``noise``) and by the one-step experiment (``one_step``) of the validation
study (`empirical_batch.validation.experiments`).
"""

from __future__ import annotations

__all__ = ["HVP_CHUNK", "SAVED_BYTES", "collector_b_simple", "grad_chunk", "hessian_scales",
           "hvp_chunk", "saved_bytes_budget", "saved_bytes_per_example"]

#: most Hessian-vector products evaluated at once by ``hessian_noise_scale`` on the CPU
#: (on CUDA only the memory bound, `saved_bytes_budget`, limits a chunk)
HVP_CHUNK = 64

#: bound on (bytes autograd saves per example) × (examples in one vmapped chunk) for
#: the HVPs (`hvp_chunk`) and the one-step batch gradients: it sets the chunk for
#: models with large activations. Peak memory measured on the CPU for the ``sequence``
#: transformer was about 6× this product for HVPs (double backward) and 3× for
#: batch gradients, so 2 GiB here is roughly 6–12 GiB of memory.
SAVED_BYTES = 2**31
#: on CUDA the bound is this fraction of the device's memory (at least `SAVED_BYTES`):
#: about 5 GB on an 80 GB H100, so the peak (≤ 6× the bound) stays under half the device
CUDA_MEMORY_FRACTION = 1 / 16


def saved_bytes_budget(device) -> int:
    """The bound on (saved bytes per example) × (examples in one chunk) on ``device``:
    `SAVED_BYTES` on the CPU; on CUDA `CUDA_MEMORY_FRACTION` of the device's memory."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return SAVED_BYTES
    total = torch.cuda.get_device_properties(device).total_memory
    return max(SAVED_BYTES, int(total * CUDA_MEMORY_FRACTION))


def saved_bytes_per_example(model, loss_fn, inputs, targets) -> int:
    """Bytes autograd saves for the backward per example (a forward of 2 minus one of 1).

    The difference cancels what does not grow with the batch (the saved weights).
    """
    import torch

    def saved(k: int) -> int:
        total = 0

        def pack(t):
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss_fn(model(inputs[:k]), targets[:k])
        return total

    return max(saved(2) - saved(1), 1)


def hvp_chunk(model, loss_fn, inputs, targets, budget: int | None = None, *,
              cap: int | None = None, per_example: int | None = None) -> int:
    """HVPs per vmapped chunk: at most ``cap`` (default ``HVP_CHUNK`` on the CPU and
    ``n`` on CUDA), fewer when the activations are large.

    Each HVP of the mean loss over the ``n`` examples is a double backward through
    all of them, so a chunk of c HVPs holds about c × n × (saved bytes per example)
    several times over; c is the largest value (at most the cap, at least 1) with
    c × n × saved bytes <= ``budget`` (default `saved_bytes_budget` of the inputs'
    device). The ``full`` preset's sequence task (1,024 windows in float64) would
    otherwise need over 100 GiB at c = 64. ``per_example``: the saved bytes per example
    when already measured (`saved_bytes_per_example`).
    """
    n = int(inputs.shape[0])
    if cap is None:
        cap = HVP_CHUNK if inputs.device.type == "cpu" else max(n, 1)
    if n < 2:
        return cap
    if budget is None:
        budget = saved_bytes_budget(inputs.device)
    if per_example is None:
        per_example = saved_bytes_per_example(model, loss_fn, inputs, targets)
    return int(max(1, min(cap, budget // (per_example * n))))


def grad_chunk(model, loss_fn, inputs, targets, budget: int | None = None, *,
               per_example: int | None = None) -> int:
    """Per-example gradients per vmapped chunk: each is one backward through one
    example, so c × (saved bytes per example) <= ``budget`` (default
    `saved_bytes_budget` of the inputs' device), at least 1, at most the examples."""
    n = int(inputs.shape[0])
    if budget is None:
        budget = saved_bytes_budget(inputs.device)
    if n < 2:
        return 1
    if per_example is None:
        per_example = saved_bytes_per_example(model, loss_fn, inputs, targets)
    return int(max(1, min(n, budget // per_example)))


def hessian_scales(model, loss_fn, inputs, targets, population_size: float | None = None,
                   *, n_probes: int | None = None, seed: int = 0) -> dict:
    """B_noise, B_simple and |G|², GᵀHG, tr Σ, tr(HΣ) at the model's current weights.

    The examples are treated as the data set the batches are drawn from (``ddof=0``);
    ``b_noise_pop``/``b_simple_pop`` are the estimates for the population they were
    drawn from (``HessianNoiseScale.unbiased``): an unbounded one by default, or a finite
    set of ``population_size`` examples that the batches are drawn from with
    replacement and the examples without (the finite-population correction).
    Hessian-vector products run `hvp_chunk` at a time (memory n × chunk
    activations) and per-example gradients `grad_chunk` at a time; the result does not
    depend on either beyond round-off. ``n_probes``/``seed``: the products for that many
    deviations only (`hessian_noise_scale`; ``b_noise_se``, ``b_noise_pop_se`` and
    ``trace_h_sigma_se`` state the error, 0 with every example a probe). Attention
    (`torch.nn.functional.scaled_dot_product_attention`) runs its math backend here: the
    fused kernels have no double backward.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from empirical_batch.measure import hessian_noise_scale

    per = saved_bytes_per_example(model, loss_fn, inputs, targets) if len(inputs) > 1 else 1
    with sdpa_kernel(SDPBackend.MATH):
        r = hessian_noise_scale(
            model, loss_fn, inputs, targets,
            chunk_size=hvp_chunk(model, loss_fn, inputs, targets, per_example=per),
            grad_chunk_size=grad_chunk(model, loss_fn, inputs, targets, per_example=per),
            n_probes=n_probes, seed=seed)
    pop = r.unbiased(population_size)
    return {**r.to_dict(), "b_noise_pop": pop.b_noise, "b_simple_pop": pop.b_simple,
            "b_noise_pop_se": pop.b_noise_se}


def collector_b_simple(model, loss_fn, inputs, targets,
                       population_size: float | None = None) -> dict:
    """B_simple from the library's collectors: per-example squared norms + ``gns_two_batch``.

    ``per_example_sq_norms`` gives |g_i|² (batches of 1); the squared norm of the
    mean gradient over the n examples is the big batch; the unbiased two-batch
    estimator of App. A.1 gives |G|² and tr Σ and B_simple = tr Σ / |G|². With a finite
    ``population_size`` D (the n examples drawn without replacement from D, batches
    drawn with replacement from them) the estimator's ``dataset_size`` correction and
    the set's own covariance, tr Σ_D = (D − 1)/D × the Bessel-corrected trace: the same
    estimate as ``hessian_scales`` with that ``population_size``.
    """
    import numpy as np
    import torch

    from empirical_batch import gns_two_batch
    from empirical_batch.measure import per_example_sq_norms
    from empirical_batch.theory import noise_scales_from_scalars

    n = int(inputs.shape[0])
    small = per_example_sq_norms(model, loss_fn, inputs, targets)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss_fn(model(inputs), targets), params)
    big = float(sum(g.double().square().sum() for g in grads))
    big_d = (float(population_size) if population_size is not None
             and np.isfinite(population_size) else None)
    g2, trace_sigma = gns_two_batch(float(small.double().mean()), 1, big, n,
                                    dataset_size=None if big_d is None else int(big_d))
    if big_d is not None:
        trace_sigma *= (big_d - 1.0) / big_d
    b_simple = noise_scales_from_scalars(g2, 1.0, trace_sigma, 0.0)["b_simple"]
    return {"g2_collector": g2, "trace_sigma_collector": trace_sigma,
            "b_simple_collector": b_simple if g2 > 0 else float("nan")}
