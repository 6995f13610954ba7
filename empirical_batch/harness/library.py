"""Every call the harness makes into empirical_batch, in one place.

The harness is a *user* of the library: it estimates nothing and fits no tradeoff
itself. Sweeps are read and validated by `empirical_batch.load_sweep`;
steps-to-target, the tradeoff fits and their intervals come from
`empirical_batch.fit`; noise scales from `empirical_batch.measure`
(per-example squared norms, Hessian-vector products) and
`empirical_batch.estimators`; the one-step predictions from
`empirical_batch.theory`. The figures draw the fitted curves through the
``Tradeoff`` of each `TradeoffFit`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError

#: most Hessian-vector products evaluated at once by ``hessian_noise_scale``
HVP_CHUNK = 64

#: bound on (bytes autograd saves per example) × (examples in one vmapped chunk) for
#: the HVPs (`hvp_chunk`) and the one-step batch gradients: it sets the chunk for
#: models with large activations. Peak memory measured on the CPU for the ``sequence``
#: transformer was about 6× this product for HVPs (double backward) and 3× for
#: batch gradients, so 2 GiB here is roughly 6–12 GiB of memory.
SAVED_BYTES = 2**31

#: fit options used everywhere in the harness (library defaults, stated once)
FIT_OPTIONS: dict[str, Any] = {"combine": "mean", "ci": 0.95, "n_boot": 1000, "seed": 0}


def load_sweeps(paths: Iterable[str | Path]):
    """Each file through ``load_sweep``, concatenated, and validated again as one sweep."""
    from empirical_batch import load_sweep

    parts = [load_sweep(p).to_frame() for p in paths]
    return load_sweep(pd.concat(parts, ignore_index=True), metric_name="eval_loss")


def select(sweep, **equal):
    """The sub-sweep whose pass-through columns equal ``equal`` (e.g. optimizer="sgd")."""
    from empirical_batch import load_sweep

    frame = sweep.to_frame()
    for col, value in equal.items():
        frame = frame[frame[col] == value]
    if frame.empty:
        raise InputError(f"sweep has no rows with {equal}")
    return load_sweep(frame.reset_index(drop=True), metric_name=sweep.metric_name)


def steps_table(sweep, target: float) -> pd.DataFrame:
    from empirical_batch import steps_to_target

    return steps_to_target(sweep, target, combine=FIT_OPTIONS["combine"]).to_frame()


def b_crit_curve(sweep, targets):
    """``critical_batch_curve`` with failures reported per target (not raised)."""
    from empirical_batch import critical_batch_curve

    return critical_batch_curve(sweep, np.asarray(targets, dtype=float), errors="report",
                                **FIT_OPTIONS)


def b_crit_points(sweep, targets) -> np.ndarray:
    """B_crit point estimates at ``targets`` (NaN where not fitted), with no interval.

    ``critical_batch_curve`` with ``n_boot=0``: its point estimate is the same
    whatever the interval options (``FIT_OPTIONS``'s combine rule is kept); used
    where only the estimate matters (the seed bootstrap of
    `empirical_batch.harness.uncertainty`, the target-shift check).
    """
    import warnings

    from empirical_batch import critical_batch_curve
    from empirical_batch.fit import FitWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        curve = critical_batch_curve(sweep, np.asarray(targets, dtype=float), errors="report",
                                     combine=FIT_OPTIONS["combine"], n_boot=0,
                                     interval="percentile")
    return curve.b_crit


def power_law(x, y):
    from empirical_batch import fit_power_law

    return fit_power_law(x, y)


def b_crit_law(curve):
    """``fit_b_crit_law`` on a ``CriticalBatchCurve`` (its identified targets)."""
    from empirical_batch import fit_b_crit_law

    return fit_b_crit_law(curve, level=FIT_OPTIONS["ci"])


def kaplan_alpha_b() -> float:
    """Kaplan et al. 2020's α_B (``KAPLAN_2020``, as in ``data/kaplan2020_constants.csv``)."""
    from empirical_batch.fit import KAPLAN_2020

    return KAPLAN_2020["alpha_b"]


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


def hvp_chunk(model, loss_fn, inputs, targets) -> int:
    """HVPs per vmapped chunk: ``HVP_CHUNK``, fewer when the activations are large.

    Each HVP of the mean loss over the ``n`` examples is a double backward through
    all of them, so a chunk of c HVPs holds about c × n × (saved bytes per example)
    several times over; c is the largest value (at most ``HVP_CHUNK``, at least 1)
    with c × n × saved bytes <= ``SAVED_BYTES``. The ``full`` preset's sequence
    task (1,024 windows in float64) would otherwise need over 100 GiB at c = 64.
    """
    n = int(inputs.shape[0])
    if n < 2:
        return HVP_CHUNK
    per = saved_bytes_per_example(model, loss_fn, inputs, targets)
    return int(max(1, min(HVP_CHUNK, SAVED_BYTES // (per * n))))


def hessian_scales(model, loss_fn, inputs, targets) -> dict:
    """B_noise, B_simple and |G|², GᵀHG, tr Σ, tr(HΣ) at the model's current weights.

    The examples are treated as the data set the batches are drawn from (``ddof=0``);
    ``b_noise_pop``/``b_simple_pop`` are the estimates for the population they were
    drawn from (``HessianNoiseScale.unbiased``).
    Hessian-vector products run `hvp_chunk` at a time (memory n × chunk
    activations; the result does not depend on it beyond round-off).
    """
    from empirical_batch.measure import hessian_noise_scale

    chunk = hvp_chunk(model, loss_fn, inputs, targets)
    r = hessian_noise_scale(model, loss_fn, inputs, targets, chunk_size=chunk)
    pop = r.unbiased()
    return {**r.to_dict(), "b_noise_pop": pop.b_noise, "b_simple_pop": pop.b_simple}


def collector_b_simple(model, loss_fn, inputs, targets) -> dict:
    """B_simple from the library's collectors: per-example squared norms + ``gns_two_batch``.

    ``per_example_sq_norms`` gives |g_i|² (batches of 1); the squared norm of the
    mean gradient over the n examples is the big batch; the unbiased two-batch
    estimator of App. A.1 gives |G|² and tr Σ and B_simple = tr Σ / |G|².
    """
    import torch

    from empirical_batch import gns_two_batch
    from empirical_batch.measure import per_example_sq_norms
    from empirical_batch.theory import noise_scales_from_scalars

    n = int(inputs.shape[0])
    small = per_example_sq_norms(model, loss_fn, inputs, targets)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss_fn(model(inputs), targets), params)
    big = float(sum(g.double().square().sum() for g in grads))
    g2, trace_sigma = gns_two_batch(float(small.double().mean()), 1, big, n)
    b_simple = noise_scales_from_scalars(g2, 1.0, trace_sigma, 0.0)["b_simple"]
    return {"g2_collector": g2, "trace_sigma_collector": trace_sigma,
            "b_simple_collector": b_simple if g2 > 0 else float("nan")}


def eps_opt(batch_size, eps_max, b_noise):
    from empirical_batch import eps_opt as _eps_opt

    return _eps_opt(batch_size, eps_max, b_noise)


def dl_opt(batch_size, dl_max, b_noise):
    from empirical_batch import dl_opt as _dl_opt

    return _dl_opt(batch_size, dl_max, b_noise)
