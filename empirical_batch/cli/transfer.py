"""`empirical-batch transfer`: move a configuration from one batch size to another.

Prints, per hyperparameter, old → new with the rule used, whether the move stays in
the rule's regime, and the rules' citations (``--json`` for the machine-readable
result of `empirical_batch.transfer.transfer`). Regime warnings go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from ..errors import InputError
from ..rules import RULES, lr_rules
from ..transfer import HPARAMS, OPTIMIZERS, RegimeWarning
from .output import add_tokens_per_example, command

_DESCRIPTION = """\
Move optimizer hyperparameters from batch B to batch B' with published rules
(linear, 2018 closed form, square-root/SDE, surge law, β2 half-life, model-EMA,
AdamW timescale, steps from the fitted tradeoff) and check each rule's regime.
Give --b-noise (the gradient noise scale) to use the 2018 closed form (SGD) or the
surge law (Adam) and to check regimes, or --noise-log to take it from a noise log (its
last resolved value: the noise scale where training is now); give two of
--b-crit/--s-min/--e-min (`empirical-batch fit` prints them) to scale steps along the
fitted tradeoff. The batch sizes, B_noise and B_crit share one unit (--unit; the log's
is read from its measured b_simple_tokens or converted with --tokens-per-example,
or mixing is refused).

example:
  empirical-batch transfer --from-batch 256 --to-batch 2048 --optimizer adamw \\
      --lr 3e-4 --beta2 0.95 --weight-decay 0.1 --total-steps 100000 --b-noise 4000
