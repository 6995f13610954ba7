"""The OLMo-core training run of tests/test_engine_olmo_core.py (a light module: spawned
processes import only torch, olmo_core, numpy and the library, not pytest).

A real ``olmo_core.train.Trainer`` with ``BasicTrainModule`` on CPU: a tiny language
model (embedding and linear head, float32), SGD, ``WORLD`` gloo processes with the model
wrapped in torch's ``DistributedDataParallel`` (one process: the bare model), the rank's
batch split into micro-batches by ``rank_microbatch_size`` and ragged loss tokens from a
random ``label_mask``. What each step saw (parameters, every rank's batch) and what the
trainer's metric loggers received are saved for the float64 recomputation."""

from __future__ import annotations

import os
import sys

import numpy as np

try:
    import torch
except ImportError:  # collected by --doctest-modules without torch; tests skip
    torch = None

VOCAB, DIM, SEQ, INSTANCES, PER_MICRO, LR = 11, 6, 6, 6, 2, 0.5


def make_batch(step: int, rank: int, seed: int = 4100) -> dict:
    """The rank's batch of one step: token ids and a ragged label mask (fixed by place)."""
    rng = np.random.default_rng([seed, step, rank])
    ids = rng.integers(0, VOCAB, size=(INSTANCES, SEQ))
    mask = rng.random((INSTANCES, SEQ)) < 0.7
    mask[:, 1] = True  # every instance keeps a loss token (label of position 0)
    return {"input_ids": torch.tensor(ids, dtype=torch.long), "label_mask": torch.tensor(mask)}


def tiny_lm():
    class TinyLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(5)
            self.emb = torch.nn.Embedding(VOCAB, DIM)
            self.head = torch.nn.Linear(DIM, VOCAB)
            with torch.no_grad():
                for p in self.parameters():
                    p.copy_(torch.randn(p.shape, generator=g) * 0.5)

        def forward(self, input_ids):
            return self.head(torch.tanh(self.emb(input_ids)))

    return TinyLM()


def tiny_transformer():
    """A one-layer OLMo-core ``Transformer`` (llama-like, float32)."""
    from olmo_core.nn.transformer import TransformerConfig

    torch.manual_seed(7)
    config = TransformerConfig.llama_like(
        d_model=16, vocab_size=VOCAB, n_layers=1, n_heads=2, hidden_size_multiple_of=16
    )
    return config.build(init_device="cpu")


def _classes():
    from olmo_core.data.data_loader import DataLoaderBase
    from olmo_core.train.callbacks import Callback
    from olmo_core.train.train_module import BasicTrainModule

    class Module(BasicTrainModule):
        """BasicTrainModule without flop counting (its own raises NotImplementedError,
        which the trainer calls every step)."""

        def num_flops_per_token(self, seq_len):
            return None

        def global_num_flops_in_batch(self, batch):
            return None

    class Loader(DataLoaderBase):
        def __init__(self, steps, **kw):
            super().__init__(**kw)
            self.steps = steps

        @property
        def total_batches(self):
            return self.steps

        def state_dict(self):
            return {"batches_processed": self.batches_processed, "epoch": self._epoch}

        def load_state_dict(self, state):
            self.batches_processed = state["batches_processed"]
            self._epoch = state["epoch"]

        def reshuffle(self, epoch=None, **kwargs):
            self._epoch = epoch or 1

        def _iter_batches(self):
            for t in range(self.batches_processed, self.steps):
                yield make_batch(t, self.dp_rank)

        def get_mock_batch(self):
            return make_batch(10**6, self.dp_rank)

    class Recorder(Callback):
        """What each step saw (parameters before the step, the batch) and every metric
        the trainer passed to its loggers."""

        priority = -100  # after the others

        def __init__(self, model):
            self.model = model
            self.params, self.batches, self.metrics = [], [], {}

        def pre_step(self, batch):
            self.params.append(
                {k: v.detach().double().clone().numpy() for k, v in self.model.state_dict().items()}
            )
            self.batches.append({k: v.clone().numpy() for k, v in batch.items()})

        def log_metrics(self, step, metrics):
            self.metrics.setdefault(step, {}).update(metrics)  # a step may come twice

    return Loader, Recorder, Module


