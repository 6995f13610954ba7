"""Fit the critical batch size to published sweeps and write docs/published.md.

The data come through `empirical_batch.datasets` (the MLPerf submission curves, 20 MB,
are fetched on first use, or read from ``EMPIRICAL_BATCH_DATA``). Run from the
repository root:

    python analysis/published_sweeps.py            # writes docs/published.md
    python analysis/published_sweeps.py --stdout   # prints it instead

Every number on docs/published.md comes from this script.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from empirical_batch import datasets
from empirical_batch.fit import critical_batch_curve, fit_lr_scaling, fit_power_law, fit_tradeoff

ROOT = Path(__file__).resolve().parents[1]
N_BOOT = 2000
SEED = 0
BERT_TARGETS = [0.50, 0.60, 0.65, 0.70, 0.71, 0.715, 0.72]
BERT_ROUNDS = ["v3.0", "v3.1", "v4.0", "v4.1", "v5.0"]


def _g(x, digits=3):
    """Three significant figures; thousands separators between 100 and 10^6."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    x = float(f"{x:.{digits}g}")
    if abs(x) >= 1e6:
        return f"{x:.{digits}g}".replace("e+0", "e").replace("e+", "e")
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def _table(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(str(r[c]) for c in cols) + " |")
    return "\n".join(lines)


def zhang2024() -> str:
    data = datasets.zhang2024()
    fits = data.fit(n_boot=N_BOOT, seed=SEED).fits
    revised = data.fit(revised=True, n_boot=N_BOOT, seed=SEED).fits
    rows, b, n = [], [], []
    lr_rows = []
    for model, g in data.frame.groupby("model", sort=False):
        f, fr = fits[model], revised[model]
        rows.append({
            "model": model, "target loss": g["target_loss"].iloc[0],
            "B_crit (seq)": _g(f.b_crit),
            "95% interval": f"{_g(f.b_crit_interval.low)}–{_g(f.b_crit_interval.high)}",
            "B_crit (tokens)": _g(f.b_crit * 512), "S_min": _g(f.s_min),
            "E_min (seq)": _g(f.e_min), "log-RMSE": f"{f.log_rmse:.3f}",
            "below/above": f"{f.n_below}/{f.n_above}",
            "B_crit, revised steps": _g(fr.b_crit),
        })
        b.append(f.b_crit)
        n.append(g["n_params"].iloc[0])
        lrs = g[["batch_size"]].assign(learning_rate=g["best_run_lr"])
        distinct = lrs["learning_rate"].nunique()
        if distinct > 1:
            lf = fit_lr_scaling(lrs, n_boot=N_BOOT, seed=SEED)
            lr_rows.append({"model": model, "distinct best lrs": distinct,
                            "alpha": f"{lf.alpha:.2f}",
                            "alpha 95%": (f"{_g(lf.alpha_interval.low, 2)}–"
                                          f"{_g(lf.alpha_interval.high, 2)}"),
                            "B* (seq)": _g(lf.b_star),
                            "B* 95%": (f"{_g(lf.b_star_interval.low)}–"
                                       f"{_g(lf.b_star_interval.high)}")})
        else:
            lr_rows.append({"model": model, "distinct best lrs": distinct,
                            "alpha": "not identified", "alpha 95%": "–", "B* (seq)": "–",
                            "B* 95%": "–"})
    law = fit_power_law(np.array(n, float), np.array(b))
    text = _table(pd.DataFrame(rows))
    text += (
        f"\n\nGrowth with model size: B_crit ∝ N^k with k = {law.exponent:.3f} "
        f"(95% t-interval {law.exponent_interval.low:.3f}–"
        f"{law.exponent_interval.high:.3f}, 5 models), "
        f"i.e. ×{2 ** law.exponent:.2f} per doubling of parameters. The target loss also "
        "falls with model size (Chinchilla-optimal loss per model), so this growth mixes "
        "model size and target.\n\n"
        "Learning-rate law ε(B) = ε*/(1 + B*/B)^α fitted to the best run's learning rate:\n\n"
        + _table(pd.DataFrame(lr_rows))
    )
    return text


