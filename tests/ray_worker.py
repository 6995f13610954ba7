"""The Ray Train training function of tests/test_engine_ray.py (a light module: Ray's
workers import only torch, ray, numpy and the library, not pytest)."""

from __future__ import annotations

import contextlib

import numpy as np

try:
    import torch
except ImportError:  # collected by --doctest-modules without torch; tests skip
    torch = None

from tests import engine_oracle as eo
from tests import measure_oracle as orc

STEPS, MICRO, LR = 12, 4, 0.05


def full_params(model):
    """(weight, bias) of the oracle model, gathered from FSDP's shards when wrapped."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    inner = model.module if hasattr(model, "module") else model

    def read():  # copies (a numpy view would pin FSDP's storage)
        return np.array(inner.weight.detach().tolist()), float(inner.bias.detach())

    if isinstance(model, FSDP):
        with FSDP.summon_full_params(model):
            return read()
    return read()


def train_func(config):
    import ray.train
    import ray.train.torch

    from empirical_batch.integrations.ray_train import ElasticBatch, RayTrainNoiseScale

    torch.set_num_threads(1)
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    # keep the global batch of 2 workers x 2 micro-batches whatever the worker count
    plan = ElasticBatch(4 * MICRO, MICRO, policy="accumulate").at(world)
    k = plan["accumulation_steps"]
    model = orc.model()
    if config["strategy"] == "fsdp":  # what prepare_model(parallel_strategy="fsdp") wraps
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        model = FSDP(model, device_id=torch.device("cpu"))
    else:
        model = ray.train.torch.prepare_model(model)
    gns = RayTrainNoiseScale(model, local_batch_size=k * MICRO, beta=0.9)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = orc.dataset()
    params = []
    for t in range(STEPS):
        params.append(full_params(model))
        for j in range(k):
            idx = eo.batch(t, rank, j, MICRO)
            # DDP: one all-reduce per step (no_sync before the last micro-batch); FSDP
            # reduce-scatters every micro-batch
            quiet = config["strategy"] == "ddp" and j < k - 1
            with model.no_sync() if quiet else contextlib.nullcontext():
                loss = orc.loss_fn(model(x[idx]), y[idx]) / k
                loss.backward()
        gns.step(loss=loss)
        opt.step()
        opt.zero_grad()
        reported = gns.report({"loss": float(loss)})
    if rank == 0:
        torch.save({"frame": gns.estimator.history(), "params": params, "k": k,
                    "world": world, "repr": repr(gns), "rows": gns.log.rows,
                    "reported": reported},
                   config["out"])
        gns.log.to_csv(config["out"] + ".csv")
