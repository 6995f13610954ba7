"""Benchmark the quadratic simulator; prints a table.

(a) Exact steps-to-target on the Zhang et al. (2019) problem (h_i = 1/i, c_i = h_i,
    E[θ_i(0)²] = 1) for 10^4 directions × 22 batch sizes (2^0..2^21) × 100 learning
    rates, against a plain numpy loop (per run: doubling + integer bisection on the
    closed-form loss); asserts identical answers and prints the time ratio.
(b) Monte Carlo SGD coordinate-updates per second (torch) on CPU, and CUDA if present.
(a') Small grids: the plain-SGD dispatch (runs grouped by learning rate, or one
    vectorised search over all runs) against each path forced; answers asserted identical.
(c) The exact sweep (`simulate_sweep(method="exact")` end to end, DataFrame included;
    8 batch sizes x 8 learning rates, 46 logged steps) at 10^4, 10^5 and 10^6 directions,
    in float64 and float32, against a direct numpy loop on the same P + Q/B form
    (`affine_loop`, independent of the library), a plain loop over the (B, lr) pairs and,
    once at 10^4, the per-direction moments of every configuration (the formulation before
    the sums affine in 1/B; at 10^5 only with --moments-at-1e5, it needs several GB).
    Process time, median of --rounds interleaved rounds, with a control row (the
    library's call timed twice); answers asserted equal (1e-12; float32 within its stated
    bound); peak memory (tracemalloc) of one call.

Run: python benchmarks/bench_simulate.py [--dims 10000] [--mc-steps 200] [--only-sweep]
     [--rounds 5] [--sweep-dims 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # process time: no busy-waiting BLAS threads

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

from empirical_batch.simulate import NoisyQuadratic


def plain_loop(nq: NoisyQuadratic, target: float, lrs, batch_sizes) -> np.ndarray:
    """Reference: one run at a time, closed-form loss over dims, doubling + bisection.

    Valid when the expected loss decreases monotonically (true on this grid whenever
    the stationary loss is below the target; the fast solver checks the general case).
    """
    h, c, m0 = nq.curvature, nq.noise, nq.init
    out = np.full((len(batch_sizes), len(lrs)), np.inf)

    for i, b in enumerate(batch_sizes):
        for j, a in enumerate(lrs):
            r = 1.0 - a * h
            if np.any(np.abs(r) >= 1.0):
                continue
            rho = r * r
            m_inf = a * c / (b * h * (2.0 - a * h))
            if 0.5 * h @ m_inf >= target:
                continue

            def loss(k, rho=rho, m_inf=m_inf):
                return 0.5 * h @ (m_inf + rho**k * (m0 - m_inf))

            if loss(0) <= target:
                out[i, j] = 0
                continue
            lo, hi = 0, 1
            while loss(hi) > target:
                lo, hi = hi, hi * 2
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if loss(mid) <= target:
                    hi = mid
                else:
                    lo = mid
            out[i, j] = hi
    return out


def bench_exact(dims: int) -> dict:
    nq = NoisyQuadratic.zhang(dims)
    lrs = np.geomspace(1e-3, 1.99, 100)
    bs = 2.0 ** np.arange(22)
    target = 0.1 * nq.initial_loss()
    nq.steps_to_target(target, lrs[None, :5], bs[:2, None])  # warm-up
    times = []
    for _ in range(5):  # best of 5: the machine may be shared
        t0 = time.perf_counter()
        fast = nq.steps_to_target(target, lrs[None, :], bs[:, None])
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    ref = plain_loop(nq, target, lrs, bs)
    t_ref = time.perf_counter() - t0
    same = np.array_equal(fast, ref)
    assert same, f"answers differ at {np.argwhere(fast != ref)[:5]}"
    return {
        "grid": f"{dims} dims x {bs.size} B x {lrs.size} lr",
        "fast_s": min(times),
        "fast_worst_s": max(times),
        "loop_s": t_ref,
        "ratio": t_ref / min(times),
        "reached": int(np.isfinite(fast).sum()),
    }


def bench_paths() -> list[dict]:
    """Plain-SGD dispatch on small grids: grouped by rate vs one vectorised search."""
    from empirical_batch.simulate import search

    rows = []
    for dims, n_lr, n_b in [(50, 40, 16), (200, 30, 12), (1000, 30, 12), (3000, 30, 12)]:
        nq = NoisyQuadratic.zhang(dims)
        lrs, bs = np.geomspace(1e-3, 1.99, n_lr), 2.0 ** np.arange(n_b)
        target = 0.1 * nq.initial_loss()
        row, answers = {"grid": f"{dims} dims x {n_b} B x {n_lr} lr"}, []
        saved = search.GROUPED_MIN_WORK
        for name, threshold in (("auto", saved), ("grouped", 0), ("general", np.inf)):
            search.GROUPED_MIN_WORK = threshold
            try:
                best = np.inf
                for _ in range(5):
                    t0 = time.perf_counter()
                    k = nq.steps_to_target(target, lrs[None, :], bs[:, None])
                    best = min(best, time.perf_counter() - t0)
            finally:
                search.GROUPED_MIN_WORK = saved
            row[name] = best
            answers.append(k)
        assert all(np.array_equal(answers[0], k) for k in answers), "paths disagree"
        rows.append(row)
    return rows


def bench_mc(device: str, steps: int) -> dict:
    """CPU: 8 B x 8 lr x 4 seeds x 10^4 dims; CUDA: 22 B x 100 lr x 4 seeds x 10^4 dims."""
    from empirical_batch.simulate import monte_carlo_sgd

    nq = NoisyQuadratic.zhang(10_000)
    n_b, n_lr = (8, 8) if device == "cpu" else (22, 100)
    bs = 2.0 ** np.arange(n_b)
    lrs = np.geomspace(0.01, 1.0, n_lr)
    kw = dict(batch_sizes=bs, learning_rates=lrs, steps=steps, n_seeds=4, device=device,
              record_steps=[0, steps], max_elements=1 << 28)
    monte_carlo_sgd(nq, **{**kw, "steps": 5, "record_steps": [0, 5]})  # warm-up
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    t0 = time.perf_counter()
    res = monte_carlo_sgd(nq, **kw)
    dt = time.perf_counter() - t0
    updates = bs.size * lrs.size * 4 * nq.dims * steps
    return {"device": device, "updates": updates, "seconds": dt, "rate": updates / dt,
            "dtype": str(res.dtype), "grid": f"{n_b} B x {n_lr} lr x 4 seeds x 10^4 dims"}


def sweep_loop(nq: NoisyQuadratic, lrs, bs, steps) -> np.ndarray:
    """Reference: one (B, lr) pair at a time, the closed form over the directions."""
    h, c, m0 = nq.curvature, nq.noise, nq.init
    out = np.empty((bs.size, lrs.size, steps.size))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for i, b in enumerate(bs):
            for j, a in enumerate(lrs):
                x = a * h
                rho = (1.0 - x) ** 2
                m_inf = a * c / (b * h * (2.0 - x))
                decay = rho[None, :] ** steps[:, None]
                out[i, j] = 0.5 * h @ m_inf + decay @ (0.5 * h * (m0 - m_inf))
    return out


def affine_loop(nq: NoisyQuadratic, lrs, bs, steps) -> np.ndarray:
    """Reference: the loss is affine in 1/B, E[L](k) = P(a, k) + Q(a, k)/B, with
    P = sum_i h_i rho_i^k m_i(0) / 2 and Q = sum_i h_i a^2 c_i (1 - rho_i^k)/(1 - rho_i) / 2;
    so per (rate, step) one vector rho^k serves every batch size (plain SGD, no
    preconditioner, every a h_i in (0, 2))."""
    h, c, m0 = nq.curvature, nq.noise, nq.init
    out = np.empty((bs.size, lrs.size, steps.size))
    w0 = 0.5 * h * m0
    for j, a in enumerate(lrs):
        x = a * h
        rho = (1.0 - x) ** 2
        wq = 0.5 * h * a * a * c / (x * (2.0 - x))
        total = wq.sum()
        with np.errstate(under="ignore"):
            for t, k in enumerate(steps):
                rk = rho**k
                out[:, j, t] = rk @ w0 + (total - rk @ wq) / bs
    return out


def sweep_moments(nq: NoisyQuadratic, lrs, bs, steps) -> np.ndarray:
    """The per-direction moments of every configuration, then the loss (the former
    formulation of the exact sweep: memory grows with configurations x directions)."""
    with np.errstate(over="ignore", invalid="ignore"):
        m = nq.second_moment(lrs[None, :, None], bs[:, None, None], steps[None, None, :])
        return 0.5 * m @ nq.curvature


def _peak_mb(fn) -> float:
    """Peak traced memory of one call, MB (numpy reports its buffers to tracemalloc)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return peak


