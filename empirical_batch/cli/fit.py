"""`empirical-batch fit`: sweep log → steps-to-target table and critical batch size.

One target prints the steps-to-target table and the tradeoff fit; several targets
print the B_crit curve. A steps-to-target table (a CSV with ``batch_size`` and
``steps``, e.g. Zhang et al. 2024's, or MLPerf reference convergence points as
``rcps_*.json``) is fitted directly, without ``--target``. ``--where`` filters rows
first; ``--json`` prints the fits as JSON (which ``empirical-batch plan --fit`` reads);
``--out`` writes a figure.
"""

from __future__ import annotations

import sys

from ..errors import InputError
from .output import command, level, positive_number

# pandas (through .fit_steps and ..sweeps) is imported inside the functions that read a
# table, so that `empirical-batch --help` and the other commands start without it

_EPILOG = """\
The sweep log has one row per logged point: columns run, batch_size, learning_rate,
step and a metric (common names such as bs, lr, _step, loss, val_loss are recognised;
map others with --column). Each run is one batch size, one learning rate and one seed.
For each target it finds the steps at which every run first reaches it, keeps the
best learning rate per batch size, and fits S(B) = S_min (1 + B_crit/B).

A table with a batch-size column (batch_size, bs, global_bs, ...) and a steps column
(steps_to_target, steps, num_steps, ...) and no metric, one row per batch size or per
seed, is a steps-to-target table: it is fitted as it is. Steps must be whole step counts
(--fractional-steps for interpolated ones). Rows of several experiments (a column such as
model or target that splits the table into tables over the same batch sizes) are refused
with that column named: keep one with --where, or fit each with --group-by.

Units: B_crit and E_min are in the unit of the batch column: tokens when its name says
so (e.g. --column batch_size=tokens_per_step), else examples (sequences for a language
model); --unit states it.

examples:
  empirical-batch fit sweep.csv --target 3.5
  empirical-batch fit steps_to_target.csv --where "model == '151M'"
  empirical-batch fit steps_to_target.csv --where "model == '151M'" \\
      --column batch_size=tokens_per_step
  empirical-batch fit steps_to_target.csv --group-by model
  empirical-batch fit rcps_bert.json --json > fit.json && empirical-batch plan --fit fit.json
  empirical-batch fit sweep.csv --target 4.0 3.5 3.2 --out b_crit.png
  empirical-batch fit runs.csv --metric val_acc --higher-is-better --target 0.9 \\
      --column batch_size=bsz
"""


def add_parser(subparsers, name: str, help_text: str) -> None:
    import argparse

    p = subparsers.add_parser(name, help=help_text, description=help_text, epilog=_EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep", help="sweep log (CSV or Parquet, one row per logged point), a "
                                 "steps-to-target CSV, or MLPerf rcps_*.json")
    p.add_argument("--target", type=float, nargs="+",
                   help="metric value(s) to reach (for a sweep log); several give the "
                        "B_crit curve")
    p.add_argument("--where", metavar="EXPR",
                   help="keep only rows matching this pandas query, e.g. \"model == '151M'\"")
    p.add_argument("--group-by", metavar="COLUMN",
                   help="steps-to-target table: one fit per value of this column")
    p.add_argument("--unit", choices=("examples", "sequences", "tokens"),
                   help="what the batch column counts (default: tokens when its name says "
                        "so, else examples)")
    p.add_argument("--examples-per-epoch", type=positive_number, metavar="N",
                   help="MLPerf rcps_*.json counting epochs of a data set whose size is not "
                        "recorded (e.g. ssd): the training set's samples per epoch")
    p.add_argument("--fractional-steps", action="store_true",
                   help="steps-to-target table: accept steps that are not whole numbers "
                        "(interpolated between logged points)")
    out_fmt = p.add_mutually_exclusive_group()
    out_fmt.add_argument("--json", action="store_true",
                         help="print the fit(s) as JSON instead of tables")
    out_fmt.add_argument("--csv", action="store_true",
                         help="print the table (steps to target, or B_crit per target) as CSV")
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
    p.add_argument("--config-columns", dest="config", default="learning_rate",
                   help="comma-separated columns identifying a configuration (default "
                        "learning_rate)")
    p.add_argument("--level", dest="ci", type=level, default=0.95,
                   help="interval level (default 0.95)")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap draws (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--bounded", action="store_true",
                   help="constrain S_min <= min S and E_min <= min E")
    p.add_argument("--out", help="write a figure here (png, pdf, svg)")
    p.set_defaults(run=command(run, inputs=("sweep",), outputs=("out",)))


MAX_BOOT = 1_000_000


def _where(frame, expr: str | None, label: str):
    if not expr:
        return frame
    try:
        out = frame.query(expr)
    except Exception as exc:  # pandas raises many kinds for a bad expression
        raise InputError(f"--where {expr!r} on {label}: {type(exc).__name__}: {exc}") from None
    if out.empty:
        raise InputError(f"--where {expr!r} keeps no row of {label}")
    return out


