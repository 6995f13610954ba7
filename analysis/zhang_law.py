"""Zhang et al. 2024's critical batch per model, as a law in D; and the nanochat example.

Reads Zhang et al.'s steps-to-target table through `empirical_batch.datasets` (shipped,
MIT), fits $S(B) = S_{min}(1 + B_{crit}/B)$ per model (`cell_optima` on a steps grid),
then $B_{crit} = a D^{k}$ over the five models (D = the model's Chinchilla budget in
tokens, ``chinchilla_steps_at_bs256`` × 256 × 512), and "N and D" against "D only"
(`select_law`). It also runs the nanochat depth-34 prediction of the docs page. Run from
the repository root:

    python analysis/zhang_law.py            # rewrites the generated blocks of docs/laws.md
    python analysis/zhang_law.py --stdout   # prints them instead

Every number in those blocks comes from this script.
"""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path

from empirical_batch import datasets
from empirical_batch.laws import (
    Anchor,
    cell_optima,
    fit_law,
    get_law,
    load_grid,
    predict_batch,
    select_law,
)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "laws.md"
N_BOOT = 1000
SEED = 0


def zhang_block() -> str:
    grid = load_grid(datasets.zhang2024().frame, layout="zhang")
    optima = cell_optima(grid, n_boot=N_BOOT, seed=SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        law = fit_law(optima, "b_crit", ("tokens",), name="zhang2024_b_crit_fitted")
        sel = select_law(optima, "b_crit")
    f = optima.frame
    lines = ["| model | N | D (tokens) | B_crit (tokens) | 95% interval | status |",
             "| --- | --- | --- | --- | --- | --- |"]
    for _, r in f.iterrows():
        lines.append(f"| {r['cell']} | {r['n_params']:.3g} | {r['tokens']:.3g} | "
                     f"{r['b_crit']:.3g} | {r['b_crit_low']:.3g}–{r['b_crit_high']:.3g} | "
                     f"{r['b_crit_status']} |")
    ci = law.exponent_interval
    lines += [
        "",
        f"Law in D over the {law.n} models: $B_{{crit}} = {law.coefficient:.3g}\\,"
        f"D^{{{law.exponents[0]:.3f}}}$ tokens, exponent 95 % interval "
        f"[{ci.low:.3f}, {ci.high:.3f}], log-RMSE {law.log_rmse:.3f}, fitted on "
        f"D = {law.ranges[0][0]:.3g}–{law.ranges[0][1]:.3g} tokens.",
        "",
        f"D only or N and D: **{sel.chosen}** — {sel.reason}.",
    ]
    return "\n".join(lines)


def nanochat_block() -> str:
    import json

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bare = predict_batch(get_law("power_lines_b_opt"), {"tokens": 3e10},
                             anchor=Anchor(524288, {"tokens": 1e9}))
        p = predict_batch(get_law("power_lines_b_opt"), {"tokens": 3e10},
                          anchor=Anchor(524288, {"tokens": 1e9}),
                          exponent_intervals={"tokens": (0.30, 0.45)})
    d = json.loads(bare.to_json())  # as the command prints it (null for NaN)
    keep = {k: d[k] for k in ("value", "value_interval", "rounded", "status",
                              "beyond_anchor")}
    keep["value"] = round(keep["value"], 1)
    iv, riv = p.value_interval, p.rounded_interval
    return "\n".join([
        "```",
        "$ empirical-batch law predict --law power_lines_b_opt --anchor batch=524288,"
        "tokens=1e9 \\",
        "      --at tokens=3e10 --json   # excerpt",
        json.dumps(keep),
        f"note: {bare.notes[0]}",
        "",
        "$ empirical-batch law predict --law power_lines_b_opt --anchor batch=524288,"
        "tokens=1e9 \\",
        "      --at tokens=3e10 --exponent-interval tokens=0.30:0.45",
        f"b_opt at tokens=3e+10: {p.value:.6g} tokens [{iv.low:.4g}, {iv.high:.4g}] tokens",
        f"rounded (pow2): {p.rounded:.6g} tokens [{riv.low:.6g}, {riv.high:.6g}] tokens",
        f"status: {p.status}: {p.status_text}",
        "```",
    ])


BLOCKS = {"zhang": zhang_block, "nanochat": nanochat_block}


def render(text: str) -> str:
    for name, make in BLOCKS.items():
        pattern = re.compile(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{PAGE}: no <!-- {name}:start --> … <!-- {name}:end --> block")
        block = make()
        text = pattern.sub(lambda m, b=block: m.group(1) + b + "\n" + m.group(2), text)
    return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stdout", action="store_true")
    args = p.parse_args()
    if args.stdout:
        for make in BLOCKS.values():
            print(make(), end="\n\n")
        return
    PAGE.write_text(render(PAGE.read_text()))
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
