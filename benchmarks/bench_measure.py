"""Overhead of the noise-scale collectors on a training step (CPU; CUDA if available).

For a small MLP, small decoders of several shapes (``transformer``: 16 x 64 tokens,
width 128, 2 blocks; ``b4t32``: 4 x 32 tokens, where the fixed costs show; ``deep``: 16
blocks of width 64, 198 parameter tensors, where the per-tensor costs show; ``t128`` to
``t1024``: sequences of 128 to 1024 tokens at width 128, where the per-example forms'
regimes change; see ``SHAPES``) and a GPT-2-small-sized decoder (``gpt2``: 12 layers,
width 768, 12 heads, vocabulary 50257 tied to the output layer, 124M parameters;
sequence 1024 by default, bf16 autocast with ``--bf16``), times a plain training step
against the same step with each collector and prints the overhead as % of the plain step:

- micro-batch: ``GradientNoiseScale`` on a k-micro-batch accumulation step
  (baseline: the same accumulation step without it);
- per-example (in step): ``PerExampleNoiseScale`` hooks on the ordinary step
  (baseline: the plain single-batch step);
- per-example (extra pass): ``per_example_sq_norms`` called once per step;
- LayerNorm-only (decoders): ``PerExampleNoiseScale(params="layernorm")`` next to a plain
  nanoGNS-style re-implementation (hooks on the LayerNorm layers, per-example
  ``|Σ_t δ ⊙ x̂|²`` and ``|Σ_t δ|²`` summed on the device; no checks);
- control: the plain step timed a second time, as a variant of its own; its "overhead"
  is the timing noise of the run;
- DDP hook: ``DDPNoiseScaleHook`` on a 2-rank gloo DDP step (baseline: DDP with its
  default all-reduce), CPU only, timed on rank 0; beside it a plain re-implementation of
  the k-diffusion-style hook (squared norm of each bucket before and after the
  all-reduce, summed on the device; no checks), as the reference cost.

For ``gpt2`` the rows are the production settings: the collectors with ``sync_every=100``
(one device-to-host transfer per 100 steps) next to ``sync_every=1``, and the full
per-example collector. The extra-pass row is left out for it (a second backward pass). A
batch smaller than k has no micro-batch rows.

Beside them, in the same interleaved run, the same plain step with another library's
per-example norms where it is installed (``pip install .[bench]``; see
``measure_peers.py``: ``torch.func`` vmap(grad) as an extra pass and as the whole step
(single pass), Opacus ``GradSampleModule`` and ghost norms, BackPACK ``BatchL2Grad``); a
peer that is missing or refuses the model is skipped with a note under the table. Two
more tables follow: each method's per-example squared norms against a float64 reference
(one backward pass per example on a float64 copy of the model), and the ATen ops and
Python function calls each collector adds per step for 4 and 200 parameter tensors
(``op_counts.py``; device-independent).

Variants are interleaved (A B C A B C ...) and the median per-step time is reported,
which keeps the comparison fair on a shared, noisy machine. ``--timer cpu`` times the
process's CPU time instead of wall-clock time (CPU only, single-process rows; the DDP
rows stay wall-clock): on a machine shared with other jobs it leaves out the time this
process waits for a core, which wall-clock medians still pick up.

Usage::

    python benchmarks/bench_measure.py            # CPU, 1 thread per process (~10 min)
    python benchmarks/bench_measure.py --device cuda --reps 15
    python benchmarks/bench_measure.py --quick    # smoke run
    python benchmarks/bench_measure.py --timer cpu --no-ddp   # CPU time, shared machine
    python benchmarks/bench_measure.py --device cuda --models mlp,transformer,gpt2 \
        --bf16 --gpt2-batch 32 --reps 5 --steps 2 --warmup 2 --no-ddp   # whole table, GPU
"""

from __future__ import annotations

import argparse
import copy
import math
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

sys.path.insert(0, os.path.dirname(__file__))

