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

from ..errors import InputError
from ..rules import lr_rules
from ..transfer import HPARAMS, OPTIMIZERS, TRANSFER_RULES, RegimeWarning
from .output import command

_DESCRIPTION = """\
Move optimizer hyperparameters from batch B to batch B' with published rules
(linear, 2018 closed form, square-root/SDE, surge law, β2 half-life, model-EMA,
AdamW timescale, steps from the fitted tradeoff) and check each rule's regime.
Give --b-noise (the gradient noise scale) to use the 2018 closed form (SGD) or the
surge law (Adam) and to check regimes; give two of --b-crit/--s-min/--e-min
(`empirical-batch fit` prints them) to scale steps along the fitted tradeoff.

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
                             f"{', '.join(TRANSFER_RULES)}")
    parser.add_argument("--b-noise", type=float, help="gradient noise scale B_noise")
    g = parser.add_argument_group("fitted tradeoff (give two, optional)")
    g.add_argument("--b-crit", type=float, help="critical batch size E_min/S_min")
    g.add_argument("--s-min", type=float, help="fewest steps to the target")
    g.add_argument("--e-min", type=float, help="fewest examples to the target")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=command(run))


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
    rule = None
    if args.set_rule:
        rule = dict(args.set_rule)
        if args.rule is not None:
            rule.setdefault("lr", args.rule)
    elif args.rule is not None:
        rule = args.rule
    tradeoff = None
    if any(v is not None for v in (args.b_crit, args.s_min, args.e_min)):
        tradeoff = tradeoff_from_args(args.s_min, args.e_min, args.b_crit)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", RegimeWarning)
        result = transfer(hparams, args.from_batch, args.to_batch, optimizer=args.optimizer,
                          rule=rule, b_noise=args.b_noise, tradeoff=tradeoff)
    prog = "empirical-batch transfer"
    for message in result.warnings:
        print(f"{prog}: warning: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(f"batch {result.from_batch:g} → {result.to_batch:g} (κ = {result.kappa:.4g}), "
          f"optimizer {result.optimizer}"
          + (f", B_noise = {result.b_noise:g}" if result.b_noise is not None else ""))
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
            print(f"  {r}: {TRANSFER_RULES[r].formula} ({TRANSFER_RULES[r].citation})")
    return 0
