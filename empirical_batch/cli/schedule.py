"""`empirical-batch schedule`: design a batch-size schedule and print or export it.

The critical batch along training comes from a noise log (``--log``, the schema of
`empirical_batch.noise_log`), from a B_crit(L) law (``--power-law B_STAR,ALPHA`` or
``--fit FIT.json`` of several targets) together with a reference run's loss curve
(``--loss-curve``), from a predicted batch (``--b-crit-from PRED.json``, the output of
``empirical-batch law predict --out``: the run's B_crit, with its interval as the lower
bound the doubling policy waits for, shaped along ``--loss-curve`` as L^(-1/ALPHA)), or
the schedule converts a learning-rate schedule (``--seesaw``).
Batch sizes are in ``--unit`` (default the log's or the fit's unit; converted with
``--tokens-per-example`` where tokens meet sequences); the table gives stage starts in
whole optimizer steps; ``--plot`` draws the schedule.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from ..errors import InputError
from .output import add_tokens_per_example, command

_EPILOG = """\
examples:
  empirical-batch schedule --log gns_log.csv --batch-size 256 --base-batch 256 \\
      --policy doubling --granularity 64 --format megatron --tokens-per-example 2048
  empirical-batch schedule --log gns_log.jsonl --quantity b_simple --batch-size 256 \\
      --base-batch 256 --plot schedule.png
  empirical-batch schedule --power-law 2e8,0.21 --loss-curve run.csv --batch-size 512 \\
      --base-batch 512 --policy app_d
  empirical-batch schedule --b-crit-from pred.json --loss-curve run.csv \\
      --batch-size 524288 --base-batch 256 --unit sequences --tokens-per-example 2048
  empirical-batch schedule --seesaw cosine --total-steps 100000 --base-batch 256 \\
      --max-batch 4096 --format levanter
"""

FORMATS = ("table", "megatron", "levanter", "json", "csv")


def add_parser(subparsers, name: str, help_text: str) -> None:
    p = subparsers.add_parser(name, help=help_text, description=__doc__, epilog=_EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_argument_group("where the critical batch comes from (one of)")
    src.add_argument("--log", type=Path, help="noise log (CSV or JSONL: step and b_simple "
                     "or b_noise, e.g. NoiseScaleLog.to_csv) of a run at --batch-size")
    src.add_argument("--power-law", metavar="B_STAR,ALPHA",
                     help="B_crit(L) = B_STAR / L^(1/ALPHA), with --loss-curve")
    src.add_argument("--fit", type=Path, metavar="FIT.json",
                     help="`empirical-batch fit --json` of several targets: B_crit(L) "
                          "interpolated between them, with --loss-curve")
    src.add_argument("--b-crit-from", type=Path, metavar="PRED.json",
                     help="`empirical-batch law predict --out`: the predicted batch as the "
                          "run's B_crit (its interval's lower end as the lower bound), "
                          "shaped along --loss-curve as L^(-1/--alpha); --loss-curve and "
                          "--batch-size are in the prediction's unit")
    src.add_argument("--seesaw", choices=("step", "cosine", "wsd"),
                     help="convert this learning-rate schedule (Seesaw) over --total-steps")
    p.add_argument("--loss-curve", type=Path,
                   help="CSV with columns examples and loss of the reference run")
    p.add_argument("--alpha", type=float,
                   help="--b-crit-from: the critical batch along the run follows L^(-1/ALPHA) "
                        "(default Kaplan et al. 2020's alpha_B = 0.21)")
    p.add_argument("--batch-size", type=float,
                   help="the reference run's batch size, in the unit of the log or the fit "
                        "(so are the examples of --loss-curve)")
    p.add_argument("--quantity", choices=("b_simple", "b_noise"),
                   help="noise scale of --log to follow (default b_noise where the log has "
                        "it, else b_simple with a warning: the model needs B_noise)")
    p.add_argument("--column", help="a noise-scale column of --log with another name")
    p.add_argument("--lower-column", help="lower-bound column of --log (doubling waits "
                   "until it reaches twice the batch; default the noise scale's own "
                   "COLUMN_low, e.g. b_simple_low, where the log has it; 'none' for no bound)")
    p.add_argument("--log-where", metavar="EXPR",
                   help="keep one run of a --log that holds several (a pandas query, e.g. "
                        "\"task == 'text_lm' and optimizer == 'adam'\")")
    p.add_argument("--unresolved", choices=("refuse", "drop"), default="refuse",
                   help="log rows with a NaN or non-positive noise scale: refuse (default) "
                        "or leave them out (counted)")
    p.add_argument("--unit", choices=("examples", "sequences", "tokens"),
                   help="unit of the batch sizes (default: the log's or the fit's, else "
                        "examples)")
    p.add_argument("--total-steps", type=int, help="the base run's steps (--seesaw)")
    p.add_argument("--policy", choices=("doubling", "app_d"), default="doubling")
    p.add_argument("--base-batch", type=int, required=True, help="the first stage's batch")
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam",
                   help="learning-rate rule: sqrt for adam, linear for sgd")
    p.add_argument("--granularity", type=int, default=1,
                   help="batch sizes are multiples of this (devices x micro-batch)")
    p.add_argument("--max-batch", type=int, help="largest batch size")
    p.add_argument("--format", choices=FORMATS, default="table")
    add_tokens_per_example(p, "to convert between --unit and the log's unit; Megatron "
                              "format: stage starts in tokens (a whole number)")
    p.add_argument("--out", type=Path, help="write the export here (json, csv) instead of "
                   "printing it")
    p.add_argument("--plot", type=Path, metavar="PATH",
                   help="draw the schedule (batch size against steps, with the critical "
                        "batch it follows) to this figure (png, pdf, svg)")
    p.set_defaults(run=command(run, inputs=("log", "fit", "loss_curve", "b_crit_from"),
                                       outputs=("out", "plot")))


def _csv(path: Path, columns: tuple[str, ...]):
    from .._io import numeric_columns, read_csv

    frame = read_csv(path)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing columns {missing}; got {list(frame.columns)}")
    return numeric_columns(frame, columns, str(path))


def _law_from_fit_json(path: Path):
    """The B_crit(L) law interpolated between the fits, and the fits' unit."""
    import numpy as np

    from .output import read_fits

    fits, unit = read_fits(path)
    pts = sorted((f.target, f.b_crit) for f in fits
                 if f is not None and f.status == "identified" and f.target is not None)
    if len(pts) < 2:
        raise InputError(f"{path}: needs at least 2 identified fits with targets "
                         "(`empirical-batch fit --target L1 L2 ... --json`)")
    x = np.log([p[0] for p in pts])
    y = np.log([p[1] for p in pts])
    return (lambda loss: np.exp(np.interp(np.log(loss), x, y))), unit