"""

_FLAGS = {name: "--" + name.replace("_", "-") for name in HPARAMS}
_HELP = {
    "lr": "learning rate", "momentum": "SGD momentum", "beta1": "Adam β1",
    "beta2": "Adam β2", "eps": "Adam ε", "weight_decay": "weight decay λ",
    "ema_decay": "model-EMA decay ρ", "warmup_steps": "warmup steps",
    "total_steps": "total training steps",
}


def _rule_pair(text: str) -> tuple[str, str]:
    name, sep, rule = text.partition("=")
    if not sep or not name or not rule:
        raise argparse.ArgumentTypeError(f"expected HPARAM=RULE, got {text!r}")
    return name.strip().replace("-", "_"), rule.strip()


def add_parser(subparsers, name: str, help_text: str) -> None:
    parser = subparsers.add_parser(
        name, help=help_text, description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from-batch", type=float, required=True, help="current batch size B")
    parser.add_argument("--to-batch", type=float, required=True, help="new batch size B'")
    parser.add_argument("--optimizer", required=True, choices=OPTIMIZERS)
    h = parser.add_argument_group("hyperparameters (give any)")
    for key, flag in _FLAGS.items():
        h.add_argument(flag, dest=key, type=float, help=_HELP[key])
    parser.add_argument("--rule", choices=lr_rules(),
                        help="learning-rate rule (default: sgd_optimal/surge with --b-noise, "
                             "else linear/sqrt)")
    parser.add_argument("--set-rule", type=_rule_pair, action="append", default=[],
                        metavar="HPARAM=RULE",
                        help=f"rule for one hyperparameter, repeatable; rules: "
                             f"{', '.join(RULES)}")
    parser.add_argument("--b-noise", type=float, help="gradient noise scale B_noise")
    parser.add_argument("--noise-log", type=Path, metavar="LOG",
                        help="take B_noise from a noise log (CSV or JSONL): its last "
                             "resolved value")
    parser.add_argument("--log-where", metavar="EXPR",
                        help="keep one run of a --noise-log that holds several (a pandas "
                             "query)")
    parser.add_argument("--quantity", choices=("b_simple", "b_noise"),
                        help="noise scale of --noise-log (default b_noise where the log has "
                             "it, else b_simple with a warning)")
    parser.add_argument("--unit", choices=("examples", "sequences", "tokens"),
                        help="unit of --from-batch, --to-batch and --b-noise (default the "
                             "log's, else examples)")
    add_tokens_per_example(parser, "to convert the log's unit")
    g = parser.add_argument_group("fitted tradeoff (give two, optional)")
    g.add_argument("--b-crit", type=float, help="critical batch size E_min/S_min")
    g.add_argument("--s-min", type=float, help="fewest steps to the target")
    g.add_argument("--e-min", type=float, help="fewest examples to the target")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=command(run, inputs=("noise_log",)))


def _regime(ok) -> str:
    return "?" if ok is None else ("yes" if ok else "NO")


def run(args) -> int:
    import pandas as pd

    from ..transfer import transfer
    from .demo import format_table
    from .plan import tradeoff_from_args

    hparams = {k: getattr(args, k) for k in HPARAMS if getattr(args, k) is not None}
    if not hparams:
        raise InputError("give at least one hyperparameter: " + ", ".join(_FLAGS.values()))
    rule: str | dict[str, str] | None = None
    if args.set_rule:
        rules: dict[str, str] = {}
        for name, r in args.set_rule:
            if rules.get(name, r) != r:
                raise InputError(f"two rules for {name}: --set-rule {name}={rules[name]} and "
                                 f"--set-rule {name}={r}; give one")
            rules[name] = r
        if args.rule is not None:
            if rules.get("lr", args.rule) != args.rule:
                raise InputError(f"two learning-rate rules: --rule {args.rule} and --set-rule "
                                 f"lr={rules['lr']}; give one")
            rules["lr"] = args.rule
        rule = rules
    elif args.rule is not None:
        rule = args.rule
    b_noise, unit, source = _b_noise(args)
    tradeoff = None
    if any(v is not None for v in (args.b_crit, args.s_min, args.e_min)):
        tradeoff = tradeoff_from_args(args.s_min, args.e_min, args.b_crit)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", RegimeWarning)
        result = transfer(hparams, args.from_batch, args.to_batch, optimizer=args.optimizer,
                          rule=rule, b_noise=b_noise, tradeoff=tradeoff)
    prog = "empirical-batch transfer"
    for message in result.warnings:
        print(f"{prog}: warning: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict() | {"unit": unit}, indent=2))
        return 0
    if source:
        print(source)
    print(f"batch {result.from_batch:g} → {result.to_batch:g} {unit} (κ = {result.kappa:.4g}), "
          f"optimizer {result.optimizer}"
          + (f", B_noise = {result.b_noise:.6g} {unit}" if result.b_noise is not None else ""))
    table = pd.DataFrame({
        "hyperparameter": [v.name for v in result.values],
        "old": [v.old for v in result.values],
        "new": [v.new for v in result.values],
        "rule": [v.rule for v in result.values],
        "in regime": [_regime(v.in_regime) for v in result.values],
    })
    print(format_table(table, digits=6))
    print("notes:")
    for v in result.values:
        print(f"  {v.name}: {v.note}")
    print("rules:")
    for r in dict.fromkeys(v.rule for v in result.values):
        if r != "unchanged":
            print(f"  {r}: {RULES[r].formula} ({RULES[r].citation})")
    return 0


def _b_noise(args):
    """(B_noise or None, the unit of the batch sizes, where B_noise came from)."""
    from ..noise_log import final_noise_scale
    from ..units import check_unit

    if args.noise_log is None:
        if args.quantity is not None:
            raise InputError("--quantity names the noise scale of --noise-log; give the log")
        return args.b_noise, check_unit(args.unit or "examples", "--unit"), ""
    if args.b_noise is not None:
        raise InputError("give --b-noise or --noise-log, not both")
    final = final_noise_scale(args.noise_log, args.quantity, args.log_where)
    unit = check_unit(args.unit or final.unit, "--unit")
    note = f"{args.noise_log}: {final.describe()}"
    if unit != final.unit:
        conv = final_noise_scale(args.noise_log, args.quantity, args.log_where, unit=unit,
                                 tokens_per_example=args.tokens_per_example)
        note = (f"{args.noise_log}: {conv.describe()}" if conv.column
                else f"{note} = {conv.value:.6g} {unit}")
        return conv.value, unit, note
    return final.value, unit, note
