"""`empirical-batch plan`: batch size and device count from a fitted tradeoff.

Give two of ``--s-min``, ``--e-min``, ``--b-crit`` (the third follows from
B_crit = E_min/S_min), describe the hardware, and get the Pareto frontier of
wall time against cost (or every candidate with ``--all``), with an optional figure.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DataError, InputError
from ..planning import Hardware
from .output import command


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

example:
  empirical-batch plan --b-crit 1200 --s-min 10000 --throughput 800 \\
      --max-device-batch 128 --allreduce 0.03 --price 2.5 --out frontier.png
"""


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Show defaults, except the uninformative None/False ones."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def add_parser(subparsers, name: str, help_text: str) -> None:
    d = Hardware()
    parser = subparsers.add_parser(
        name, help=help_text, description=_DESCRIPTION, formatter_class=_Formatter,
    )
    g = parser.add_argument_group("tradeoff (give two)")
    g.add_argument("--s-min", type=float, help="fewest steps to the target (infinite batch)")
    g.add_argument("--e-min", type=float, help="fewest examples to the target (batch 1 limit)")
    g.add_argument("--b-crit", type=float, help="critical batch size E_min/S_min")
    h = parser.add_argument_group("hardware")
    h.add_argument("--throughput", type=float, default=d.throughput,
                   help="examples per second per device")
    h.add_argument("--max-device-batch", type=int, default=d.max_device_batch,
                   help="largest per-device batch that fits")
    h.add_argument("--step-overhead", type=float, default=d.step_overhead_s,
                   help="fixed seconds per step")
    h.add_argument("--allreduce", type=float, default=d.allreduce_s,
                   help="all-reduce bandwidth seconds per step (many-device limit)")
    h.add_argument("--latency", type=float, default=d.latency_s,
                   help="all-reduce seconds per log2(devices) hop")
    h.add_argument("--price", type=float, default=d.price_per_device_hour,
                   help="price per device-hour")
    h.add_argument("--max-devices", type=int, default=d.max_devices, help="devices available")
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
    parser.set_defaults(run=command(run, inputs=("fit", "timings"), outputs=("out",)))


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
    """The Tradeoff of the first identified fit in ``empirical-batch fit --json`` output."""
    from .._io import read_json
    from ..tradeoff import Tradeoff

    data = read_json(path)
    fits = data.get("fits", [data]) if isinstance(data, dict) else data
    for f in fits if isinstance(fits, list) else []:
        if isinstance(f, dict) and f.get("status") == "identified":
            try:
                return Tradeoff(s_min=float(f["s_min"]), e_min=float(f["e_min"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise DataError(f"{path}: the identified fit lacks a numeric s_min or e_min "
                                f"({type(exc).__name__}: {exc})") from None
    raise InputError(f"{path}: no fit with status 'identified' (a bound on B_crit does not "
                     "fix the tradeoff; plan from --s-min/--b-crit instead)")


def run(args) -> int:
    import json

    from ..planning import frontier, frontier_bend, plan
    from .demo import format_table

    if args.fit is not None:
        if any(v is not None for v in (args.s_min, args.e_min, args.b_crit)):
            raise InputError("give either --fit or two of --s-min, --e-min, --b-crit")
        t = tradeoff_from_fit_json(args.fit)
    else:
        t = tradeoff_from_args(args.s_min, args.e_min, args.b_crit)
    hw = Hardware(
        throughput=args.throughput, max_device_batch=args.max_device_batch,
        step_overhead_s=args.step_overhead, allreduce_s=args.allreduce,
        latency_s=args.latency, price_per_device_hour=args.price,
        max_devices=args.max_devices,
    )
    model = None
    if args.timings is not None:
        from .._io import read_csv
        from ..throughput import fit_throughput

        model = fit_throughput(read_csv(args.timings))
    df = plan(t, hw, batch_sizes=args.batch_sizes, devices=args.devices,
              throughput_model=model)
    f = frontier(df)
    bend = frontier_bend(df)
    if args.json:
        out = {"s_min": t.s_min, "e_min": t.e_min, "b_crit": t.b_crit,
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
    print(f"S_min = {t.s_min:.6g}, E_min = {t.e_min:.6g}, B_crit = {t.b_crit:.6g}")
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