import op_counts
from measure_peers import PEERS, Skip, peer_norms, peer_step

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
    """A decoder with token and position embedding layers (positions given per example,
    so that every parameter has per-example gradients); ``tied=True`` shares the token
    embedding with the output layer (GPT-2's layout)."""

    def __init__(self, vocab=256, d=128, heads=4, layers=2, seq=64, tied=False):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos_emb = nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=not tied)
        if tied:
            self.head.weight = self.emb.weight

    def forward(self, tok):
        pos = torch.arange(tok.shape[1], device=tok.device).expand_as(tok).contiguous()
        h = self.emb(tok) + self.pos_emb(pos)
        return self.head(self.ln(self.blocks(h)))


class LayerNormReference:
    """nanoGNS-style LayerNorm-only per-example norms, written plainly as the reference
    cost: a forward hook keeps x̂, a tensor hook adds |Σ_t δ⊙x̂|² + |Σ_t δ|² per example
    to a device accumulator; the two-batch sums are read every ``sync_every`` steps."""

    def __init__(self, model, sync_every=100):
        self.small = self.acc = None
        self.steps, self.sync_every = 0, sync_every
        self.params = [p for m in model.modules() if isinstance(m, nn.LayerNorm)
                       for p in m.parameters()]
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.register_forward_hook(self._fwd)

    def _fwd(self, m, inp, out):
        xhat = F.layer_norm(inp[0].detach().float(), m.normalized_shape, eps=m.eps)

        def on_grad(d):
            d = d.float()
            b = d.shape[0]
            sq = (d * xhat).sum(1).square().sum(-1) + d.sum(1).square().sum(-1)
            sq = sq.sum() * b  # Σ_i |g_i|² × B (mean-loss gradients are g_i / B)
            self.small = sq if self.small is None else self.small + sq

        out.register_hook(on_grad)

    def step(self):
        big = torch.stack(torch._foreach_norm([p.grad for p in self.params])).square().sum()
        pair = torch.stack([self.small, big])  # both stay on the device
        self.small = None
        self.acc = pair if self.acc is None else self.acc + pair
        self.steps += 1
        if self.steps % self.sync_every == 0:
            self.acc.tolist()
            self.acc = None