def _column_map(items) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise InputError(f"--column expects SCHEMA=SOURCE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _groups(args, frame, cols, label):
    """(group value, batch_size/steps frame) per group; refuses mixed experiments."""
    from .fit_steps import differing_columns, steps_frame

    batch, steps = cols
    exclude = [steps] if args.group_by is None else [steps, args.group_by]
    if args.group_by is not None and args.group_by not in frame.columns:
        raise InputError(f"--group-by {args.group_by!r}: no such column in {label}; "
                         f"columns are {list(map(str, frame.columns))}")
    parts = ([(None, frame)] if args.group_by is None
             else list(frame.groupby(args.group_by, sort=False)))
    out = []
    for key, part in parts:
        mixed = differing_columns(part, batch, exclude)
        if mixed:
            where = label if key is None else f"{label}, {args.group_by} = {key!r}"
            example = part[mixed[0]].iloc[0]
            raise InputError(
                f"{where}: the rows differ in {', '.join(mixed)}: they hold several "
                f"experiments over the same batch sizes, which one fit would mix. Keep one "
                f"with --where (e.g. --where \"{mixed[0]} == {example!r}\") or fit each "
                f"with --group-by {mixed[0]}")
        out.append((key, steps_frame(part, batch, steps, label,
                                     fractional=args.fractional_steps)))
    return out


def _fit_steps_tables(args, groups, label, batch, say) -> int:
    from empirical_batch.cli.output import dumps
    from empirical_batch.fit import fit_tradeoff
    from empirical_batch.result import json_safe

    from .fit_steps import unit_of

    if args.out and len(groups) > 1:
        raise InputError("--out draws one fit; with --group-by keep one group with --where")
    unit, why = unit_of(batch, args.unit)
    fits = []
    for key, steps in groups:
        head = "" if key is None else f"{args.group_by} = {key}: "
        say(f"{head}{label}: steps-to-target table, {len(steps)} rows, "
            f"{steps['batch_size'].nunique()} batch sizes in {unit} ({why})")
        fit = _with_progress(lambda steps=steps: fit_tradeoff(
            steps, level=args.ci, n_boot=args.n_boot, seed=args.seed, bounded=args.bounded,
            combine=args.combine, unit=unit), args.n_boot)
        say()
        say(fit.summary())
        say()
        fits.append((key, fit))
    if args.json:
        print(dumps({"source": label, "unit": unit, "fits": [
            json_safe(fit) | ({} if key is None else {"group": {args.group_by: key}})
            for key, fit in fits]}))
    if args.csv:
        import pandas as pd

        frames = [fit.to_frame().assign(**({} if key is None else {args.group_by: key}))
                  for key, fit in fits]
        print(pd.concat(frames).to_csv(index=False), end="")
    fig = _fit_figure(fits[0][1]) if args.out else None
    return _save(fig, args.out, say)


def run(args) -> int:
    from pathlib import Path

    from empirical_batch.fit import critical_batch_curve, fit_tradeoff, steps_to_target
    from empirical_batch.result import dumps
    from empirical_batch.sweeps import STEPS_ALIASES, load_sweep, read_table

    from .fit_steps import steps_columns, unit_of

    quiet = args.json or args.csv
    say = (lambda *a, **k: None) if quiet else print
    if not 0 <= args.n_boot <= MAX_BOOT:
        raise InputError(f"--n-boot must be between 0 and {MAX_BOOT:,}, got {args.n_boot:,} "
                         "(more draws do not sharpen an interval's level beyond that)")
    path = Path(args.sweep)
    if path.suffix.lower() == ".json":
        from empirical_batch.loaders import load_mlperf_rcp

        try:
            rcp = load_mlperf_rcp(path, examples_per_epoch=args.examples_per_epoch)
        except InputError as exc:  # in the flag's words
            raise InputError(str(exc).replace("examples_per_epoch=", "--examples-per-epoch ")
                             .replace("examples_per_epoch", "--examples-per-epoch")) from None
        frame, label = rcp.to_frame(), str(path)
    else:
        if args.examples_per_epoch is not None:
            raise InputError("--examples-per-epoch applies to MLPerf rcps_*.json files (values "
                             f"in epochs), not to {path.name}")
        frame, label, _ = read_table(path)
    frame = _where(frame, args.where, label)
    column_map = _column_map(args.column)
    cols = None if path.suffix.lower() == ".json" else steps_columns(frame, column_map, label)
    if path.suffix.lower() == ".json" or cols is not None:
        if args.target:
            raise InputError(f"{label} is a steps-to-target table (a batch-size and a steps "
                             "column): it is fitted as it is, without --target")
    if path.suffix.lower() == ".json":
        unknown = frame[frame["steps"].isna()]
        if not unknown.empty:
            names = ", ".join(sorted(set(unknown["benchmark"])))
            raise InputError(
                f"{label}: {len(unknown)} of {len(frame)} rows ({names}) count epochs of a "
                "training set whose size is not recorded here: pass --examples-per-epoch N "
                "(the training set's samples per epoch) to convert them to steps")
        steps = frame[["batch_size", "steps"]]
        return _fit_steps_tables(args, [(None, steps)], label, "batch_size", say)
    if cols is not None:
        return _fit_steps_tables(args, _groups(args, frame, cols, label), label, cols[0], say)
    if args.group_by:
        raise InputError("--group-by is for steps-to-target tables; for a sweep log keep "
                         "one experiment with --where")
    if not args.target:
        raise InputError(
            "--target is required for a sweep log (one row per logged point); a "
            "steps-to-target table needs a batch-size column and a steps column (names: "
            f"{', '.join(STEPS_ALIASES)}; or --column steps=NAME) and no metric column")
    column_map.pop("steps", None)
    if args.metric:
        column_map["metric"] = args.metric
    # the file itself when unfiltered: errors then name its lines
    sweep = load_sweep(frame if args.where else path, higher_is_better=args.higher_is_better,
                       **column_map)
    unit, why = unit_of(sweep.metadata["columns"]["batch_size"], args.unit)
    fig = None
    config = [c.strip() for c in args.config.split(",") if c.strip()]
    say(sweep)
    say(f"batch sizes in {unit} ({why})")
    if len(args.target) == 1:
        table = steps_to_target(sweep, args.target[0], combine=args.combine, config=config,
                                unit=unit)
        if not table.reached.any():
            raise InputError(_unreached_message(sweep, args.target[0], table.best_metric))
        at_first = table.frame["n_at_first_point"] == table.frame["n_runs"]
        if table.reached.all() and at_first.all():
            better = "higher" if sweep.higher_is_better else "lower"
            raise InputError(
                f"every batch size meets {sweep.metric_name} "
                f"{'>=' if sweep.higher_is_better else '<='} {args.target[0]:g} at its first "
                f"logged point, so no steps to the target can be measured. The metric is "
                f"taken as {better} is better: if that is wrong, pass "
                f"--{'lower' if sweep.higher_is_better else 'higher'}-is-better; else choose "
                "a harder target")
        shown = table.frame.drop(columns=["seed_steps", "seed_examples"])
        say(f"\nsteps to {sweep.metric_name} {'>=' if sweep.higher_is_better else '<='} "
            f"{args.target[0]:g} (best configuration per batch size):")
        say(shown.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
        fit = _with_progress(lambda: fit_tradeoff(
            table, level=args.ci, n_boot=args.n_boot, seed=args.seed, bounded=args.bounded),
            args.n_boot)
        say()
        say(fit.summary())
        if args.json:
            print(dumps({"source": label, "unit": unit, "fits": [fit]}))
        if args.csv:
            print(shown.to_csv(index=False), end="")
        if args.out:
            fig = _fit_figure(fit)
    else:
        curve = critical_batch_curve(
            sweep, args.target, combine=args.combine, config=config, level=args.ci,
            n_boot=args.n_boot, seed=args.seed, bounded=args.bounded,
            errors="report", progress=sys.stderr.isatty(), unit=unit)
        say(f"\ncritical batch size per target (in {unit}):")
        say(curve.frame.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
        if (curve.to_frame()["status"] == "not fitted").all():
            raise InputError("no target was reached by at least 3 batch sizes")
        if args.json:
            print(dumps({"source": label, "unit": unit, "fits": list(curve.fits)}))
        if args.csv:
            print(curve.to_frame().to_csv(index=False), end="")
        if args.out:
            from empirical_batch.plot.fit import plot_critical_batch_curve

            fig, ax = _pyplot().subplots(figsize=(5, 4))
            plot_critical_batch_curve(curve, ax)
    return _save(fig, args.out, say)


def _unreached_message(sweep, target, best) -> str:
    better = "higher" if sweep.higher_is_better else "lower"
    text = (f"no batch size reached {sweep.metric_name} "
            f"{'>=' if sweep.higher_is_better else '<='} {target:g}; the best value logged is "
            f"{best:g}")
    worse_side = best < target if sweep.higher_is_better else best > target
    if worse_side:
        text += (f". The metric is taken as {better} is better: if that is wrong, pass "
                 f"--{'lower' if sweep.higher_is_better else 'higher'}-is-better")
    return text


def _fit_figure(fit):
    from empirical_batch.plot.fit import plot_steps_vs_batch, plot_tradeoff_fit

    fig, axes = _pyplot().subplots(1, 2, figsize=(10, 4))
    plot_tradeoff_fit(fit, axes[0])
    plot_steps_vs_batch(fit, axes[1])
    return fig


def _save(fig, out, say) -> int:
    if fig is not None:
        from empirical_batch._io import atomic_path

        fig.tight_layout()
        with atomic_path(out) as tmp:
            fig.savefig(tmp)
        say(f"\nfigure written to {out}")
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