def mlperf_rcp() -> str:
    t = datasets.mlperf_rcp().frame
    t = t[t["ruleset"].str.startswith("training")]
    latest = t.groupby("benchmark")["ruleset"].max()
    rows = []
    for bench, ruleset in sorted(latest.items()):
        sub = t[(t["benchmark"] == bench) & (t["ruleset"] == ruleset)]
        nb = sub["batch_size"].nunique()
        if nb < 4:
            continue
        rel = sub["steps"].isna().any()
        col = "steps_rel" if rel else "steps"
        f = fit_tradeoff(sub[["batch_size"]].assign(steps=sub[col]), combine="median",
                         n_boot=N_BOOT, seed=SEED)
        rows.append({
            "benchmark": bench, "ruleset": ruleset, "batch sizes": nb,
            "range": f"{_g(sub['batch_size'].min())}–{_g(sub['batch_size'].max())}",
            "seeds": len(sub), "unit": sub["value_unit"].iloc[0],
            "B_crit": _g(f.b_crit),
            "95% interval": f"{_g(f.b_crit_interval.low)}–{_g(f.b_crit_interval.high)}",
            "S_min": "(rel.)" if rel else _g(f.s_min),
            "log-RMSE": f"{f.log_rmse:.3f}", "below/above": f"{f.n_below}/{f.n_above}",
            "extrapolated": "yes" if f.extrapolation else "",
        })
    return _table(pd.DataFrame(rows))


def mlperf_curves() -> str:
    out = []
    for rounds, label in ((BERT_ROUNDS, "v3.0–v5.0"), (None, "all rounds v1.0–v5.0")):
        sweep = datasets.mlperf_curves("bert", rounds=rounds)
        for combine in ("min", "median"):
            c = critical_batch_curve(sweep, BERT_TARGETS, config="submission",
                                     combine=combine, n_boot=N_BOOT, seed=SEED,
                                     errors="report").to_frame()
            rows = [{
                "target accuracy": r["target"], "B_crit (seq)": _g(r["b_crit"]),
                "95% interval": f"{_g(r['b_crit_low'])}–{_g(r['b_crit_high'])}",
                "S_min": _g(r["s_min"]), "batch sizes": int(r["n_batch_sizes"]),
                "log-RMSE": _g(r["log_rmse"], 2),
                "extrapolated": "yes" if r["extrapolation"] else "",
            } for _, r in c.iterrows()]
            grows = bool(np.all(np.diff(c["b_crit"].to_numpy()) > 0))
            ok = c.dropna(subset=["b_crit"])
            law = fit_power_law(1 - ok["target"].to_numpy(), ok["b_crit"].to_numpy())
            out.append(
                f"**{label}, seeds combined by {combine}** ({sweep.data['run'].nunique()} runs, "
                f"{len(sweep.metadata['excluded_runs'])} excluded: progress not logged or not "
                f"increasing; {sweep.data['submission'].nunique()} submissions):\n\n"
                + _table(pd.DataFrame(rows))
                + f"\n\nB_crit grows monotonically with the target: **{'yes' if grows else 'no'}**;"
                f" from {_g(ok['b_crit'].iloc[0])} at {ok['target'].iloc[0]} to "
                f"{_g(ok['b_crit'].iloc[-1])} at {ok['target'].iloc[-1]} "
                f"(×{ok['b_crit'].iloc[-1] / ok['b_crit'].iloc[0]:.1f}). As a power law in the "
                f"error 1 − accuracy: exponent {law.exponent:.2f} (t-interval "
                f"{law.exponent_interval.low:.2f}–{law.exponent_interval.high:.2f}, "
                "which assumes independent "
                "errors; the targets share runs, so read it as indicative).\n"
            )
    return "\n".join(out)


W2V2_TARGETS = [0.25, 0.30, 0.35, 0.38]


def vaessen2024() -> str:
    c = critical_batch_curve(datasets.vaessen2024("val_acc"), W2V2_TARGETS, n_boot=N_BOOT,
                             seed=SEED, errors="report").to_frame()
    rows = [{
        "target val_acc": r["target"], "B_crit (s of audio)": _g(r["b_crit"]),
        "95% interval": f"{_g(r['b_crit_low'])}–{_g(r['b_crit_high'])}",
        "S_min (steps)": _g(r["s_min"]), "batch sizes": int(r["n_batch_sizes"]),
        "log-RMSE": _g(r["log_rmse"], 2), "extrapolated": "yes" if r["extrapolation"] else "",
    } for _, r in c.iterrows()]
    grows = bool(np.all(np.diff(c["b_crit"].to_numpy()) > 0))
    return (_table(pd.DataFrame(rows))
            + f"\n\nB_crit grows monotonically with the target: **{'yes' if grows else 'no'}**.")


