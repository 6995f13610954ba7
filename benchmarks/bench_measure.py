"""Overhead of the noise-scale collectors on a training step (CPU; CUDA if available).

For a small MLP and a small transformer, times a plain training step against the same
step with each collector and prints the overhead as % of the plain step:

- micro-batch: ``GradientNoiseScale`` on a k-micro-batch accumulation step
  (baseline: the same accumulation step without it);
- per-example (in step): ``PerExampleNoiseScale`` hooks on the ordinary step
  (baseline: the plain single-batch step);
- per-example (extra pass): ``per_example_sq_norms`` called once per step;
- DDP hook: ``DDPNoiseScaleHook`` on a 2-rank gloo DDP step (baseline: DDP with its
  default all-reduce), CPU only, timed on rank 0.

Variants are interleaved (A B C A B C ...) and the median per-step time is reported,
which keeps the comparison fair on a shared, noisy machine. ``--timer cpu`` times the
process's CPU time instead of wall-clock time (CPU only, single-process rows; the DDP
rows stay wall-clock): on a machine shared with other jobs it leaves out the time this
process waits for a core, which wall-clock medians still pick up.

Usage::

    python benchmarks/bench_measure.py            # CPU, 1 thread per process
    python benchmarks/bench_measure.py --device cuda --reps 15
    python benchmarks/bench_measure.py --quick    # smoke run
    python benchmarks/bench_measure.py --timer cpu --no-ddp   # CPU time, shared machine
"""

from __future__ import annotations

import argparse
import copy
import os
import socket
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from empirical_batch.measure import (
    DDPNoiseScaleHook,
    GradientNoiseScale,
    PerExampleNoiseScale,
    per_example_sq_norms,
)

K = 4  # micro-batches per step for the accumulation benchmark
# torch.func has no batching rule for CPU flash attention; the vmap path still works
warnings.filterwarnings("ignore", message="There is a performance drop")


# ----------------------------------------------------------------- models
class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyTransformer(nn.Module):
    def __init__(self, vocab=256, d=128, heads=4, layers=2, seq=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tok):
        return self.head(self.ln(self.blocks(self.emb(tok) + self.pos)))