def bench_sweep(dims: int, rounds: int, plain_rounds: int, moments: bool) -> dict:
    """Process time, median of ``rounds`` interleaved rounds (the plain loop in the first
    ``plain_rounds`` only); "control" is the library's call timed a second time."""
    from empirical_batch.simulate import log_steps, simulate_sweep

    nq = NoisyQuadratic.zhang(dims)
    lrs, bs = np.geomspace(0.01, 1.9, 8), 2.0 ** np.arange(8)
    steps = log_steps(10_000, 50).astype(float)
    shape = (bs.size, lrs.size, steps.size)

    def library(dtype="float64"):
        sim = simulate_sweep(nq, bs, lrs, max_steps=10_000, n_points=50, dtype=dtype)
        return sim.frame["metric"].to_numpy().reshape(shape)

    calls = {"library": library, "library f32": lambda: library("float32"),
             "control": library, "affine": lambda: affine_loop(nq, lrs, bs, steps),
             "plain": lambda: sweep_loop(nq, lrs, bs, steps)}
    times: dict[str, list[float]] = {name: [] for name in calls}
    out = {}
    for r in range(rounds):
        for name, fn in calls.items():
            if name == "plain" and r >= plain_rounds:
                continue
            t0 = time.process_time()
            out[name] = fn()
            times[name].append(time.process_time() - t0)
    ref = out["affine"]
    err = {name: float(np.max(np.abs(out[name] - ref) / ref)) for name in out}
    assert err["library"] <= 1e-12 and err["plain"] <= 1e-12, f"answers differ: {err}"
    assert np.array_equal(out["library"], out["control"])
    assert err["library f32"] <= _f32_bound(), f"float32 off by {err['library f32']:.2e}"
    row = {name: float(np.median(v)) for name, v in times.items()}
    row.update(grid=f"{dims:.0e} dims", err=err["library"], err32=err["library f32"],
               mb=_peak_mb(library), mb32=_peak_mb(lambda: library("float32")))
    row["moments"] = np.nan
    if moments:
        t0 = time.process_time()
        old = sweep_moments(nq, lrs, bs, steps)
        row["moments"] = time.process_time() - t0
        assert np.allclose(old, ref, rtol=1e-12, atol=0), "moments path disagrees"
    return row


