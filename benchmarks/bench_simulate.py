"""Benchmark the quadratic simulator; prints a table.

(a) Exact steps-to-target on the Zhang et al. (2019) problem (h_i = 1/i, c_i = h_i,
    E[θ_i(0)²] = 1) for 10^4 directions × 22 batch sizes (2^0..2^21) × 100 learning
    rates, against a plain numpy loop (per run: doubling + integer bisection on the
    closed-form loss); asserts identical answers and prints the time ratio.
(b) Monte Carlo SGD coordinate-updates per second (torch) on CPU, and CUDA if present.
(a') Small grids: the plain-SGD dispatch (runs grouped by learning rate, or one
    vectorised search over all runs) against each path forced; answers asserted identical.
(c) The exact sweep (`simulate_sweep(method="exact")`, 8 batch sizes x 8 learning rates,
    about 50 logged steps) at 10^4 and 10^5 directions: time and peak memory (tracemalloc)
    against a plain numpy loop over the (B, lr) pairs and against the per-direction
    moments of every configuration (the formulation before the sums affine in 1/B; at
    10^5 directions only with --moments-at-1e5, it needs several GB).

Run: python benchmarks/bench_simulate.py [--dims 10000] [--mc-steps 200] [--only-sweep]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

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


def sweep_moments(nq: NoisyQuadratic, lrs, bs, steps) -> np.ndarray:
    """The per-direction moments of every configuration, then the loss (the former
    formulation of the exact sweep: memory grows with configurations x directions)."""
    with np.errstate(over="ignore", invalid="ignore"):
        m = nq.second_moment(lrs[None, :, None], bs[:, None, None], steps[None, None, :])
        return 0.5 * m @ nq.curvature


def _measured(fn):
    """(result, seconds, peak MB) of one call; peak from tracemalloc (numpy reports its
    buffers to it)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return out, dt, peak


def bench_sweep(dims: int, moments: bool) -> dict:
    from empirical_batch.simulate import log_steps, simulate_sweep

    nq = NoisyQuadratic.zhang(dims)
    lrs, bs = np.geomspace(0.01, 1.9, 8), 2.0 ** np.arange(8)
    steps = log_steps(10_000, 50).astype(float)
    df, t_sweep, mb_sweep = _measured(
        lambda: simulate_sweep(nq, bs, lrs, max_steps=10_000, n_points=50).frame)
    ref, t_loop, mb_loop = _measured(lambda: sweep_loop(nq, lrs, bs, steps))
    got = df["metric"].to_numpy().reshape(bs.size, lrs.size, steps.size)
    err = float(np.max(np.abs(got - ref) / ref))
    row = {"grid": f"{dims} dims x 8 B x 8 lr x {steps.size} steps", "sweep_s": t_sweep,
           "sweep_mb": mb_sweep, "loop_s": t_loop, "loop_mb": mb_loop, "rel_err": err,
           "moments_s": np.nan, "moments_mb": np.nan}
    if moments:
        old, row["moments_s"], row["moments_mb"] = _measured(
            lambda: sweep_moments(nq, lrs, bs, steps))
        assert np.allclose(old, ref, rtol=1e-12, atol=0), "moments path disagrees"
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", type=int, default=10_000)
    ap.add_argument("--mc-steps", type=int, default=200)
    ap.add_argument("--skip-mc", action="store_true")
    ap.add_argument("--only-sweep", action="store_true", help="run only table (c)")
    ap.add_argument("--moments-at-1e5", action="store_true",
                    help="(c): also time the per-direction moments at 10^5 directions")
    args = ap.parse_args()

    print("(c) exact sweep, simulate_sweep(method='exact') vs a plain loop over (B, lr) pairs"
          "\n    vs the per-direction moments of every configuration (time; peak memory)")
    print(f"{'grid':<36} {'sweep (s)':>9} {'MB':>7} {'loop (s)':>9} {'MB':>6} "
          f"{'moments (s)':>11} {'MB':>7} {'loop/sweep':>10} {'max rel err':>11}")
    for dims in (10_000, 100_000):
        r = bench_sweep(dims, moments=dims <= 10_000 or args.moments_at_1e5)
        print(f"{r['grid']:<36} {r['sweep_s']:9.3f} {r['sweep_mb']:7.1f} {r['loop_s']:9.3f} "
              f"{r['loop_mb']:6.1f} {r['moments_s']:11.3f} {r['moments_mb']:7.1f} "
              f"{r['loop_s'] / r['sweep_s']:10.1f} {r['rel_err']:11.1e}")
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