def lm_loss(logits, tok):
    """Next-token cross entropy, mean over all positions (= mean of per-example means)."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tok[:, 1:].reshape(-1))


def make(name, batch, device, d_model=128):
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if name == "mlp":
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10))
        x = torch.randn(batch, 256, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        return model.to(device), x.to(device), y.to(device), F.cross_entropy
    tok = torch.randint(0, 256, (batch, 64), generator=g)
    return TinyTransformer(d=d_model).to(device), tok.to(device), tok.to(device), lm_loss


# ---------------------------------------------------------------- timing
def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def interleaved(fns: dict, reps: int, steps: int, device, clock=time.perf_counter) -> dict:
    for fn in fns.values():  # warm-up
        for _ in range(3):
            fn()
    times = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            sync(device)
            t0 = clock()
            for _ in range(steps):
                fn()
            sync(device)
            times[k].append((clock() - t0) / steps)
    return {k: statistics.median(v) for k, v in times.items()}


def single_process(name, batch, reps, steps, device, d_model=128, clock=time.perf_counter):
    base, x, y, loss_fn = make(name, batch, device, d_model)
    mb = batch // K
    variants = {}

    def train_step(model, opt, collector=None, accumulate=False, extra=False):
        def step():
            if accumulate:
                for j in range(K):
                    sl = slice(j * mb, (j + 1) * mb)
                    (loss_fn(model(x[sl]), y[sl]) / K).backward()
            else:
                loss_fn(model(x), y).backward()
            if collector is not None:
                collector.step()
            if extra:
                per_example_sq_norms(model, loss_fn, x, y)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    def fresh():
        m = copy.deepcopy(base)
        return m, torch.optim.SGD(m.parameters(), lr=1e-4)

    m, o = fresh()
    variants["plain, k=4 accumulation"] = train_step(m, o, accumulate=True)
    m, o = fresh()
    variants["micro-batch (GradientNoiseScale)"] = train_step(
        m, o, GradientNoiseScale(m, micro_batch_size=mb, accumulation_steps=K), accumulate=True)
    m, o = fresh()
    variants["plain, 1 batch"] = train_step(m, o)
    m, o = fresh()
    variants["per-example in step (PerExampleNoiseScale)"] = train_step(
        m, o, PerExampleNoiseScale(m))
    m, o = fresh()
    variants["per-example extra pass (per_example_sq_norms)"] = train_step(m, o, extra=True)
    t = interleaved(variants, reps, steps, device, clock)
    rows = []
    for key, ref in [("micro-batch (GradientNoiseScale)", "plain, k=4 accumulation"),
                     ("per-example in step (PerExampleNoiseScale)", "plain, 1 batch"),
                     ("per-example extra pass (per_example_sq_norms)", "plain, 1 batch")]:
        rows.append((name, key, t[ref], t[key]))
    return rows


# ------------------------------------------------------------------- DDP
def _ddp_worker(rank, port, name, batch, reps, steps, threads, out, d_model=128):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    try:
        base, x, y, loss_fn = make(name, batch, torch.device("cpu"), d_model)
        fns = {}
        for key, hooked in (("DDP plain", False), ("DDP + DDPNoiseScaleHook", True)):
            m = DDP(copy.deepcopy(base))
            opt = torch.optim.SGD(m.parameters(), lr=1e-4)
            hook = DDPNoiseScaleHook(m, local_batch_size=batch) if hooked else None

            def step(m=m, opt=opt, hook=hook):
                loss_fn(m(x), y).backward()
                if hook is not None:
                    hook.step()
                opt.step()
                opt.zero_grad(set_to_none=True)
            fns[key] = step
        t = interleaved(fns, reps, steps, torch.device("cpu"))
        if rank == 0:
            torch.save(t, out)
    finally:
        dist.destroy_process_group()


def ddp(name, batch, reps, steps, threads, d_model=128):
    import tempfile

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "t.pt")
        mp.spawn(_ddp_worker, args=(port, name, batch, reps, steps, threads, out, d_model),
                 nprocs=2)
        t = torch.load(out)
    return [(name, "DDP hook (2 ranks, gloo)", t["DDP plain"], t["DDP + DDPNoiseScaleHook"])]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--steps", type=int, default=3, help="steps per timed repetition")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process (CPU)")
    p.add_argument("--no-ddp", action="store_true")
    p.add_argument("--models", default="mlp,transformer", help="comma-separated subset")
    p.add_argument("--mlp-batch", type=int, default=256, help=f"examples per step (k={K})")
    p.add_argument("--transformer-batch", type=int, default=16)
    p.add_argument("--d-model", type=int, default=128, help="transformer width")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--timer", choices=("wall", "cpu"), default="wall",
                   help="wall-clock time, or this process's CPU time (CPU device only)")
    a = p.parse_args(argv)
    if a.timer == "cpu" and a.device != "cpu":
        p.error("--timer cpu needs --device cpu (GPU work is not CPU time)")
    clock = time.process_time if a.timer == "cpu" else time.perf_counter
    if a.quick:
        a.reps, a.steps = 2, 1
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    batches = {"mlp": a.mlp_batch, "transformer": a.transformer_batch}
    batches = {m: batches[m] for m in a.models.split(",")}
    rows = []
    for name, batch in batches.items():
        rows += single_process(name, batch, a.reps, a.steps, device, a.d_model, clock)
        if not a.no_ddp and device.type == "cpu":
            rows += ddp(name, batch, a.reps, a.steps, a.threads, a.d_model)
    sizes = ", ".join(f"{m}={b}" + (f"x64 tokens d={a.d_model}" if m == "transformer" else "")
                      for m, b in batches.items())
    print(f"device={device} torch={torch.__version__} threads={a.threads} reps={a.reps} "
          f"steps/rep={a.steps} batch: {sizes}, k={K}, timer={a.timer}")
    print("| model | collector | plain step (ms) | with collector (ms) | overhead |")
    print("| --- | --- | ---: | ---: | ---: |")
    for model, key, ref, t in rows:
        over = 100 * (t / ref - 1)
        print(f"| {model} | {key} | {ref * 1e3:.2f} | {t * 1e3:.2f} | {over:+.1f}% |")


if __name__ == "__main__":
    main()
