"""`empirical-batch fit`: sweep log → steps-to-target table and critical batch size.

One target prints the steps-to-target table and the tradeoff fit; several targets
print the B_crit curve. ``--out`` writes a figure (tradeoff and S(B) for one target,
B_crit vs target for several).
"""

from __future__ import annotations

import sys

_EPILOG = """\
The sweep log has one row per logged point: columns run, batch_size, learning_rate,
step and a metric (common names such as bs, lr, _step, loss, val_loss are recognised;
map others with --column). Each run is one batch size, one learning rate and one seed.
For each target it finds the steps at which every run first reaches it, keeps the
best learning rate per batch size, and fits S(B) = S_min (1 + B_crit/B).

examples:
  empirical-batch fit sweep.csv --target 3.5
  empirical-batch fit sweep.csv --target 4.0 3.5 3.2 --out b_crit.png
  empirical-batch fit runs.csv --metric val_acc --higher-is-better --target 0.9 \\
      --column batch_size=bsz
"""


def add_parser(subparsers, name: str, help_text: str) -> None:
    import argparse

    p = subparsers.add_parser(name, help=help_text, description=help_text, epilog=_EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep", help="sweep log: CSV or Parquet, one row per logged point")
    p.add_argument("--target", type=float, nargs="+", required=True,
                   help="metric value(s) to reach; several give the B_crit curve")
    p.add_argument("--metric", help="metric column (default: recognised name, e.g. loss)")
    direction = p.add_mutually_exclusive_group()
    direction.add_argument("--higher-is-better", dest="higher_is_better", action="store_true",
                           default=None, help="the metric is an accuracy/score")
    direction.add_argument("--lower-is-better", dest="higher_is_better", action="store_false",
                           help="the metric is a loss/error (the default, except for names "
                                "that look like accuracies, which must be stated)")
    p.add_argument("--column", action="append", default=[], metavar="SCHEMA=SOURCE",
                   help="map a schema column to a source column, e.g. batch_size=bsz")
    p.add_argument("--combine", choices=("mean", "median", "min"), default="mean",
                   help="how seeds are combined (default mean)")
    p.add_argument("--config", default="learning_rate",
                   help="comma-separated columns identifying a configuration (default "
                        "learning_rate)")
    p.add_argument("--ci", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap draws (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--bounded", action="store_true",
                   help="constrain S_min <= min S and E_min <= min E")
    p.add_argument("--out", help="write a figure here (png, pdf, svg)")
    p.set_defaults(run=run)


def run(args) -> int:
    import pandas as pd

    from empirical_batch.fit import critical_batch_curve, fit_tradeoff, steps_to_target
    from empirical_batch.sweeps import load_sweep

    column_map = {}
    for item in args.column:
        if "=" not in item:
            raise ValueError(f"--column expects SCHEMA=SOURCE, got {item!r}")
        k, v = item.split("=", 1)
        column_map[k.strip()] = v.strip()
    if args.metric:
        column_map["metric"] = args.metric
    sweep = load_sweep(args.sweep, higher_is_better=args.higher_is_better, **column_map)
    config = [c.strip() for c in args.config.split(",") if c.strip()]
    print(sweep)
    fig = None
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        if len(args.target) == 1:
            table = steps_to_target(sweep, args.target[0], combine=args.combine, config=config)
            shown = table.frame.drop(columns=["seed_steps", "seed_examples"])
            print(f"\nsteps to {sweep.metric_name} {'>=' if sweep.higher_is_better else '<='} "
                  f"{args.target[0]:g} (best configuration per batch size):")
            print(shown.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
            fit = _with_progress(lambda: fit_tradeoff(
                table, ci=args.ci, n_boot=args.n_boot, seed=args.seed, bounded=args.bounded),
                args.n_boot)
            print()
            print(fit)
            if args.out:
                from empirical_batch.plot.fit import plot_steps_vs_batch, plot_tradeoff

                fig, axes = _pyplot().subplots(1, 2, figsize=(10, 4))
                plot_tradeoff(fit, axes[0])
                plot_steps_vs_batch(fit, axes[1])
        else:
            curve = critical_batch_curve(
                sweep, args.target, combine=args.combine, config=config, ci=args.ci,
                n_boot=args.n_boot, seed=args.seed, bounded=args.bounded,
                errors="report", progress=sys.stderr.isatty())
            print("\ncritical batch size per target:")
            print(curve.frame.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
            if curve["b_crit"].isna().all():
                raise ValueError("no target was reached by at least 3 batch sizes")
            if args.out:
                from empirical_batch.plot.fit import plot_critical_batch_curve

                fig, ax = _pyplot().subplots(figsize=(5, 4))
                plot_critical_batch_curve(curve, ax)
    if fig is not None:
        fig.tight_layout()
        fig.savefig(args.out)
        print(f"\nfigure written to {args.out}")
    return 0


def _pyplot():
    """pyplot on the non-interactive Agg backend (the command only writes files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _with_progress(fn, n_boot):
    """Run a single vectorised fit under a one-step tqdm bar (shown on a terminal)."""
    from tqdm.auto import tqdm

    with tqdm(total=1, desc=f"bootstrap ({n_boot} draws)", disable=not sys.stderr.isatty(),
              leave=False) as bar:
        out = fn()
        bar.update(1)
    return out
