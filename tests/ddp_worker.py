"""Worker for tests/test_measure_ddp.py, in its own light module so that spawned
processes import only torch, numpy and the library (not pytest)."""

from __future__ import annotations

import os
import sys

import numpy as np

try:
    import torch
    import torch.distributed as dist
except ImportError:  # collected by --doctest-modules without torch; tests skip
    torch = dist = None

from tests import measure_oracle as orc

WORLD, B, STEPS = 2, 8, 400
SCALE = 2.0**10


def _indices(step: int) -> np.ndarray:
    """The global batch of one step: WORLD × B examples drawn with replacement."""
    return np.random.default_rng(1000 + step).integers(0, orc.N, size=(WORLD, B))


def _worker(rank, port, out_path):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP

        from empirical_batch.measure import DDPNoiseScaleHook

        x, y = orc.dataset()
        ddp = DDP(orc.model())
        hook = DDPNoiseScaleHook(ddp, local_batch_size=B, beta=0.99)
        for t in range(STEPS):
            idx = _indices(t)[rank]
            scale = SCALE if t % 2 else 1.0  # AMP-like scaling on odd steps
            loss = orc.loss_fn(ddp(x[idx]), y[idx]) * scale
            if t == 5:
                loss = loss * float("inf")  # a non-finite step, skipped on all ranks
            loss.backward()
            hook.step(loss_scale=scale)
            ddp.zero_grad()
        if rank == 0:
            torch.save({"frame": hook.estimator.history(), "skipped": hook.skipped,
                        "b_simple": hook.b_simple}, out_path)
    finally:
        dist.barrier()  # every rank's collectives done before the group goes away
        dist.destroy_process_group()
    # Leave without finalising the interpreter: Gloo's worker threads can still hold
    # work objects whose destruction during finalisation aborts the process (SIGABRT,
    # "terminate called without an active exception"; pytorch/pytorch#179291). Everything
    # the test checks is in the file saved above. Reached only when the loop succeeded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