PAGE = """# Critical batch size of published sweeps

All numbers on this page are produced by

    python analysis/published_sweeps.py

which reads the published data through `empirical_batch.datasets` (origin, licence
and derivation of each in its `provenance`: `datasets.zhang2024().provenance`, ...),
fits `S(B) = S_min (1 + B_crit/B)` in log space with
`empirical_batch.fit_tradeoff` ({n_boot} bootstrap draws, seed {seed},
bootstrap-calibrated profile-likelihood intervals at 95 %) and writes this page.
"below/above" counts the measured batch sizes below and above the fitted B_crit;
"extrapolated" marks a B_crit outside the measured range.

## Zhang et al. 2024 — steps to the Chinchilla loss, 5 model sizes (C4, OLMo)

Steps to target per batch size (sequences of 512 tokens) with hyper-parameters
tuned at each batch size (min over a sweep; one value per batch size, so the
interval comes from the residual bootstrap). Column `steps_to_target`; the last
column refits with the notebook's revised list.

{zhang}

Zhang et al. define their critical batch differently: the batch at which steps exceed
linear scaling from a base batch $B_0$ by 20 %, which under the hyperbola is
$B^* = 1.2B_0 + 0.2B_{{crit}}$ ($\\approx 0.2B_{{crit}}$). Their CBS, predicted from the
B_crit fitted here and measured directly on their steps, is reconciled model by model
on the [recipe page](recipe.md#zhang-et-als-sweeps-reconciled)
(`empirical_batch.definitions`).

Caveats: step counts are quantised to the evaluation interval; at B ≥ 8192 the
small models plateau (S_min regime, possibly warm-up-limited); the best learning
rate is constant (0.00316) for four of the five models — the sweep's learning-rate
grid is coarse (half-decade steps), so the learning-rate law is not identified there.

## MLPerf reference convergence points

Benchmarks with ≥ 4 batch sizes in the latest training ruleset that contains them;
all seeds of each reference point (seed bootstrap), combined by the **median**
(robust to the documented outliers, e.g. one GPT-3 run at ~2,192 steps vs ~192).
Units: where the published unit is epochs of a data set whose size is not recorded
(`epochs`, `S_min (rel.)`), steps are in units of an unknown constant; B_crit does
not depend on it.

{rcp}

`gnn`/`rgat` and `ssd`/`retinanet` are the same reference points under an old and a
new name (the latest ruleset of `ssd` is RetinaNet on OpenImages, not SSD-ResNet34).

Caveats: hyper-parameters are tuned per batch size by the benchmark owners in the
practical MLPerf sense (schedules change with batch size), not an exhaustive grid;
values are quantised to the evaluation interval.

## MLPerf Training submissions — BERT, B_crit vs accuracy target

Each submission (round/org/system) counts as one configuration at its batch size;
its seeds are combined, and the best submission per batch size is kept. Steps to
a target are interpolated between evaluations (linear in log step).

{curves}

Caveats of these data (`datasets.provenance("mlperf_curves")`):
different hardware, software and submitters — "best submission per batch size" is
a crude stand-in for "tuned learning rate"; evaluations are ≈150–200k samples apart,
which quantises small step counts; runs stop as soon as the official target 0.720
is reached, so the hardest target has the fewest points beyond it and is the most
affected by quantisation; early targets (0.50) can be met at the first evaluation of
a run (the crossing is then the first logged point); pre-v3.0 BERT logs often lack a
usable progress counter (excluded and counted above).

## Vaessen & van Leeuwen 2024 — wav2vec 2.0 pre-training, 7 batch sizes

Contrastive validation accuracy (higher is better) every 5,000 steps; batch size in
seconds of audio per step (87.5 s … 80 min); one curve per batch size (the
retained run of a 3-value learning-rate sweep), so the interval is a residual
bootstrap. Targets up to 0.38 are reached by all seven batch sizes.

{w2v2}

Caveats (`datasets.provenance("vaessen2024")`): the schedule is fixed in steps
(400k, cyclic triangular learning rate with 50k-step cycles), not rescaled per batch
size, so curves are non-monotone between cycle minima and the first crossing of a
target can fall on a cycle peak; only three learning rates per batch size (one at
80 min); the evaluation interval (5k steps) quantises S.
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stdout", action="store_true")
    args = p.parse_args()
    page = PAGE.format(n_boot=N_BOOT, seed=SEED, zhang=zhang2024(), rcp=mlperf_rcp(),
                       curves=mlperf_curves(), w2v2=vaessen2024())
    if args.stdout:
        print(page)
    else:
        out = ROOT / "docs" / "published.md"
        out.write_text(page)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