def lm_loss(logits, tok):
    """Next-token cross entropy, mean over all positions (= mean of per-example means)."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tok[:, 1:].reshape(-1))


# decoders of other shapes (vocabulary 256, 4 heads): name -> (batch, sequence, width,
# layers); "transformer" is (--transformer-batch, 64, --d-model, 2)
SHAPES = {
    "b4t32": (4, 32, 128, 2),  # a small batch of short sequences: the fixed costs show
    "deep": (8, 32, 64, 16),  # 16 blocks: 198 parameter tensors, the per-tensor costs show
    "t128": (8, 128, 128, 2),  # longer sequences: the per-example forms' regimes
    "t256": (4, 256, 128, 2),
    "t512": (2, 512, 128, 2),
    "t1024": (2, 1024, 128, 2),
}


def shape(name, batch, d_model=128):
    """(batch, sequence, width, layers) of a decoder model name."""
    if name == "transformer":
        return batch, 64, d_model, 2
    return SHAPES[name]


def make(name, batch, device, d_model=128, seq=1024):
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if name == "gpt2":  # GPT-2 small: 124M parameters
        model = TinyTransformer(vocab=50257, d=768, heads=12, layers=12, seq=seq, tied=True)
        tok = torch.randint(0, 50257, (batch, seq), generator=g)
        return model.to(device), tok.to(device), tok.to(device), lm_loss
    if name == "mlp":
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10))
        x = torch.randn(batch, 256, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        return model.to(device), x.to(device), y.to(device), F.cross_entropy
    _, t, d, layers = shape(name, batch, d_model)
    tok = torch.randint(0, 256, (batch, t), generator=g)
    model = TinyTransformer(d=d, layers=layers, seq=t)
    return model.to(device), tok.to(device), tok.to(device), lm_loss


# ---------------------------------------------------------------- timing
def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


WARMUP = 3  # untimed steps of each variant before the timed repetitions (--warmup)


def interleaved(fns: dict, reps: int, steps: int, device, clock=time.perf_counter) -> dict:
    for fn in fns.values():  # warm-up
        for _ in range(WARMUP):
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


def single_process(name, batch, reps, steps, device, d_model=128, clock=time.perf_counter,
                   bf16=False, seq=1024, peers=PEERS, notes=None):
    base, x, y, loss_fn = make(name, batch, device, d_model, seq)
    mb = batch // K
    variants = {}
    realistic = name == "gpt2"

    def fwd_loss(model, xs, ys):
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            return loss_fn(model(xs), ys)

    def train_step(model, opt, collector=None, accumulate=False, extra=False):
        def step():
            if accumulate:
                for j in range(K):
                    sl = slice(j * mb, (j + 1) * mb)
                    (fwd_loss(model, x[sl], y[sl]) / K).backward()
            else:
                fwd_loss(model, x, y).backward()
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

    sync = 100 if realistic else 1
    pairs = []  # (variant, its baseline)

    def add(key, ref, make_collector=None, **kw):
        m, o = fresh()
        variants[key] = train_step(m, o, make_collector(m) if make_collector else None, **kw)
        if ref is not None:
            pairs.append((key, ref))

    if mb >= 1:  # (a batch smaller than k: no micro-batch rows)
        add("plain, k=4 accumulation", None, accumulate=True)
        add("micro-batch (GradientNoiseScale)", "plain, k=4 accumulation",
            lambda m: GradientNoiseScale(m, micro_batch_size=mb, accumulation_steps=K),
            accumulate=True)
    if realistic and mb >= 1:
        add(f"micro-batch, sync_every={sync}", "plain, k=4 accumulation",
            lambda m: GradientNoiseScale(m, micro_batch_size=mb, accumulation_steps=K,
                                         sync_every=sync, max_history=1000),
            accumulate=True)
    add("plain, 1 batch", None)
    # the same plain step again: its "overhead" is the timing noise of this run
    add("control: the plain step timed twice", "plain, 1 batch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # coverage warnings: the benchmark models are known
        if name != "mlp":
            add("LayerNorm-only per-example" + (f", sync_every={sync}" if realistic else ""),
                "plain, 1 batch",
                lambda m: PerExampleNoiseScale(m, params="layernorm", sync_every=sync,
                                               max_history=1000))
            add("LayerNorm-only, nanoGNS-style reference", "plain, 1 batch",
                lambda m: LayerNormReference(m, sync))
        add("per-example in step (PerExampleNoiseScale)" if not realistic else
            f"per-example in step, sync_every={sync}", "plain, 1 batch",
            lambda m: PerExampleNoiseScale(m, sync_every=sync, max_history=1000))
    if not realistic:
        add("per-example extra pass (per_example_sq_norms)", "plain, 1 batch", extra=True)
    for peer in peers:  # the same step with another library's per-example norms
        try:
            variants[f"peer: {peer}"] = peer_step(peer, base, x, y, loss_fn, bf16=bf16)
            pairs.append((f"peer: {peer}", "plain, 1 batch"))
        except Skip as why:
            if notes is not None:
                notes.append(f"{name}: {peer} skipped ({why})")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    t = interleaved(variants, reps, steps, device, clock)
    return [(name, key, t[ref], t[key]) for key, ref in pairs]


# ------------------------------------------------------------------- DDP
class ReferenceDDPHook:
    """k-diffusion-style DDP communication hook, written plainly: the squared norm of each
    bucket before the all-reduce (local) and after it (global), summed on the device."""

    def __init__(self):
        self.local = self.total = None

    @staticmethod
    def hook(state, bucket):
        import torch.distributed as dist

        buf = bucket.buffer()
        sq = buf.square().sum()
        state.local = sq if state.local is None else state.local + sq
        buf.div_(dist.get_world_size())
        fut = dist.all_reduce(buf, async_op=True).get_future()

        def done(fut):
            out = fut.value()[0]
            sq = out.square().sum()
            state.total = sq if state.total is None else state.total + sq
            return out

        return fut.then(done)


def _ddp_worker(rank, port, name, batch, reps, steps, threads, out, d_model=128):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    try:
        base, x, y, loss_fn = make(name, batch, torch.device("cpu"), d_model)
        fns = {}
        for key, hooked in (("DDP plain", False), ("DDP + DDPNoiseScaleHook", True),
                            ("DDP + k-diffusion-style reference", "reference")):
            m = DDP(copy.deepcopy(base))
            opt = torch.optim.SGD(m.parameters(), lr=1e-4)
            hook = None
            if hooked == "reference":
                ref = ReferenceDDPHook()
                m.register_comm_hook(ref, ReferenceDDPHook.hook)
            elif hooked:
                hook = DDPNoiseScaleHook(m, local_batch_size=batch)

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
    return [(name, "DDP hook (2 ranks, gloo)", t["DDP plain"], t["DDP + DDPNoiseScaleHook"]),
            (name, "DDP, k-diffusion-style reference hook", t["DDP plain"],
             t["DDP + k-diffusion-style reference"])]


# ------------------------------------------------------- agreement, op counts
def agreement(name, device, d_model=128, seq=1024, peers=PEERS, batch=4):
    """Largest relative deviation of each method's per-example squared norms from a
    float64 reference (one backward pass per example, float64 model), on ``batch``
    examples of the float32 model."""
    base, x, y, loss_fn = make(name, batch, device, d_model, min(seq, 128))
    ref_model = copy.deepcopy(base).double()
    ref = per_example_sq_norms(ref_model, loss_fn, x if x.is_floating_point() is False
                               else x.double(), y, method="loop")

    def dev(got, names=None):
        r = ref if names is None else per_example_sq_norms(
            ref_model, loss_fn, x if not x.is_floating_point() else x.double(), y,
            method="loop", params=names)
        return float(((got.double().cpu() - r.cpu()).abs() / r.cpu()).max())

    rows = [(name, "PerExampleNoiseScale layers (per_example_sq_norms)",
             dev(per_example_sq_norms(base, loss_fn, x, y)), "all")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = copy.deepcopy(base)
        pe = PerExampleNoiseScale(m, sync_every=1)
        loss_fn(m(x), y).backward()
        pe.step()
    mean = pe.to_frame().sq_norm_small.iloc[0]
    rows.append((name, "PerExampleNoiseScale in step (mean over the batch)",
                 abs(mean - float(ref.mean())) / float(ref.mean()), "all"))
    for peer in peers:
        try:
            got, names = peer_norms(peer, base, x, y, loss_fn)
        except Skip as why:
            rows.append((name, peer, math.nan, f"skipped: {why}"))
            continue
        rows.append((name, peer, dev(got, names), "all" if names is None else
                     f"{len(names)} of {sum(1 for _ in base.parameters())} tensors"))
    return rows


def op_count_rows():
    """ATen ops and Python calls per step each collector adds for 4 and 200 parameter
    tensors (CPU profiler; the same on any device, see ``op_counts.py``)."""
    rows = []
    for kind, kw, label in op_counts.ROWS:
        rows.append((label, *(op_counts.added_ops(kind, n, **kw) for n in (4, 200)),
                     *(op_counts.added_python_calls(kind, n, **kw) for n in (4, 200))))
    return rows


def main(argv=None):
    global WARMUP
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--steps", type=int, default=3, help="steps per timed repetition")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process (CPU)")
    p.add_argument("--no-ddp", action="store_true")
    p.add_argument("--models", default="mlp,transformer,b4t32,deep,t128,t256,t512,t1024",
                   help="comma-separated subset of mlp, transformer, gpt2 and the decoder "
                        f"shapes {', '.join(SHAPES)} (batch, sequence, width, layers: "
                        f"{', '.join(f'{k}={v}' for k, v in SHAPES.items())})")
    p.add_argument("--mlp-batch", type=int, default=256, help=f"examples per step (k={K})")
    p.add_argument("--transformer-batch", type=int, default=16)
    p.add_argument("--d-model", type=int, default=128, help="transformer width")
    p.add_argument("--gpt2-batch", type=int, default=8,
                   help=f"gpt2: sequences per step (k={K} micro-batches when accumulating)")
    p.add_argument("--gpt2-seq", type=int, default=1024, help="gpt2: sequence length")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (mixed precision)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--peers", default=",".join(PEERS),
                   help="comma-separated peers to run beside the collectors ('' for none)")
    p.add_argument("--no-agreement", action="store_true",
                   help="skip the agreement check against the float64 reference")
    p.add_argument("--no-op-counts", action="store_true")
    p.add_argument("--warmup", type=int, default=WARMUP,
                   help="untimed steps of each variant before timing")
    p.add_argument("--timer", choices=("wall", "cpu"), default="wall",
                   help="wall-clock time, or this process's CPU time (CPU device only)")
    a = p.parse_args(argv)
    if a.timer == "cpu" and a.device != "cpu":
        p.error("--timer cpu needs --device cpu (GPU work is not CPU time)")
    clock = time.process_time if a.timer == "cpu" else time.perf_counter
    if a.quick:
        a.reps, a.steps = 2, 1
    WARMUP = a.warmup
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    batches = {"mlp": a.mlp_batch, "transformer": a.transformer_batch, "gpt2": a.gpt2_batch,
               **{k: v[0] for k, v in SHAPES.items()}}
    names = a.models.split(",")
    unknown = sorted(set(names) - set(batches))
    if unknown:
        p.error(f"--models: unknown {unknown}; choose from {sorted(batches)}")
    batches = {m: batches[m] for m in names}
    peers = [q for q in a.peers.split(",") if q]
    bad = sorted(set(peers) - set(PEERS))
    if bad:
        p.error(f"--peers: unknown {bad}; choose from {list(PEERS)}")
    extra = {"gpt2": f"x{a.gpt2_seq} tokens (124M parameters)"}
    for m in batches:
        if m == "transformer" or m in SHAPES:
            _, t, d, layers = shape(m, batches[m], a.d_model)
            extra[m] = f"x{t} tokens d={d} layers={layers} ({4 + 12 * layers + 2} tensors)"
    sizes = ", ".join(f"{m}={b}{extra.get(m, '')}" for m, b in batches.items())
    print(f"device={device} torch={torch.__version__} threads={a.threads} reps={a.reps} "
          f"steps/rep={a.steps} batch: {sizes}, k={K}, timer={a.timer}, "
          f"bf16 autocast={a.bf16}")
    print("| model | collector | plain step (ms) | with collector (ms) | overhead |")
    print("| --- | --- | ---: | ---: | ---: |", flush=True)
    notes: list[str] = []
    for name, batch in batches.items():  # each model's rows as soon as they are timed
        rows = single_process(name, batch, a.reps, a.steps, device, a.d_model, clock,
                              bf16=a.bf16, seq=a.gpt2_seq, peers=peers, notes=notes)
        if not a.no_ddp and device.type == "cpu" and name in ("mlp", "transformer"):
            rows += ddp(name, batch, a.reps, a.steps, a.threads, a.d_model)
        for model, key, ref, t in rows:
            over = 100 * (t / ref - 1)
            print(f"| {model} | {key} | {ref * 1e3:.2f} | {t * 1e3:.2f} | {over:+.1f}% |",
                  flush=True)
    for note in notes:
        print(f"note: {note}")
    if not a.no_agreement:
        print("\nPer-example squared norms against a float64 reference (one backward per "
              "example), 4 examples of the float32 model:")
        print("| model | method | max relative deviation | parameters |")
        print("| --- | --- | ---: | --- |")
        for name in batches:
            for model, method, err, cov in agreement(name, device, a.d_model, a.gpt2_seq,
                                                     peers):
                print(f"| {model} | {method} | {err:.1e} | {cov} |")
    if not a.no_op_counts:
        print("\nATen ops (torch.profiler, ops issued by Python and autograd) and Python "
              "function calls (sys.setprofile) a collector adds per step, linear or "
              "LayerNorm stack:")
        print("| collector | ATen ops, 4 tensors | 200 tensors | Python calls, 4 tensors | "
              "200 tensors |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for label, n4, n200, p4, p200 in op_count_rows():
            print(f"| {label} | {n4} | {n200} | {p4} | {p200} |")


if __name__ == "__main__":
    main()
