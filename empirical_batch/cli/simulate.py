"""`empirical-batch simulate`: a batch-size sweep on a noisy quadratic problem."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .devices import check_device
from .output import command


def _floats(text: str, name: str) -> np.ndarray:
    """'1,2,4' or 'geom:LO:HI:N' (log-spaced) or 'pow2:LO:HI' (2^LO..2^HI)."""
    try:
        if text.startswith("geom:"):
            lo, hi, n = text[5:].split(":")
            return np.geomspace(float(lo), float(hi), int(n))
        if text.startswith("pow2:"):
            lo, hi = text[5:].split(":")
            return 2.0 ** np.arange(int(lo), int(hi) + 1)
        return np.array([float(x) for x in text.split(",") if x.strip()])
    except ValueError:
        raise InputError(
            f"--{name} must be a comma list, 'geom:LO:HI:N' or 'pow2:LO:HI', got {text!r}"
        ) from None


def add_parser(subparsers, name: str, help_text: str) -> None:
    import argparse

    p = subparsers.add_parser(
        name, help=help_text, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=help_text + " Every (batch size, learning rate) pair is one run; the "
        "table it writes (--out) is in the sweep schema that `empirical-batch fit` reads.",
        epilog="examples:\n"
        "  empirical-batch simulate --dims 1000 --steps 100000 --out sweep.csv\n"
        "  empirical-batch fit sweep.csv --target 0.37\n"
        "  empirical-batch simulate --method monte_carlo --n-seeds 8 --device cuda",
    )
    g = p.add_argument_group("problem (h_i = i^-exponent; c_i = noise·h_i or noise)")
    g.add_argument("--dims", type=int, default=1000, help="directions (default 1000)")
    g.add_argument("--exponent", type=float, default=1.0, help="spectrum exponent (default 1)")
    g.add_argument("--noise", type=float, default=1.0, help="noise level (default 1)")
    g.add_argument("--noise-like", choices=["curvature", "constant"], default="curvature",
                   help="c_i = noise·h_i (Zhang et al. 2019) or c_i = noise")
    g.add_argument("--init", type=float, default=1.0, help="E[θ_i(0)²] (default 1)")
    g.add_argument("--momentum", type=float, default=0.0, help="heavy-ball β (default 0)")
    g.add_argument("--precondition", type=float, default=0.0, help="P = H^-p (default 0)")
    g.add_argument("--ema", type=float, default=None, help="EMA decay of the iterates")
    s = p.add_argument_group("sweep")
    s.add_argument("--batch-sizes", default="pow2:0:12",
                   help="batch sizes: '1,2,4', 'pow2:0:12' (default) ...")
    s.add_argument("--lrs", default="geom:1e-3:1.9:24",
                   help="learning rates: comma list or 'geom:LO:HI:N' (default geom:1e-3:1.9:24)")
    s.add_argument("--steps", type=int, default=10_000, help="steps per run (default 10000)")
    s.add_argument("--n-points", type=int, default=50, help="logged steps per run (default 50)")
    s.add_argument("--method", choices=["exact", "monte_carlo"], default="exact",
                   help="exact expected loss (default) or Monte Carlo SGD (torch)")
    s.add_argument("--n-seeds", dest="seeds", type=int, default=4,
                   help="Monte Carlo replicas (default 4)")
    s.add_argument("--seed", type=int, default=0, help="Monte Carlo random seed (default 0)")
    s.add_argument("--device", default="cpu", help="torch device for Monte Carlo")
    s.add_argument("--dtype", choices=["float32", "float64"], default=None,
                   help="precision (default: float64 for exact, float32 for Monte Carlo)")
    s.add_argument("--dataset-size", type=int, default=None,
                   help="Monte Carlo: finite table of per-example noises")
    s.add_argument("--target-fraction", dest="target", type=float, default=0.1,
                   help="summary target, as a fraction of the initial loss (default 0.1)")
    s.add_argument("--out", default=None, help="write the sweep table to this CSV file")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true",
                     help="print the steps-to-target summary as JSON instead of tables")
    fmt.add_argument("--csv", action="store_true",
                     help="print the steps-to-target summary as CSV")
    p.set_defaults(run=command(run, outputs=("out",)))


def run(args) -> int:
    from empirical_batch.simulate import NoisyQuadratic, simulate_sweep

    nq = NoisyQuadratic.power_law(
        args.dims, args.exponent, args.noise, noise_like=args.noise_like, init=args.init,
        momentum=args.momentum, precondition=args.precondition, ema=args.ema,
    )
    if args.method == "monte_carlo":
        check_device(args.device)
    bs = _floats(args.batch_sizes, "batch-sizes")
    lrs = _floats(args.lrs, "lrs")
    if not 1 <= args.n_points <= 100_000:
        raise InputError(f"--n-points must be between 1 and 100,000, got {args.n_points:,}")
    if args.steps < 1:
        raise InputError(f"--steps must be >= 1, got {args.steps}")
    if args.method == "monte_carlo":
        work = float(args.steps) * len(bs) * len(lrs) * args.seeds * args.dims
        if work > 1e12:
            raise InputError(f"the Monte Carlo sweep asks for {work:.2g} updates "
                             "(steps x batch sizes x rates x seeds x dims): more than 1e12, "
                             "which would run for days; reduce --steps, --n-seeds or the grids")
    if not 0 < args.target < 1:
        raise InputError(f"--target-fraction must be in (0, 1), got {args.target!r}")
    target = args.target * nq.initial_loss()
    df = simulate_sweep(
        nq, bs, lrs, args.steps, method=args.method, n_seeds=args.seeds, n_points=args.n_points,
        seed=args.seed, device=args.device, dtype=args.dtype, dataset_size=args.dataset_size,
        progress=(args.method == "monte_carlo" and not args.quiet),
    ).frame
    if args.out:
        from empirical_batch._io import atomic_path

        with atomic_path(args.out) as tmp:
            df.to_csv(tmp, index=False)
    if args.method == "monte_carlo":
        from empirical_batch.fit import steps_to_target

        st = steps_to_target(df, target)  # interpolated crossings, seeds averaged
        table = st.frame[["batch_size", "learning_rate", "steps", "examples"]]
        label = ("Monte Carlo: steps to target (steps_to_target: crossing interpolated "
                 "between logged points, seeds averaged)")
    else:
        table = nq.best_lr(target, bs, lrs, max_steps=args.steps).to_frame()
        label = "exact steps to target (best lr of the grid)"
    if args.json:
        from empirical_batch.result import dumps

        print(dumps({"problem": repr(nq), "method": args.method, "target": target,
                     "initial_loss": nq.initial_loss(),
                     "steps_to_target": table.to_dict(orient="records")}))
        return 0
    if args.csv:
        print(table.to_csv(index=False), end="")
        return 0
    print(nq)
    print(f"method={args.method}  runs={df['run'].nunique()}  rows={len(df)}  "
          f"target={target:.4g} ({args.target:g} of L0={nq.initial_loss():.4g})")
    print(label)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    ok = np.isfinite(table.steps.to_numpy())
    if ok.any() and nq.is_plain:
        j = int(np.flatnonzero(ok)[-1])
        b, lr = float(table.batch_size.iloc[j]), float(table.learning_rate.iloc[j])
        k = int(table.steps.iloc[j])
        tr = nq.noise_scales(lr, b, [0, k])
        print(f"B_noise along the B={b:g} run: start {tr.b_noise[0]:.4g}, "
              f"at the target {tr.b_noise[1]:.4g}")
    if args.out:
        print(f"wrote {len(df)} rows to {args.out}")
    return 0