def _lower_column(args) -> str | None:
    """--lower-column, else the followed noise scale's ``COLUMN_low`` where the log has
    one (a log with a confidence bound is followed with it)."""
    if args.lower_column is not None:
        return None if args.lower_column.lower() == "none" else args.lower_column
    import warnings

    from ..noise_log import BSimpleForBNoise, choose_quantity, load_noise_log

    frame = load_noise_log(args.log, args.log_where)
    column = args.column
    if column is None:
        with warnings.catch_warnings():  # from_log warns, once
            warnings.simplefilter("ignore", BSimpleForBNoise)
            column, _ = choose_quantity(frame, args.quantity)
    low = f"{column}_low"
    return low if low in frame.columns else None


def _trajectory(args):
    from empirical_batch.schedule import NoiseTrajectory

    given = [n for n in ("log", "power_law", "fit", "b_crit_from", "seesaw")
             if getattr(args, n)]
    if len(given) != 1:
        raise InputError("give exactly one of --log, --power-law, --fit, --b-crit-from, "
                         "--seesaw; got "
                         + (", ".join("--" + g.replace("_", "-") for g in given) or "none"))
    if args.seesaw:
        return None
    if args.batch_size is None or not args.batch_size > 0:
        raise InputError("--batch-size (the reference run's batch size, > 0) is required")
    if args.log:
        if args.column and args.quantity:
            raise InputError("give --quantity or --column, not both")
        return NoiseTrajectory.from_log(args.log, args.batch_size, quantity=args.quantity,
                                        column=args.column, level_column=_lower_column(args),
                                        unresolved=args.unresolved, where=args.log_where,
                                        unit=args.unit if args.column is None else None,
                                        tokens_per_example=args.tokens_per_example)
    if args.alpha is not None and not args.b_crit_from:
        raise InputError("--alpha shapes a --b-crit-from prediction; --power-law takes "
                         "B_STAR,ALPHA")
    if args.loss_curve is None:
        raise InputError("--power-law, --fit and --b-crit-from need --loss-curve "
                         "(examples, loss)")
    curve = _csv(args.loss_curve, ("examples", "loss"))
    if args.b_crit_from:
        return _from_prediction(args, curve)
    unit = args.unit or "examples"
    if args.power_law:
        try:
            b_star, alpha = (float(v) for v in args.power_law.split(","))
        except ValueError:
            raise InputError(f"--power-law expects B_STAR,ALPHA, got {args.power_law!r}") \
                from None
        if not (b_star > 0 and alpha > 0):
            raise InputError("--power-law: B_STAR and ALPHA must be > 0")

        def law(loss):
            return b_star / loss ** (1.0 / alpha)
    else:
        law, unit = _law_from_fit_json(args.fit)
    traj = NoiseTrajectory.from_power_law(law, curve["examples"].to_numpy(float),
                                          curve["loss"].to_numpy(float), args.batch_size)
    return replace(traj, unit=unit)


