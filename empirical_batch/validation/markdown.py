"""The report's Markdown: one number format, one table writer, the report itself."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["fmt", "md_table", "render_markdown"]


def fmt(x, digits: int = 3) -> str:
    """A cell: strings as they are, booleans as yes/no, missing or non-finite numbers as
    "–", other numbers to ``digits`` significant digits."""
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    if isinstance(x, bool | np.bool_):
        return "yes" if x else "no"
    return f"{x:.{digits}g}"


def md_table(frame: pd.DataFrame, cols: dict) -> str:
    """The columns ``cols`` (name → heading) of ``frame`` that it has, as a Markdown table."""
    cols = {c: name for c, name in cols.items() if c in frame.columns}
    head = "| " + " | ".join(cols.values()) + " |\n|" + "---|" * len(cols) + "\n"
    body = "".join("| " + " | ".join(fmt(r[c]).replace("|", "\\|") for c in cols) + " |\n"
                   for _, r in frame.iterrows())
    return head + body


def render_markdown(name, crit, t1, os_table, os_sum, noise, claims=None,
                    branched=None) -> str:
    """The report as Markdown tables (the docs page quotes these)."""
    parts = [f"# Harness report (`{name}` configuration)\n"]
    if claims is not None and len(claims):
        parts.append("## Claims of the paper, checked (generated from the tables below)\n")
        parts.append(
            "Rules: `empirical_batch/validation/claims.py`. A claim holds only where its "
            "interval supports it. value/lo/hi: (a) B_crit over the progress-weighted mean "
            "of B_simple up to the target, farthest from 1, (b) growth of B_crit with its "
            "interval, (c) the smaller binomial tail probability of the misses, (d) B_crit "
            "ratio Adam/SGD, (e) targets where the averaged B_noise / B_simple is closer, "
            "of hi compared, (f) checkpoints where the keep-up point of the branches' rule "
            "(with B_crit) meets the branched bracket / is apart from it, of hi compared. "
            "*local*: the same test with the noise scales at the target instead of averaged "
            "up to it ((f): the bracket's implied noise scale against the local B_noise).\n")
        parts.append(md_table(claims, {
            "task": "task", "optimizer": "opt", "claim": "claim", "statement": "statement",
            "verdict": "verdict", "value": "value", "lo": "lo", "hi": "hi",
            "verdict_local": "local", "value_local": "value (local)",
            "evidence": "numbers behind it"}))
    parts.append("\n## B_crit against the noise scales: averaged up to the target, and at it\n")
    parts.append(
        "The model's B_crit at a target is the progress-weighted mean of the noise scale "
        "up to it, ∫B ds / ∫ds with ds = dt/(1 + B_noise/B) (App. D): *avg* columns, "
        "along the reference run from step 0 to where its logged loss curve crosses the "
        "target (interpolated). The values where the reference run reaches the target are "
        "beside them. "
        "Targets: the hardest is 2 % above the best loss that at least K batch sizes "
        "reach (K = max(5, half of them)); rule in `empirical_batch/fit/targets.py`.\n")
    parts.append(md_table(crit, {
        "task": "task", "optimizer": "opt", "target": "target loss", "b_crit": "B_crit",
        "b_crit_low": "lo", "b_crit_high": "hi", "n_batch_sizes": "n_B",
        "b_simple_avg": "B_simple avg", "b_noise_avg": "B_noise avg",
        "b_crit_over_b_simple_avg": "B_crit/B_simple avg",
        "b_crit_over_b_noise_avg": "B_crit/B_noise avg",
        "b_simple": "B_simple at L", "b_noise": "B_noise at L",
        "b_crit_over_b_simple": "B_crit/B_simple at L",
        "b_crit_over_b_noise": "B_crit/B_noise at L",
        "extrapolation": "extrap.", "lr_at_grid_edge": "lr at grid edge (B)", "note": "note"}))
    if "b_crit_over_b_simple_avg_rate" in crit.columns:
        parts.append(_weights_section(crit))
    parts.append("\n## Table-1-style summary (start / averaged)\n")
    parts.append("Start: B_simple and B_noise measured at the step listed (0 where defined). "
                 "Averaged: along the reference run until the hardest target, weighted by "
                 "progress ds = dt/(1 + B_noise/B) (App. D); the step-weighted mean beside it. "
                 "Common target: the easiest of the task's optimizers' hardest targets, where "
                 "the optimizers are compared.\n")
    parts.append(md_table(t1, {
        "task": "task", "optimizer": "opt", "b_crit_start": "B_crit start",
        "b_crit_averaged": "B_crit averaged", "b_crit_averaged_low": "lo",
        "b_crit_averaged_high": "hi", "n_batch_sizes_averaged": "n_B",
        "b_simple_start": "B_simple start", "b_simple_start_step": "at step",
        "b_simple_averaged": "B_simple averaged (progress)",
        "b_simple_averaged_steps": "(steps)", "b_noise_start": "B_noise start",
        "b_noise_start_step": "at step", "b_noise_averaged": "B_noise averaged (progress)",
        "b_noise_averaged_steps": "(steps)", "target_common": "common target",
        "b_crit_common": "B_crit there", "b_crit_common_low": "lo", "b_crit_common_high": "hi"}))
    parts.append("\n## Growth of B_crit and B_crit ∝ L^k, with intervals\n")
    parts.append("Growth = B_crit(hardest)/B_crit(loosest target); k: B_crit ∝ L^k over the "
                 "fitted targets. lo/hi: the hull of the methods listed after them — a seed "
                 "bootstrap of the sweep (95 %, percentile; keeps the shared runs, misses "
                 "scatter that seeds do not explain), for the growth the two per-target 95 % "
                 "intervals combined (joint ≥ 90 %), for k the regression interval (keeps the "
                 "scatter, ignores the shared runs). The paper's Table 1 factors (start → "
                 "averaged) are in claim (b).\n")
    parts.append(md_table(t1, {
        "task": "task", "optimizer": "opt", "b_crit_growth": "growth",
        "b_crit_growth_low": "lo", "b_crit_growth_high": "hi",
        "b_crit_growth_low_pertarget": "lo (per-target)",
        "b_crit_growth_high_pertarget": "hi (per-target)",
        "b_crit_growth_low_boot": "lo (boot)", "b_crit_growth_high_boot": "hi (boot)",
        "b_crit_loss_exponent": "k", "b_crit_loss_exponent_low": "lo",
        "b_crit_loss_exponent_high": "hi", "b_crit_loss_exponent_low_boot": "lo (boot)",
        "b_crit_loss_exponent_high_boot": "hi (boot)", "b_crit_loss_exponent_low_ols": "lo (OLS)",
        "b_crit_loss_exponent_high_ols": "hi (OLS)", "n_boot_growth_valid": "draws"}))
    if branched is not None and len(branched):
        parts.append("\n## The critical batch measured directly (branched training)\n")
        parts.append("At checkpoints of each reference run, branches at k·B with the rate "
                     "k·η (SGD) or √k·η (Adam), from the checkpoint's weights and optimizer "
                     "state, train on the same examples (paired seeds); a branch keeps up while "
                     "its loss decrease is at least half the reference branch's. The bracket "
                     "[low, high) is the largest batch that keeps up and the next one. In the "
                     "one-step model a branch at k·η keeps up while kB ≤ B/x + B/2 − B_noise/2 "
                     "(x = η/ε_max), i.e. 1.5B + B_noise/2 at η = ε_opt(B); branches at their "
                     "best rate while kB ≤ 2B + B_noise (used for Adam's √k branches, an "
                     "approximation). The bracket is compared with that keep-up point with "
                     "B_crit (fitted from the sweep at the checkpoint's loss) and with the local "
                     "B_noise; *bracket's B* is the noise scale the bracket implies under the "
                     "same rule, to compare with the local B_noise; rules in "
                     "`empirical_batch/validation/experiments/branched.py` and "
                     "`empirical_batch/validation/fits.py`.\n")
        parts.append(md_table(branched, {
            "task": "task", "optimizer": "opt", "step": "step", "eval_loss": "loss",
            "base_batch": "B",
            "learning_rate": "η", "b_branched_low": "branched low",
            "b_branched_high": "branched high", "branched_status": "status",
            "diverged_from": "diverged from",
            "keep_up_rule": "rule", "keep_up": "keep-up (B_crit)", "keep_up_low": "lo",
            "keep_up_high": "hi", "b_crit_status": "fit status",
            "keep_up_noise": "keep-up (B_noise)", "b_local_low": "bracket's B low",
            "b_local_high": "high", "b_crit": "B_crit (sweep)",
            "b_simple": "B_simple", "b_noise": "B_noise"}))
    if len(os_sum):
        parts.append("\n## One-step experiment: fitted constants per checkpoint\n")
        parts.append(md_table(os_sum, {
            "task": "task", "step": "step", "loss": "loss", "b_noise_fit": "B_noise fit",
            "b_noise_fit_low": "lo", "b_noise_fit_high": "hi", "b_noise_hvp": "B_noise HVP",
            "eps_max_fit": "ε_max fit", "eps_max_hvp": "ε_max HVP", "g2_fit": "|G|² fit",
            "g2_hvp": "|G|² HVP"}))
        parts.append("\n## One-step experiment: measured vs predicted per batch size\n")
        parts.append(md_table(os_table, {
            "task": "task", "step": "step", "batch_size": "B", "eps_opt": "ε_opt meas.",
            "eps_opt_low": "lo", "eps_opt_high": "hi", "eps_opt_pred_fit": "pred. (fit)",
            "eps_opt_pred_hvp": "pred. (HVP)", "dl_opt": "ΔL_opt meas.", "dl_opt_low": "lo",
            "dl_opt_high": "hi", "dl_opt_pred_fit": "pred. (fit)",
            "dl_opt_pred_hvp": "pred. (HVP)"}))
    return "\n".join(parts)


def _weights_section(crit: pd.DataFrame) -> str:
    """The averaged ratios under the three progress weights, and how much they move."""
    from .fits import weight_shifts

    shifts = weight_shifts(crit)
    names = {"rate": "the one-step model at the run's rate", "loss": "the run's loss decrease"}
    said = []
    for _, r in shifts.iterrows():
        if r["n"]:
            said.append(f"{names[r['weight']]}, B_crit/{r['quantity'].replace('b_', 'B_')} "
                        f"(avg): ×{fmt(r['median'], 2)} median, ×{fmt(r['min'], 2)}–"
                        f"×{fmt(r['max'], 2)}, {r['n_moved_25pct']} of {r['n']} targets moved "
                        "by more than 25 %")
    notes = crit.get("progress_note", pd.Series("", index=crit.index)).fillna("")
    n_neg = int(notes.str.contains("predicts a loss increase").sum())
    n_sgd = int((crit["optimizer"] == "sgd").sum()) if "optimizer" in crit else len(crit)
    text = (
        "\n### The averages under other progress weights\n\n"
        "ds = dt/(1 + B_noise/B) is the progress of a step at ε_opt(B); the reference run "
        "keeps one rate η. *rate*: ds = ΔL(η) dt, the one-step model's progress at η "
        "(eq. 2.5 with |G|², GᵀHG and tr(HΣ) measured at each checkpoint; SGD runs only; "
        "a checkpoint where the model predicts a loss increase at η weighs 0). *loss*: "
        "ds = −dL, the run's own loss decrease along its logged curve (an interval where the "
        "loss rose counts negatively). The note says where either progress is negative"
        f" (the model's in the windows of {n_neg} of the {n_sgd} SGD targets). Against App. D's "
        "weight, the ratios move by: " + ("; ".join(said) if said else "nothing comparable")
        + " (`empirical_batch.validation.fits.weight_shifts`).\n\n")
    return text + md_table(crit, {
        "task": "task", "optimizer": "opt", "target": "target loss", "b_crit": "B_crit",
        "b_crit_over_b_simple_avg": "B_crit/B_simple avg (App. D)",
        "b_crit_over_b_simple_avg_rate": "(rate)", "b_crit_over_b_simple_avg_loss": "(loss)",
        "b_crit_over_b_noise_avg": "B_crit/B_noise avg (App. D)",
        "b_crit_over_b_noise_avg_rate": "(rate)", "b_crit_over_b_noise_avg_loss": "(loss)",
        "progress_note": "negative progress"})
