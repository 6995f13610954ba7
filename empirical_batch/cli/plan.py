"""`empirical-batch plan`: batch size and device count from a fitted tradeoff.

Give two of ``--s-min``, ``--e-min``, ``--b-crit`` (the third follows from
B_crit = E_min/S_min), describe the hardware, and get the Pareto frontier of
wall time against cost (or every candidate with ``--all``), with an optional figure.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InputError
from ..planning import Hardware
from .output import add_tokens_per_example, command


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


_DESCRIPTION = """\
Choose a global batch size and a device count from a fitted tradeoff.
Give two of --s-min, --e-min, --b-crit (the third follows from B_crit = E_min/S_min;
`empirical-batch fit` prints them), describe the hardware, and get the Pareto frontier
of wall time against cost (every candidate with --all), with an optional figure.

Or take the tradeoff from a noise log of a run that reached the target at its end
(--noise-log LOG --batch-size B_REF): S_min is the run's progress in infinite-batch
steps and B_crit the progress average of its noise scale (McCandlish et al. 2018,
eq. 2.11 and App. D). Batch sizes, examples and throughput are in --unit (default the
fit's or the log's unit, else examples; converted with --tokens-per-example, or
read from the log's measured per-token b_simple_tokens where it has them).
Without hardware options the plan runs on a placeholder device (it says so).

examples:
  empirical-batch plan --b-crit 1200 --s-min 10000 --throughput 800 \\
      --max-device-batch 128 --allreduce 0.03 --price 2.5 --out frontier.png
  empirical-batch plan --noise-log gns.csv --batch-size 256 --throughput 800
"""


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Show defaults, except the uninformative None/False ones."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


_HARDWARE = {"throughput": "throughput", "max_device_batch": "max_device_batch",
             "step_overhead": "step_overhead_s", "allreduce": "allreduce_s",
             "latency": "latency_s", "price": "price_per_device_hour",
             "max_devices": "max_devices"}


def add_parser(subparsers, name: str, help_text: str) -> None:
    d = Hardware()
    parser = subparsers.add_parser(
        name, help=help_text, description=_DESCRIPTION, formatter_class=_Formatter,
    )
    g = parser.add_argument_group("tradeoff (give two)")
    g.add_argument("--s-min", type=float, help="fewest steps to the target (infinite batch)")
    g.add_argument("--e-min", type=float, help="fewest examples to the target (batch 1 limit)")
    g.add_argument("--b-crit", type=float, help="critical batch size E_min/S_min")
    g.add_argument("--b-crit-from", type=Path, metavar="PRED.json",
                   help="take B_crit (and its interval, reported) from `empirical-batch law "
                        "predict --out` (with one of --s-min, --e-min)")
    g.add_argument("--noise-log", type=Path, metavar="LOG",
                   help="take S_min and B_crit from a noise log (CSV or JSONL) of a run at "
                        "--batch-size that reached the target at its end")
    g.add_argument("--batch-size", type=float, help="the --noise-log run's batch size")
    g.add_argument("--log-where", metavar="EXPR",
                   help="keep one run of a --noise-log that holds several (a pandas query)")
    g.add_argument("--quantity", choices=("b_simple", "b_noise"),
                   help="noise scale of --noise-log (default b_noise where the log has it, "
                        "else b_simple with a warning)")
    parser.add_argument("--unit", choices=("examples", "sequences", "tokens"),
                        help="unit of batch sizes, examples and throughput (default the "
                             "fit's or the log's, else examples)")
    add_tokens_per_example(parser, "to convert the fit's or the log's unit to --unit")
    h = parser.add_argument_group(
        "hardware (each one not given takes the placeholder value shown, and is reported)")
    h.add_argument("--throughput", type=float,
                   help=f"examples per second per device (placeholder {d.throughput:g})")
    h.add_argument("--max-device-batch", type=int,
                   help=f"largest per-device batch that fits (placeholder "
                        f"{d.max_device_batch})")
    h.add_argument("--step-overhead", type=float,
                   help=f"fixed seconds per step (placeholder {d.step_overhead_s:g})")
    h.add_argument("--allreduce", type=float,
                   help="all-reduce bandwidth seconds per step (many-device limit; "
                        f"placeholder {d.allreduce_s:g})")
    h.add_argument("--latency", type=float,
                   help=f"all-reduce seconds per log2(devices) hop (placeholder "
                        f"{d.latency_s:g})")
    h.add_argument("--price", type=float,
                   help=f"price per device-hour (placeholder {d.price_per_device_hour:g})")
    h.add_argument("--max-devices", type=int,
                   help=f"devices available (placeholder {d.max_devices})")
    parser.add_argument("--batch-sizes", type=_int_list,
                        help="comma-separated global batch sizes (default: powers of two "
                             "around B_crit)")
    parser.add_argument("--devices", type=_int_list,
                        help="comma-separated device counts (default: powers of two)")
    parser.add_argument("--all", action="store_true", help="print every candidate, not only "
                        "the Pareto frontier")
    g.add_argument("--fit", type=Path, metavar="FIT.json",
                   help="take S_min and E_min from `empirical-batch fit --json` output "
                        "(the first identified fit in it)")
    h.add_argument("--timings", type=Path, metavar="CSV",
                   help="measured step times (columns micro_batch, devices, accumulation, "
                        "step_seconds): plan with a fitted throughput model (Pollux) instead "
                        "of --throughput/--allreduce/--latency")
    parser.add_argument("--out", type=Path, help="write the frontier figure here")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true",
                     help="print the plan as JSON (frontier, bend, inputs) instead of tables")
    fmt.add_argument("--csv", action="store_true",
                     help="print the frontier (every candidate with --all) as CSV")
    parser.set_defaults(run=command(run, inputs=("fit", "timings", "noise_log", "b_crit_from"),
                                            outputs=("out",)))


def tradeoff_from_args(s_min=None, e_min=None, b_crit=None):
    """The Tradeoff from exactly two of S_min, E_min and B_crit."""
    from ..tradeoff import Tradeoff

    given = {k: v for k, v in (("--s-min", s_min), ("--e-min", e_min), ("--b-crit", b_crit))
             if v is not None}
    if len(given) != 2:
        raise InputError(
            f"give exactly two of --s-min, --e-min, --b-crit; got {sorted(given) or 'none'}"
        )
    for k, v in given.items():
        if not v > 0:
            raise InputError(f"{k} must be > 0, got {v!r}")
    if b_crit is None:
        return Tradeoff(s_min=s_min, e_min=e_min)
    return Tradeoff.from_b_crit(b_crit, s_min=s_min, e_min=e_min)


def tradeoff_from_fit_json(path: Path):
    """The Tradeoff of the first identified fit in ``empirical-batch fit --json`` output
    (its unit: `tradeoff_and_unit_from_fit_json`)."""
    return tradeoff_and_unit_from_fit_json(path)[0]


def tradeoff_and_unit_from_fit_json(path: Path):
    """The Tradeoff of the first identified fit in ``empirical-batch fit --json`` output
    and the fit's unit (``"examples"`` for output that names none)."""
    from ..tradeoff import Tradeoff
    from .output import read_fits

    fits, unit = read_fits(path)
    for f in fits:
        if f is not None and f.status == "identified":
            return Tradeoff(s_min=f.s_min, e_min=f.e_min), unit
    raise InputError(f"{path}: no fit with status 'identified' (a bound on B_crit does not "
                     "fix the tradeoff; plan from --s-min/--b-crit instead)")


def run(args) -> int:
    import json

    from ..planning import frontier, frontier_bend, plan
    from .demo import format_table

    t, unit, source = _tradeoff(args)
    given = {k: getattr(args, k) for k in _HARDWARE if getattr(args, k) is not None}
    hw = Hardware(**{_HARDWARE[k]: v for k, v in given.items()})
    notes = _hardware_notes(given, hw, args.timings is not None)
    model = None
    if args.timings is not None:
        from .._io import numeric_columns, read_csv
        from ..throughput import COLUMNS, fit_throughput

        model = fit_throughput(numeric_columns(read_csv(args.timings), COLUMNS,
                                               str(args.timings)))
    df = plan(t, hw, batch_sizes=args.batch_sizes, devices=args.devices,
              throughput_model=model).frame
    f = frontier(df)
    bend = frontier_bend(df)
    notes += _edge_notes(df, bend, hw)
    if args.json:
        out = {"s_min": t.s_min, "e_min": t.e_min, "b_crit": t.b_crit, "unit": unit,
               "source": source, "notes": notes,
               "placeholder_hardware": sorted(set(_HARDWARE) - set(given)),
               "hardware": hw.to_dict(),
               "throughput_model": None if model is None else model.to_dict(),
               "frontier": json.loads(f.to_json(orient="records")),
               "bend": json.loads(bend.to_json())}
        if model is not None:
            out["saturating_micro_batch"] = model.saturating_micro_batch()
        print(json.dumps(out, indent=1))
        return 0
    if args.csv:
        print((df if args.all else f).to_csv(index=False), end="")
        return 0
    if source:
        print(source)
    print(f"S_min = {t.s_min:.6g} steps, E_min = {t.e_min:.6g} {unit}, "
          f"B_crit = {t.b_crit:.6g} {unit}; batch sizes and throughput in {unit}")
    if model is not None:
        print(model)
        for note in model.notes:
            print(f"note: {note}")
        m_sat = model.saturating_micro_batch()
        print(f"smallest batch that saturates throughput (90 % of a device's compute rate): "
              f"{m_sat:.4g} per device, i.e. B = {m_sat * bend.devices:.4g} on the bend's "
              f"{int(bend.devices)} devices")
    print(f"{len(df)} feasible candidates, {len(f)} on the Pareto frontier")
    print(format_table(df if args.all else f))
    print(
        f"bend (least time × cost): batch_size={int(bend.batch_size)} "
        f"devices={int(bend.devices)} wall_hours={bend.wall_hours:.4g} cost={bend.cost:.4g}"
    )
    for note in notes:
        print(f"note: {note}")
    if args.out is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from ..plot.planning import plot_frontier

        ax = plot_frontier(df, tradeoff=t)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        ax.figure.tight_layout()
        from .._io import atomic_path

        with atomic_path(args.out) as tmp:
            ax.figure.savefig(tmp, dpi=120)
        plt.close(ax.figure)
        print(f"figure: {args.out}")
    return 0


def _tradeoff(args):
    """(Tradeoff, unit, where it came from) from --fit, --noise-log or two numbers, in
    --unit."""
    from ..units import check_unit, convert

    sources = [n for n, v in (("--fit", args.fit), ("--noise-log", args.noise_log)) if v]
    numbers = any(v is not None for v in (args.s_min, args.e_min, args.b_crit))
    if len(sources) > 1 or (sources and numbers):
        raise InputError("give one of --fit, --noise-log, or two of --s-min, --e-min, "
                         "--b-crit")
    if args.batch_size is not None and args.noise_log is None:
        raise InputError("--batch-size is the --noise-log run's batch size; give --noise-log")
    source = ""
    if args.fit is not None:
        t, unit = tradeoff_and_unit_from_fit_json(args.fit)
        source = f"tradeoff from {args.fit}"
    elif args.noise_log is not None:
        from ..schedule import NoiseTrajectory

        if args.batch_size is None:
            raise InputError("--noise-log needs --batch-size (the logged run's batch size, "
                             "in the log's unit)")
        traj = NoiseTrajectory.from_log(args.noise_log, args.batch_size,
                                        quantity=args.quantity, where=args.log_where,
                                        unit=args.unit,
                                        tokens_per_example=args.tokens_per_example)
        t, unit = traj.tradeoff(), traj.unit
        name = "B_noise" if traj.quantity == "b_noise" else "B_simple (for B_noise)"
        if traj.source.endswith("_tokens)"):
            name += " as the log measured it per token"
        source = (f"tradeoff from {args.noise_log}: S_min = the run's progress, B_crit = "
                  f"the progress average of its {name}, for a target reached at the end "
                  "of the logged run (the model at the optimal learning rate, App. D)")
    elif args.b_crit_from is not None:
        if args.b_crit is not None:
            raise InputError("give --b-crit or --b-crit-from, not both")
        from ..laws import load_prediction

        pred = load_prediction(args.b_crit_from)
        unit, source = pred.unit, pred.describe("B_crit")
        t = tradeoff_from_args(args.s_min, args.e_min, pred.value)
    else:
        t, unit = tradeoff_from_args(args.s_min, args.e_min, args.b_crit), "examples"
        if args.unit is not None:
            unit = check_unit(args.unit, "--unit")
    unit = check_unit(unit, "the tradeoff's unit")
    if args.unit is not None and check_unit(args.unit, "--unit") != unit:
        from ..tradeoff import Tradeoff

        f = convert(1.0, unit, args.unit, tokens_per_example=args.tokens_per_example)
        t, unit = Tradeoff(s_min=t.s_min, e_min=t.e_min * f), check_unit(args.unit)
    return t, unit, source


def _hardware_notes(given: dict, hw: Hardware, timings: bool) -> list[str]:
    """What of the hardware is the built-in placeholder (measured --timings replace the
    throughput and communication terms, not the memory, price or device count)."""
    if not given and not timings:
        return ["the hardware is the built-in placeholder (throughput "
                f"{hw.throughput:g} per device per second, {hw.max_device_batch} per device, "
                f"no step overhead or communication time, price {hw.price_per_device_hour:g}"
                f", {hw.max_devices} devices): the times and costs illustrate the method, "
                "they are not your cluster's; describe it with --throughput, "
                "--max-device-batch, --allreduce, --price (or --timings)"]
    relevant = ("max_device_batch", "price", "max_devices") if timings else tuple(_HARDWARE)
    missing = [f"--{k.replace('_', '-')} {getattr(hw, _HARDWARE[k]):g}" for k in relevant
               if k not in given]
    return ([f"placeholder values for the hardware not described: {', '.join(missing)}"]
            if missing else [])


def _edge_notes(df, bend, hw: Hardware) -> list[str]:
    """Whether the bend sits at an edge of the candidate grid (the best choice may lie
    beyond it)."""
    notes = []
    b = df["batch_size"].to_numpy()
    if bend.batch_size >= b.max():
        notes.append(f"the bend is at the largest batch size tried ({int(b.max())}): a "
                     "larger one may be better; widen --batch-sizes (or --max-device-batch "
                     "/ --max-devices, which cap it)")
    elif bend.batch_size <= b.min():
        notes.append(f"the bend is at the smallest batch size tried ({int(b.min())}): a "
                     "smaller one may be better; widen --batch-sizes")
    n = df["devices"].to_numpy()
    if bend.devices >= n.max():
        cap = " (the --max-devices limit)" if n.max() >= hw.max_devices else ""
        notes.append(f"the bend uses the most devices tried, {int(n.max())}{cap}: more "
                     "devices may be better")
    return notes