def _from_prediction(args, curve):
    """The trajectory whose B_crit is the predicted batch (`load_prediction`, the reader
    `plan --b-crit-from` uses), shaped along the reference run's loss curve."""
    from empirical_batch.fit.b_crit_law import KAPLAN_2020
    from empirical_batch.laws import load_prediction
    from empirical_batch.schedule import NoiseTrajectory

    pred = load_prediction(args.b_crit_from)
    alpha = KAPLAN_2020["alpha_b"] if args.alpha is None else args.alpha
    if not alpha > 0:
        raise InputError(f"--alpha must be > 0, got {alpha!r}")
    return NoiseTrajectory.from_b_crit(
        pred.value, curve["examples"].to_numpy(float), curve["loss"].to_numpy(float),
        args.batch_size, alpha=alpha, low=pred.low if pred.has_interval else None,
        unit=pred.unit,
        source=f"{pred.describe('B_crit')}; along the loss curve as L^(-1/{alpha:g})")


def run(args) -> int:
    from empirical_batch.cli.schedule_table import table
    from empirical_batch.result import dumps
    from empirical_batch.schedule import (
        design_schedule,
        seesaw_schedule,
        to_csv,
        to_json,
        to_levanter,
        to_megatron,
    )

    traj = _trajectory(args)
    unit = args.unit or (traj.unit if traj is not None else "examples")
    if traj is not None and traj.unit != unit:
        # the trajectory in the unit of the batch sizes asked for
        traj = traj.to_unit(unit, tokens_per_example=args.tokens_per_example)
    if unit == "tokens" and args.format in ("megatron", "levanter"):
        raise InputError(f"--format {args.format} takes batch sizes in samples (sequences), "
                         "and this schedule's are in tokens: pass --unit sequences with "
                         "--tokens-per-example")
    if traj is None:
        if args.total_steps is None:
            raise InputError("--seesaw needs --total-steps")
        sch = seesaw_schedule(args.seesaw, total_steps=args.total_steps,
                              base_batch=args.base_batch, granularity=args.granularity,
                              max_batch=args.max_batch)
    else:
        sch = design_schedule(traj, args.policy, base_batch=args.base_batch,
                              optimizer=args.optimizer, granularity=args.granularity,
                              max_batch=args.max_batch)
    if args.format in ("json", "csv") and args.out:
        (to_json if args.format == "json" else to_csv)(sch, args.out)
        print(f"{args.format} written to {args.out}")
        if args.plot:
            _plot(sch, traj, unit, args)
        return 0
    if args.out:
        raise InputError("--out is for --format json or csv")
    if args.format == "table":
        print(table(sch, traj, unit))
    elif args.format == "megatron":
        tpe = args.tokens_per_example
        if tpe is not None and tpe != int(tpe):
            raise InputError(f"--format megatron counts stage starts in whole tokens per "
                             f"sample: --tokens-per-example must be a whole number, got {tpe:g}")
        text = to_megatron(sch, tokens_per_sample=None if tpe is None else int(tpe))
        print(f'--step-batch-size-schedule "{text}"')
    elif args.format == "levanter":
        print(dumps(to_levanter(sch)))
    elif args.format == "json":
        print(dumps(sch.to_dict() | {"unit": unit}))
    else:
        print(sch.to_frame().to_csv(index=False), end="")
    if args.plot:
        _plot(sch, traj, unit, args)
    return 0


def _plot(sch, traj, unit, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from empirical_batch._io import atomic_path
    from empirical_batch.plot.schedule import plot_schedule

    ax = plot_schedule(sch, traj, unit=unit, end=args.total_steps if traj is None else None)
    ax.figure.tight_layout()
    with atomic_path(args.plot) as tmp:
        ax.figure.savefig(tmp, dpi=120)
    plt.close(ax.figure)
    import sys

    # machine-readable output keeps stdout to itself
    print(f"figure written to {args.plot}",
          file=sys.stdout if args.format == "table" else sys.stderr)
