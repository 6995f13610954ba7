"""Worker for tests/test_measure_fsdp1.py (a light module: spawned processes import only
torch, numpy and the library, not pytest)."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

try:
    import torch
    import torch.distributed as dist
except ImportError:  # collected by --doctest-modules without torch; tests skip
    torch = dist = None

from tests import engine_oracle as eo
from tests import measure_oracle as orc

WORLD, MICRO, STEPS, LR = 2, 4, 10, 0.05


def two_layers():
    """A float64 model of two linear layers (an FSDP unit each, under a root without parameters)."""
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(orc.D, 3), torch.nn.Tanh(),
                               torch.nn.Linear(3, 1)).double()


def worker(rank, port, out_path, strategy, k, no_sync):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    torch.set_num_threads(1)
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import ShardingStrategy

        from empirical_batch.measure.fsdp1 import FSDP1NoiseScale

        cpu = torch.device("cpu")
        how = {"sharding_strategy": getattr(ShardingStrategy, strategy), "device_id": cpu}
        net = two_layers()
        net[0], net[2] = FSDP(net[0], **how), FSDP(net[2], **how)
        model = FSDP(net, **how)
        gns = FSDP1NoiseScale(model, local_batch_size=k * MICRO, beta=0.9)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        x, y = orc.dataset()
        states = []
        for t in range(STEPS):
            with FSDP.summon_full_params(model):
                states.append({n: p.detach().clone() for n, p in net.named_parameters()})
            for j in range(k):
                idx = eo.batch(t, rank, j, MICRO, seed=4000)
                quiet = no_sync and j < k - 1
                with model.no_sync() if quiet else contextlib.nullcontext():
                    (orc.loss_fn(model(x[idx]), y[idx]) / k).backward()
            if t == 3:  # clipping before step() changes nothing
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
            gns.step()
            opt.step()
            opt.zero_grad()
        if rank == 0:
            torch.save({"frame": gns.estimator.history(), "states": states,
                        "repr": repr(gns)}, out_path)
    finally:
        dist.barrier()
        dist.destroy_process_group()
    # Gloo's worker threads can abort interpreter finalisation (pytorch/pytorch#179291)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def reference(states, k, no_sync):
    """(sq_small, b_small, sq_big, b_big) per step in float64 by autograd on an unwrapped
    copy, from the micro-batches of every rank."""
    x, y = orc.dataset()
    net = two_layers()
    rows = []
    for t, state in enumerate(states):
        clean = {n.replace("_fsdp_wrapped_module.", ""): v for n, v in state.items()}
        net.load_state_dict(clean)
        micro = []
        for r in range(WORLD):
            for j in range(k):
                idx = eo.batch(t, r, j, MICRO, seed=4000)
                net.zero_grad()
                orc.loss_fn(net(x[idx]), y[idx]).backward()
                micro.append(np.concatenate([p.grad.numpy().ravel()
                                             for p in net.parameters()]))
        if no_sync:  # one reduction per step: each rank's mean over its k micro-batches
            local = [np.mean(micro[r * k:(r + 1) * k], axis=0) for r in range(WORLD)]
            rows.append(eo.replicas(local, k * MICRO))
        else:
            rows.append(eo.weighted(micro, [MICRO] * len(micro), [1.0] * len(micro)))
    return np.array(rows, dtype=float)