def _train_module(kind, world):
    """(train module, the model whose parameters the step sees)."""
    if kind == "transformer":  # OLMo-core's own module; DDP is its dp_config "ddp"
        from olmo_core.distributed.parallel import DataParallelType
        from olmo_core.optim import AdamWConfig
        from olmo_core.train.train_module import (
            TransformerDataParallelConfig,
            TransformerTrainModule,
        )

        dp = TransformerDataParallelConfig(name=DataParallelType.ddp) if world > 1 else None
        module = TransformerTrainModule(
            tiny_transformer(),
            AdamWConfig(lr=1e-2),
            rank_microbatch_size=PER_MICRO * SEQ,
            max_sequence_length=SEQ,
            dp_config=dp,
            device=torch.device("cpu"),
        )
        return module, module.model
    *_, Module = _classes()
    model = tiny_lm()
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    inner = model.module if world > 1 else model
    optim = torch.optim.SGD(model.parameters(), lr=LR)
    return Module(model, optim, rank_microbatch_size=PER_MICRO * SEQ), inner


def train(rank, world, steps, folder, stop_at=None, kind="basic"):
    from olmo_core.train import Duration, TrainerConfig
    from olmo_core.train.callbacks import CheckpointerCallback

    from empirical_batch.integrations.olmo_core import OLMoCoreNoiseScale

    Loader, Recorder, _ = _classes()
    module, inner = _train_module(kind, world)
    loader = Loader(
        steps,
        work_dir=folder,
        global_batch_size=world * INSTANCES * SEQ,
        dp_world_size=world,
        dp_rank=rank,
        fs_local_rank=rank,
    )
    gns = OLMoCoreNoiseScale(beta=0.9, log_path=os.path.join(folder, "gns.csv"))
    recorder = Recorder(inner)
    config = TrainerConfig(
        save_folder=folder,
        work_dir=folder,
        save_overwrite=True,
        metrics_collect_interval=1,
        max_duration=Duration.steps(steps),
        cancel_check_interval=10**6,
        hard_stop=Duration.steps(stop_at) if stop_at else None,
        callbacks={
            "noise_scale": gns,
            "recorder": recorder,
            # synchronous saves: OLMo-core's asynchronous save records its duration
            # from a thread at whatever step each rank has reached, and in a run of a few
            # steps the ranks then reduce different sets of metrics and wait on each
            # other (seen with ai2-olmo-core 3.0.0 on gloo)
            "checkpointer": CheckpointerCallback(
                save_interval=10**6, ephemeral_save_interval=None, save_async=False
            ),
        },
    )
    trainer = config.build(module, loader)
    trainer.fit()
    if stop_at:
        trainer.save_checkpoint()
    return {
        "frame": gns.estimator.history(),
        "params": recorder.params,
        "batches": recorder.batches,
        "metrics": recorder.metrics,
        "rows": gns.log.rows,
        "repr": repr(gns),
        "values": gns.values(),
        "state": gns.state_dict(),
        "global_step": trainer.global_step,
    }


def worker(rank, world, port, steps, folder, out_path, stop_at=None, kind="basic"):
    os.environ.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            "NUM_NODES": "1",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OLMO_SHARED_FS": "1",
            "FS_LOCAL_RANK": str(rank),
        }
    )
    torch.set_num_threads(1)
    import faulthandler

    # a rank that hangs exits with every thread's stack instead of stalling the test
    faulthandler.dump_traceback_later(300, exit=True)
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        res = train(rank, world, steps, folder, stop_at=stop_at, kind=kind)
        gathered = [None] * world
        dist.all_gather_object(gathered, res["batches"])
        if rank == 0:
            res["batches"] = gathered
            torch.save(res, out_path)
    finally:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
    # Leave without finalising the interpreter: Gloo's worker threads can abort it
    # (pytorch/pytorch#179291); everything the test checks is in the file saved above.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
