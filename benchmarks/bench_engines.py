"""Overhead of the engine collectors on a training step, on CPU.

For the MLP of ``bench_measure.py`` (256-512-512-10), times one optimizer step of each
engine without and with its collector, interleaved (A B A B ...), and prints the median
per-step times and the overhead in % of the plain step, beside a control (the plain step
timed a second time in each round, whose difference from the plain step is the noise):

- Accelerate, one process: ``k`` micro-batches under ``accelerator.accumulate``, plain
  against ``AccelerateNoiseScale`` (micro-batch hooks);
- on 2 gloo processes (timed on rank 0): Accelerate DDP (``AccelerateNoiseScale``: the
  DDP communication hook), FSDP1 ``FullyShardedDataParallel`` (``FSDP1NoiseScale``, what
  ``RayTrainNoiseScale`` uses; Ray's DDP path is the DDP hook) and DeepSpeed ZeRO stages
  0 and 2 (``DeepSpeedNoiseScale``), each with ``k`` micro-batches per step.

An engine that is not installed is skipped with a note. Usage::

    python benchmarks/bench_engines.py            # CPU, 1 thread per process
    python benchmarks/bench_engines.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import os
import socket
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from bench_measure import interleaved, make

K = 4  # micro-batches per step


def _times(fns: dict, reps: int, steps: int) -> tuple[float, float, float]:
    """Median plain, collector and control step times: the control is the plain step
    timed a second time in each round (its difference from plain is the noise)."""
    t = interleaved({**fns, "control": fns["plain"]}, reps, steps, torch.device("cpu"))
    return t["plain"], t["collector"], t["control"]


def _have(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _accelerate_one(batch: int, reps: int, steps: int) -> list[tuple]:
    from accelerate import Accelerator

    from empirical_batch.integrations.accelerate import AccelerateNoiseScale

    acc = Accelerator(gradient_accumulation_steps=K, cpu=True)
    base, x, y, loss_fn = make("mlp", batch, torch.device("cpu"))
    micro = batch // K
    fns = {}
    for key, measured in (("plain", False), ("collector", True)):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        model, opt = acc.prepare(model, opt)
        gns = AccelerateNoiseScale(acc, model, micro_batch_size=micro) if measured else None

        def step(model=model, opt=opt, gns=gns):
            for j in range(K):
                with acc.accumulate(model):
                    part = slice(j * micro, (j + 1) * micro)
                    acc.backward(loss_fn(model(x[part]), y[part]))
                    if gns is not None:
                        gns.step()
                    opt.step()
                    opt.zero_grad()
        fns[key] = step
    return [("Accelerate, one process", *_times(fns, reps, steps))]


def _worker(rank, port, batch, reps, steps, out):
    import torch.distributed as dist

    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                       "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    rows, notes = [], []
    try:
        dist.init_process_group("gloo", rank=rank, world_size=2)
        base, x, y, loss_fn = make("mlp", batch, torch.device("cpu"))
        micro = batch // K

        def accumulate(model, no_sync, after_backward=None, engine=None):
            for j in range(K):
                part = slice(j * micro, (j + 1) * micro)
                quiet = no_sync is not None and j < K - 1
                with no_sync() if quiet else contextlib.nullcontext():
                    loss = loss_fn(model(x[part]), y[part]) / (1 if engine else K)
                    (engine.backward if engine else torch.Tensor.backward)(loss)
                    if after_backward is not None:
                        after_backward()
                    if engine is not None:
                        engine.step()

        if _have("accelerate"):
            from accelerate import Accelerator

            from empirical_batch.integrations.accelerate import AccelerateNoiseScale

            acc = Accelerator(gradient_accumulation_steps=K, cpu=True)
            fns = {}
            for key, measured in (("plain", False), ("collector", True)):
                model = copy.deepcopy(base)
                opt = torch.optim.SGD(model.parameters(), lr=1e-4)
                model, opt = acc.prepare(model, opt)
                gns = AccelerateNoiseScale(acc, model, micro) if measured else None

                def step(model=model, opt=opt, gns=gns):
                    for j in range(K):
                        with acc.accumulate(model):
                            part = slice(j * micro, (j + 1) * micro)
                            acc.backward(loss_fn(model(x[part]), y[part]))
                            if gns is not None:
                                gns.step()
                            opt.step()
                            opt.zero_grad()
                fns[key] = step
            rows.append(("Accelerate DDP (2 ranks, gloo)", *_times(fns, reps, steps)))
        else:
            notes.append("accelerate not installed")

        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        from empirical_batch.measure.fsdp1 import FSDP1NoiseScale

        fns = {}
        for key, measured in (("plain", False), ("collector", True)):
            model = FSDP(copy.deepcopy(base), device_id=torch.device("cpu"))
            opt = torch.optim.SGD(model.parameters(), lr=1e-4)
            gns = FSDP1NoiseScale(model, local_batch_size=batch) if measured else None

            def step(model=model, opt=opt, gns=gns):
                accumulate(model, model.no_sync)
                if gns is not None:
                    gns.step()
                opt.step()
                opt.zero_grad()
            fns[key] = step
        rows.append(("FSDP1 (2 ranks, gloo; Ray Train's fsdp)", *_times(fns, reps, steps)))

        if _have("deepspeed"):
            import deepspeed

            from empirical_batch.integrations.deepspeed import DeepSpeedNoiseScale

            deepspeed.init_distributed(dist_backend="gloo", verbose=False)
            for stage in (0, 2):
                config = {"train_micro_batch_size_per_gpu": micro,
                          "gradient_accumulation_steps": K,
                          "zero_optimization": {"stage": stage},
                          "zero_allow_untested_optimizer": True, "steps_per_print": 10**9}
                fns = {}
                for key, measured in (("plain", False), ("collector", True)):
                    model = copy.deepcopy(base)
                    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
                    engine, *_ = deepspeed.initialize(model=model, optimizer=opt,
                                                      config=config)
                    gns = DeepSpeedNoiseScale(engine) if measured else None

                    def step(engine=engine, gns=gns):
                        accumulate(engine, None, gns.step if gns else None, engine=engine)
                    fns[key] = step
                rows.append((f"DeepSpeed ZeRO-{stage} (2 ranks, gloo)",
                             *_times(fns, reps, steps)))
        else:
            notes.append("deepspeed not installed")
        if rank == 0:
            torch.save({"rows": rows, "notes": notes}, out)
    finally:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # Gloo's threads can abort interpreter finalisation (pytorch#179291)


def _two_ranks(batch, reps, steps):
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "t.pt")
        mp.spawn(_worker, args=(port, batch, reps, steps, out), nprocs=2)
        return torch.load(out, weights_only=False)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=256, help=f"examples per step (k={K})")
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.reps, args.steps = 2, 1
    torch.set_num_threads(1)
    rows, notes = [], []
    if _have("accelerate"):
        rows += _accelerate_one(args.batch, args.reps, args.steps)
    res = _two_ranks(args.batch, args.reps, args.steps)
    rows += res["rows"]
    notes += res["notes"]
    print(f"MLP, {args.batch} examples per step in {K} micro-batches; median of "
          f"{args.reps} x {args.steps} steps")
    print(f"| {'engine':42s} | plain ms | with collector ms | overhead | control ms | "
          "control - plain |")
    print(f"| {'-' * 42} | --- | --- | --- | --- | --- |")
    for name, plain, measured, control in rows:
        print(f"| {name:42s} | {plain * 1e3:8.2f} | {measured * 1e3:17.2f} | "
              f"{100 * (measured / plain - 1):+7.1f}% | {control * 1e3:10.2f} | "
              f"{100 * (control / plain - 1):+14.1f}% |")
    for note in notes:
        print(f"skipped: {note}")


if __name__ == "__main__":
    main()
