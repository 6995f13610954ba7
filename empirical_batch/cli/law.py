"""`empirical-batch law fit|predict|list`: batch-size laws over model size and tokens.

``law fit`` reads a grid of runs (StepLaw's CSV, the plain schema, Zhang et al.'s
steps-to-target table, a ``batch_science`` directory), reads the optimum of each
(N, D) cell with its interval, flags optima at the grid's edge, and fits the law with
exponent intervals; ``law predict`` evaluates a published law (``--law NAME``) or a
fitted one (``--law FIT.json``) at the next run, from an anchor, rounded, with a
status that says how far it extrapolates; ``law list`` shows the published laws.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DataError, InputError
from .output import command, dumps, level

_EPILOG = """\
examples:
  empirical-batch law fit steplaw.csv --inputs tokens --quantity b_opt
  empirical-batch law fit grid.csv --unit sequences --inputs tokens,n_params --json > law.json
  empirical-batch law predict --law power_lines_b_opt --anchor batch=524288,tokens=1e9 \\
      --at tokens=3e10 --exponent-interval tokens=0.30:0.45 --json
  empirical-batch law predict --law law.json --at tokens=2e11 --devices 64 --micro-batch 4 \\
      --seq-len 2048
  empirical-batch law list
"""


def add_parser(subparsers, name: str, help_text: str) -> None:
    p = subparsers.add_parser(name, help=help_text, description=__doc__, epilog=_EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="law_command", metavar="{fit,predict,list}", required=True)

    f = sub.add_parser("fit", help="fit a law to a grid of runs over (N, D)")
    f.add_argument("grid", type=Path, help="CSV of runs, or a batch_science directory")
    f.add_argument("--layout", default="auto",
                   choices=("auto", "steplaw", "plain", "zhang", "batch_science"))
    f.add_argument("--inputs", default="tokens",
                   help="comma-separated: tokens, n_params, compute, loss (default tokens)")
    f.add_argument("--quantity", default=None, choices=("b_opt", "lr_opt", "b_crit"),
                   help="default b_opt for a loss grid, b_crit for a steps grid")
    f.add_argument("--unit", choices=("tokens", "sequences", "examples"),
                   help="unit of batch_size in the plain layout (when it has no unit column)")
    f.add_argument("--column", action="append", default=[], metavar="FIELD=COLUMN",
                   help="a column alias, e.g. --column loss=val_loss (repeatable)")
    f.add_argument("--seq-len", type=float, help="tokens per sequence, where the file has no "
                   "seq_len column")
    f.add_argument("--band", type=float, default=0.0025,
                   help="relative band of near-optimal losses")
    f.add_argument("--estimator", choices=("band", "vertex"), default="band",
                   help="per-cell optimum: the near-optimal band's geometric mean (on the "
                        "grid's values) or the vertex of the quadratic loss surface")
    f.add_argument("--n-boot", type=int, default=200, help="bootstrap draws per cell")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--level", type=level, default=0.95)
    f.add_argument("--metric", help="batch_science: the objective column")
    f.add_argument("--target", type=float, help="batch_science: the objective's target")
    f.add_argument("--maximize", action="store_true",
                   help="batch_science: the objective is to be maximised")
    f.add_argument("--json", action="store_true", help="print the law, the cells and the "
                   "model selection as JSON (a FILE for `law predict --law`)")
    f.set_defaults(run=command(run_fit, inputs=("grid",)))

    pr = sub.add_parser("predict", help="the batch at the next run, from a law and an anchor")
    pr.add_argument("--law", required=True,
                    help="a published law's name (`law list`) or a `law fit --json` file")
    pr.add_argument("--at", required=True, metavar="tokens=…[,n_params=…]",
                    help="the next run's inputs")
    pr.add_argument("--anchor", metavar="batch=…,tokens=…[,n_params=…,low=…,high=…]",
                    help="a batch measured at a reference point (and its interval)")
    pr.add_argument("--exponent-interval", action="append", default=[],
                    metavar="INPUT=LOW:HIGH",
                    help="an interval for an exponent the law gives none for (repeatable)")
    pr.add_argument("--round", dest="rounding", default="pow2",
                    choices=("pow2", "multiple", "none"))
    pr.add_argument("--devices", type=int, default=1)
    pr.add_argument("--micro-batch", type=int, default=1,
                    help="sequences (examples) per device per micro-step")
    pr.add_argument("--seq-len", type=float,
                    help="tokens per sequence: the granule of a batch in tokens")
    pr.add_argument("--json", action="store_true")
    pr.add_argument("--out", type=Path, help="also write the prediction as JSON here (for "
                    "`plan --b-crit-from` and `schedule --b-crit-from`)")
    pr.set_defaults(run=command(run_predict, outputs=("out",)))

    ls = sub.add_parser("list", help="the published laws, with citations and ranges")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=command(run_list))


def _pairs(text: str, what: str) -> dict[str, str]:
    out = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(f"{what}: expected KEY=VALUE pairs separated by commas, got "
                             f"{part!r}")
        out[key.strip()] = value.strip()
    return out


def _floats(text: str, what: str) -> dict[str, float]:
    out = {}
    for k, v in _pairs(text, what).items():
        try:
            out[k] = float(v)
        except ValueError:
            raise InputError(f"{what}: {k}={v!r} is not a number") from None
    return out


def run_fit(args) -> int:
    import warnings

    from ..fit.tradeoff_fit import FitWarning
    from ..laws import cell_optima, fit_law, load_grid, select_law

    aliases = {}
    for item in args.column:
        aliases.update(_pairs(item, "--column"))
    grid = load_grid(args.grid, layout=args.layout, unit=args.unit, columns=aliases or None,
                     seq_len=args.seq_len, target=args.target, metric=args.metric,
                     maximize=args.maximize)
    optima = cell_optima(grid, band=args.band, n_boot=args.n_boot, level=args.level,
                         seed=args.seed, estimator=args.estimator)
    quantity = args.quantity or optima.quantities[0]
    law = fit_law(optima, quantity, args.inputs, level=args.level)
    selection = None
    if quantity != "lr_opt" and set(law.inputs) <= {"tokens", "n_params"} and \
            optima.frame[["n_params", "tokens"]].notna().all().all():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)
            selection = select_law(optima, quantity, level=args.level)
    if args.json:
        print(dumps({"law": law, "grid": {"layout": grid.layout, "kind": grid.kind,
                     "unit": grid.unit, "rows": len(grid.frame), "cells": grid.n_cells},
                     "cells": optima.to_dict(),
                     "selection": None if selection is None else
                     {"chosen": selection.chosen, "reason": selection.reason,
                      "p_value": selection.p_value, "aicc_d_only": selection.aicc_d_only,
                      "aicc_n_and_d": selection.aicc_n_and_d}}))
        return 0
    print(f"{grid!r}")
    print(optima.summary())
    edge = [q for q in optima.quantities if optima.frame[f"{q}_at_edge"].any()]
    for q in edge:
        cells = optima.frame["cell"][optima.frame[f"{q}_at_edge"]].tolist()
        print(f"{q} at the grid's edge (a bound, left out of the law) in: {', '.join(cells)}")
    print(law.summary())
    if selection is not None:
        print(f"model selection: {selection.chosen} ({selection.reason})")
    return 0


def _load_law(spec: str):
    from ..laws import PUBLISHED_LAWS, get_law

    if spec in PUBLISHED_LAWS:
        return get_law(spec)
    path = Path(spec)
    if not path.is_file():
        return get_law(spec)  # NotFoundError listing the names
    from .._io import read_json
    from ..laws import ScalingLaw
    from ..result import read_result

    data = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("law"), dict):
        data = data["law"]  # the law of `law fit --json`
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected `empirical-batch law fit --json` output")
    try:
        law = read_result(data)
    except DataError as exc:
        raise DataError(f"{path}: not `empirical-batch law fit --json` output ({exc})") \
            from None
    if not isinstance(law, ScalingLaw):
        raise DataError(f"{path}: holds a {type(law).__name__}, not a scaling law")
    return law


def run_predict(args) -> int:
    from ..laws import Anchor, predict_batch

    law = _load_law(args.law)
    at = _floats(args.at, "--at")
    anchor = None
    if args.anchor:
        a = _floats(args.anchor, "--anchor")
        if "batch" not in a:
            raise InputError("--anchor needs batch=… (the measured batch, in the law's unit)")
        value, low, high = a.pop("batch"), a.pop("low", float("nan")), a.pop("high",
                                                                               float("nan"))
        anchor = Anchor(value, a, low, high)
    intervals = {}
    for item in args.exponent_interval:
        for k, v in _pairs(item, "--exponent-interval").items():
            lo, _sep, hi = v.partition(":")
            try:
                intervals[k] = (float(lo), float(hi))
            except ValueError:
                raise InputError(f"--exponent-interval {k}={v!r}: expected LOW:HIGH") \
                    from None
    for name, v in (("--devices", args.devices), ("--micro-batch", args.micro_batch)):
        if v < 1:
            raise InputError(f"{name} must be >= 1, got {v}")
    granule = float(args.devices * args.micro_batch)
    if law.unit == "tokens":
        if args.seq_len is not None:
            granule *= args.seq_len
        elif granule > 1:
            raise InputError("the batch is in tokens: give --seq-len to round it to "
                             "devices × micro-batch sequences")
    pred = predict_batch(law, at, anchor=anchor, rounding=args.rounding, granule=granule,
                         exponent_intervals=intervals or None)
    if args.out is not None:
        from .._io import atomic_write_text

        atomic_write_text(args.out, pred.to_json() + "\n")
    if args.json:
        print(pred.to_json())
        return 0
    u = pred.unit
    iv, riv = pred.value_interval, pred.rounded_interval
    print(f"law: {law.text()}")
    print(f"{pred.quantity} at {', '.join(f'{k}={v:.4g}' for k, v in pred.at.items())}: "
          f"{pred.value:.6g} {u} [{iv.low:.4g}, {iv.high:.4g}] {u} ({iv.level:.0%})")
    if pred.rounding != "none":
        print(f"rounded ({pred.rounding}, granule {pred.granule:g} {u}): {pred.rounded:.6g} {u}"
              f" [{riv.low:.6g}, {riv.high:.6g}] {u}")
    print(f"status: {pred.status}: {pred.status_text}")
    for note in pred.notes:
        print(f"note: {note}")
    if args.out is not None:
        print(f"prediction written to {args.out}")
    return 0


def run_list(args) -> int:
    from ..laws import PUBLISHED_LAWS

    if args.json:
        print(dumps({name: law.to_dict() for name, law in PUBLISHED_LAWS.items()}))
        return 0
    for name, law in PUBLISHED_LAWS.items():
        print(f"{name}: {law.formula}")
        print(f"  unit: {law.unit}; fitted on: {law.range_text()}")
        print(f"  source: {law.citation}")
        print(f"  confirmed: {'yes' if law.confirmed else 'no: ' + law.unconfirmed}")
    return 0
