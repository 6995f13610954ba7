"""Worker for tests/test_measure_fsdp.py (a light module: spawned processes import only
torch, numpy and the library, not pytest)."""

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

WORLD, B, STEPS = 2, 8, 60


def indices(step: int) -> np.ndarray:
    """The global batch of one step: WORLD x B examples drawn with replacement."""
    return np.random.default_rng(2000 + step).integers(0, orc.N, size=(WORLD, B))


def worker(rank, port, out_path, micro):
    """Train the oracle model under fully_shard; `micro` accumulation micro-batches per
    step (FSDP reduce-scatters after each). Misplaced calls on purpose: step() after
    gradient clipping on step 3 and after zero_grad(set_to_none=False) on step 4."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    try:
        from torch.distributed.fsdp import fully_shard

        from empirical_batch.measure.fsdp import FSDPNoiseScale

        x, y = orc.dataset()
        x, y = x.float(), y.float()
        model = orc.model().float()  # float32: FSDP averages in the collective (AVG)
        fully_shard(model)
        gns = FSDPNoiseScale(model, local_batch_size=B, beta=0.99)
        for t in range(STEPS):
            idx = indices(t)[rank]
            for part in np.array_split(idx, micro):
                loss = orc.loss_fn(model(x[part]), y[part]) / micro
                loss.backward()
            if t == 3:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
            if t == 4:
                model.zero_grad(set_to_none=False)
            gns.step()
            model.zero_grad()
        gns.remove()
        if rank == 0:
            torch.save({"frame": gns.estimator.history(), "b_simple": gns.b_simple,
                        "repr": repr(gns)}, out_path)
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
