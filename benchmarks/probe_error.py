"""The error of subsampled Hessian probes on the harness's tasks; prints a table.

`hessian_noise_scale(..., n_probes=m)` takes the Hessian-vector products for ``m`` of
the ``n`` deviations g_i − G only and estimates tr(HΣ) by the expansion estimate
(unbiased), stating its standard error ``b_noise_se`` (module notes of
`empirical_batch.measure.hessian`). Per task, at the initial weights and on the first
``--examples`` objective examples (CPU, the task's dtype): B_noise with every example a
probe (exact on the sample), then ``--draws`` probe sets of ``--probes``; printed are the
draws' mean and standard deviation against the exact value, the mean stated standard
error (it should match the spread), the coefficient of variation of the probes' terms
q_i = (g_i − G)ᵀH(g_i − G) it implies, and from that the relative standard error
expected at the preset's own ``n_examples`` and ``hvp_probes``
(cv × sqrt((1 − m/n)/m) × tr(HΣ)/B_noise's share: tr(HΣ) carries all of B_noise's
probe error). Process time of one exact and one probed call.

Run: python benchmarks/probe_error.py [--config full] [--tasks sequence,text_lm]
     [--examples 128] [--probes 32] [--draws 8]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install


def measure(task, model, x, y, probes: int | None, seed: int):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from empirical_batch.measure import hessian_noise_scale

    with sdpa_kernel(SDPBackend.MATH):  # as the harness: the fused kernels lack a double backward
        return hessian_noise_scale(model, task.loss_fn, x, y, chunk_size=16,
                                   n_probes=probes, seed=seed)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="full")
    p.add_argument("--tasks", default="sequence,text_lm")
    p.add_argument("--examples", type=int, default=128)
    p.add_argument("--probes", type=int, default=32)
    p.add_argument("--draws", type=int, default=8)
    args = p.parse_args(argv)

    import torch

    from empirical_batch.harness.config import get_config

    torch.set_num_threads(1)
    cfg = get_config(args.config, args.tasks.split(","))
    n, m = args.examples, args.probes
    print(f"config {args.config}: initial weights, {n} objective examples, {args.draws} "
          f"draws of {m} probes, torch {torch.__version__}, 1 thread")
    head = (f"{'task':10s} {'B_noise':>9s} {'probed':>9s} {'sd':>8s} {'stated':>8s} "
            f"{'cv(q)':>6s} {'exact s':>8s} {'probed s':>8s}  at the preset's sizes")
    print(head)
    print("-" * len(head))
    for plan in cfg.plans:
        task = plan.make_task().to("cpu")
        model = task.init_model(0)
        x, y = task.objective_data()
        x, y = x[:n], y[:n]
        t0 = time.process_time()
        exact = measure(task, model, x, y, None, 0)
        t_exact = time.process_time() - t0
        draws, t_probe = [], 0.0
        for s in range(args.draws):
            t0 = time.process_time()
            draws.append(measure(task, model, x, y, m, s))
            t_probe += time.process_time() - t0
        b = np.array([d.b_noise for d in draws])
        se = float(np.mean([d.b_noise_se for d in draws]))
        # relative se of tr(HΣ) (= of B_noise) = cv(q) sqrt((1 - m/n)/m)
        cv = se / exact.b_noise / math.sqrt((1 - m / n) / m)
        at = []
        for name, spec in (("noise", plan.noise), ("one-step", plan.one_step)):
            big_m = spec.hvp_probes
            if big_m is not None and big_m < spec.n_examples:
                rel = cv * math.sqrt((1 - big_m / spec.n_examples) / big_m)
                at.append(f"{name} {big_m}/{spec.n_examples}: {100 * rel:.1f} %")
            else:
                at.append(f"{name} all {spec.n_examples}: exact")
        print(f"{plan.task:10s} {exact.b_noise:9.4f} {b.mean():9.4f} {b.std(ddof=1):8.4f} "
              f"{se:8.4f} {cv:6.2f} {t_exact:8.1f} {t_probe / args.draws:8.1f}  "
              + "; ".join(at))
    print("probed/sd/stated: the draws' mean and standard deviation of B_noise and the mean "
          "stated b_noise_se; cv(q): the probes' coefficient of variation implied; at the "
          "preset's sizes: the relative standard error of B_noise expected from the probes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