def _f32_bound() -> float:
    """The float32 sweep's relative error bound that `simulate_sweep` states."""
    from empirical_batch.simulate.powers import F32_REL_ERR

    return F32_REL_ERR


def print_sweep_table(rounds: int, dims_list, moments_at_1e5: bool) -> None:
    print("(c) exact sweep, 8 B x 8 lr x 46 logged steps (log_steps(10_000, 50)), Zhang problem:"
          f"\n    process time (s), median of {rounds} interleaved rounds; library ="
          " simulate_sweep(method='exact') end to end (DataFrame included); control = the same"
          "\n    call timed again; affine = a direct numpy loop on P + Q/B; plain = one loop per"
          " (B, lr) pair (1 round at 1e6); moments = per-direction moments, once")
    print(f"{'dims':<9} {'library':>8} {'control':>8} {'lib f32':>8} {'affine':>8} "
          f"{'plain':>8} {'moments':>8} {'lib/affine':>10} {'ctrl/lib':>8} {'rel err':>8} "
          f"{'f32 err':>8} {'MB':>6} {'MB f32':>6}")
    for dims in dims_list:
        r = bench_sweep(dims, rounds, 1 if dims >= 1_000_000 else rounds,
                        moments=dims <= 10_000 or (moments_at_1e5 and dims <= 100_000))
        print(f"{r['grid']:<9} {r['library']:8.3f} {r['control']:8.3f} "
              f"{r['library f32']:8.3f} {r['affine']:8.3f} {r['plain']:8.3f} "
              f"{r['moments']:8.3f} {r['library'] / r['affine']:10.2f} "
              f"{r['control'] / r['library']:8.2f} {r['err']:8.1e} {r['err32']:8.1e} "
              f"{r['mb']:6.1f} {r['mb32']:6.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", type=int, default=10_000)
    ap.add_argument("--mc-steps", type=int, default=200)
    ap.add_argument("--skip-mc", action="store_true")
    ap.add_argument("--only-sweep", action="store_true", help="run only table (c)")
    ap.add_argument("--rounds", type=int, default=5, help="(c): timed rounds per method")
    ap.add_argument("--sweep-dims", default="10000,100000,1000000",
                    help="(c): comma-separated directions")
    ap.add_argument("--moments-at-1e5", action="store_true",
                    help="(c): also time the per-direction moments at 10^5 directions")
    args = ap.parse_args()

    print_sweep_table(args.rounds, [int(d) for d in args.sweep_dims.split(",")],
                      args.moments_at_1e5)
    if args.only_sweep:
        return
    print()

    r = bench_exact(args.dims)
    print("(a) exact steps-to-target sweep")
    print(f"{'grid':<32} {'fast (s)':>9} {'worst':>7} {'loop (s)':>9} {'ratio':>7} "
          f"{'reached':>8}   (fast: best and worst of 5; loop: once)")
    print(f"{r['grid']:<32} {r['fast_s']:9.3f} {r['fast_worst_s']:7.3f} {r['loop_s']:9.3f} "
          f"{r['ratio']:7.1f} {r['reached']:8d}   identical answers: yes")
    print("\n(a') small grids, the plain-SGD dispatch (ms, best of 5; answers identical)")
    print(f"{'grid':<32} {'auto':>8} {'grouped':>8} {'general':>8}")
    for r in bench_paths():
        print(f"{r['grid']:<32} {r['auto'] * 1e3:8.1f} {r['grouped'] * 1e3:8.1f} "
              f"{r['general'] * 1e3:8.1f}")
    if args.skip_mc:
        return
    print("\n(b) Monte Carlo SGD, coordinate-updates per second")
    print(f"{'device':<8} {'grid':<34} {'dtype':<8} {'steps':>6} {'seconds':>8} "
          f"{'updates/s':>10}")
    devices = ["cpu"]
    try:
        import torch

        if torch.cuda.is_available():
            devices.append("cuda")
    except ImportError:  # pragma: no cover
        devices = []
    for dev in devices:
        m = bench_mc(dev, args.mc_steps)
        print(f"{dev:<8} {m['grid']:<34} {m['dtype']:<8} {args.mc_steps:6d} "
              f"{m['seconds']:8.3f} {m['rate']:10.3e}")
    if "cuda" not in devices:
        print("cuda     (no GPU here: pending)")


if __name__ == "__main__":
    main()
