"""The DeepSpeed training loop of tests/test_engine_deepspeed.py (a light module: spawned
processes import only torch, deepspeed, numpy and the library, not pytest)."""

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

STEPS, LR = 16, 0.05


def ragged_size(step: int, micro: int, rank: int, b: int) -> int:
    return int(np.random.default_rng([23, step, micro, rank]).integers(2, 2 * b - 1))


def train(rank, world, stage, k, b, token_weighted, out_path, grow_at=None):
    import deepspeed

    from empirical_batch.integrations.deepspeed import DeepSpeedNoiseScale

    deepspeed.init_distributed(dist_backend="gloo", verbose=False)
    config = {"train_micro_batch_size_per_gpu": b, "gradient_accumulation_steps": k,
              "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True,
              "gradient_clipping": 0.0, "steps_per_print": 10**9,
              "wall_clock_breakdown": False}
    model = orc.model().float()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    gns = DeepSpeedNoiseScale(engine, beta=0.9, token_weighted=token_weighted)
    x, y = orc.dataset()
    x, y = x.float(), y.float()
    params, batches = [], []
    for t in range(STEPS):
        if grow_at is not None and t == grow_at:
            gns.set_batch(2 * k * b * world)
        kk = gns.k
        params.append((np.array(engine.module.weight.detach().tolist()),
                       float(engine.module.bias.detach())))
        n = [ragged_size(t, j, rank, b) if token_weighted else b for j in range(kk)]
        step = []
        for j in range(kk):
            idx = eo.batch(t, rank, j, n[j])
            step.append(idx)
            out = engine(x[idx])
            if token_weighted:  # a sum over the rank's "tokens" of the step / their number
                loss = 0.5 * ((out - y[idx]) ** 2).sum() / sum(n)
            else:
                loss = orc.loss_fn(out, y[idx])
            engine.backward(loss)
            gns.step(n[j], tokens=n[j] if token_weighted else None, loss=loss)
            engine.step()
        batches.append(step)
    return {"frame": gns.estimator.history(), "params": params, "batches": batches,
            "rows": gns.log.rows, "repr": repr(gns), "values": gns.values()}


def worker(rank, world, port, stage, k, b, token_weighted, out_path, grow_at=None):
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                       "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    import torch.distributed as dist

    try:
        res = train(rank, world, stage, k, b, token_weighted, out_path, grow_at)
        gathered = [None] * world
        dist.all_gather_object(gathered, res["batches"])
        if rank == 0:
            res["batches"] = gathered
            torch.save(res, out_path)
            import pandas as pd

            pd.DataFrame(res["rows"]).to_csv(out_path + ".csv", index=False)
    finally:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
    # Leave without finalising the interpreter: Gloo's worker threads can abort it
    # (pytorch/pytorch#179291); everything the test checks is in the file saved above.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
