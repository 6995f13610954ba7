"""The training loop of tests/test_engine_accelerate.py (a light module: spawned processes
import only torch, accelerate, numpy and the library, not pytest)."""

from __future__ import annotations

import os
import sys

import numpy as np

try:
    import torch
except ImportError:  # collected by --doctest-modules without torch; tests skip
    torch = None

from tests import engine_oracle as eo
from tests import measure_oracle as orc

STEPS, LR = 40, 0.05


def sizes_of(step: int, micro: int, k: int, ragged: bool, b: int) -> int:
    """Examples of one micro-batch: b, or (ragged) between 2 and 2b - 2."""
    if not ragged:
        return b
    return int(np.random.default_rng([17, step, micro]).integers(2, 2 * b - 1))


def train(rank: int, world: int, k: int, b: int, ragged: bool = False,
          token_weighted: bool = False, out_path: str | None = None):
    """Train the float64 oracle model under accelerate.accumulate; returns (and on rank 0
    saves) the collector's per-step rows, the parameters each step saw and the batches."""
    from accelerate import Accelerator

    from empirical_batch.integrations.accelerate import AccelerateNoiseScale

    acc = Accelerator(gradient_accumulation_steps=k, cpu=True)
    x, y = orc.dataset()
    model = orc.model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    model, opt = acc.prepare(model, opt)
    gns = AccelerateNoiseScale(acc, model, micro_batch_size=b, beta=0.9,
                               token_weighted=token_weighted)
    params, batches = [], []
    for t in range(STEPS):
        inner = acc.unwrap_model(model)
        params.append((inner.weight.detach().numpy().copy(), float(inner.bias.detach())))
        step_batches = []
        n = [sizes_of(t, j, k, ragged, b) for j in range(k)]
        for j in range(k):
            idx = eo.batch(t, rank, j, n[j])
            step_batches.append(idx)
            with acc.accumulate(model):
                out = model(x[idx])
                if token_weighted:  # a sum over the step's "tokens" / their number
                    loss = 0.5 * ((out - y[idx]) ** 2).sum() / sum(n)
                else:
                    loss = orc.loss_fn(out, y[idx])
                acc.backward(loss)
                gns.step(n[j], tokens=n[j] if token_weighted else None, loss=loss)
                opt.step()
                opt.zero_grad()
        batches.append(step_batches)
    result = {"frame": gns.estimator.history(), "params": params, "batches": batches,
              "rows": gns.log.rows, "repr": repr(gns), "values": gns.values()}
    if out_path is not None and rank == 0:
        torch.save(result, out_path)
        gns.log.to_csv(out_path + ".csv")
    return result


def ddp_worker(rank, world, port, k, b, out_path):
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    import torch.distributed as dist

    try:
        train(rank, world, k, b, out_path=out_path)
    finally:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
    # Leave without finalising the interpreter: Gloo's worker threads can abort it
    # (pytorch/pytorch#179291); everything the test checks is in the file saved above.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def spawn_entry(rank, world, port, k, b, out_path):
    ddp_worker(rank, world, port, k, b, out_path)
