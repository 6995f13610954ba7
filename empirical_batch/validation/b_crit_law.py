r"""B_crit against the loss in the validation study: Kaplan et al.'s law, per task and optimizer.

For each (task, optimizer) the B_crit fitted at the report's targets
(`empirical_batch.critical_batch_curve`) whose interval is bounded on both sides
(status ``identified``) are fitted by `empirical_batch.fit_b_crit_law`:

$$B_{crit}(L) = B_*/L^{1/\alpha_B}$$

(Kaplan et al. 2020, "Scaling Laws for Neural Language Models", §5.1: α_B ≈ 0.21,
B_* ≈ 2×10⁸ tokens with L in nats per token). For the language-model tasks
(``Task.language_model``) the table puts Kaplan's α_B beside the fitted interval. α_B
does not depend on the units: measuring L per character instead of per token, or B in
windows instead of tokens, multiplies L or B by a constant and changes only B_*. (A
loss *offset*, such as an irreducible entropy, would change it; Kaplan fit L itself.)
The table also names the corpus of a task that has one (its file and sha256).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..fit import KAPLAN_2020, fit_b_crit_law
from ..harness.config import HarnessConfig
from .curves import FIT_OPTIONS
from .markdown import fmt

COLUMNS = ["task", "optimizer", "n_targets", "loss_min", "loss_max", "b_crit_at_loss_max",
           "b_crit_at_loss_min", "span", "ends_separated", "alpha_b", "alpha_b_low",
           "alpha_b_high", "status", "b_star", "tau", "kaplan_alpha_b", "covers_kaplan",
           "text_file", "text_sha256", "note"]


def law_table(config: HarnessConfig, curves: dict) -> pd.DataFrame:
    """One row per (task, optimizer) of ``curves`` (``{(task, opt): (curve, scales)}``)."""
    corpus = {}
    kind = {}
    for plan in config.plans:
        task = plan.make_task()
        kind[plan.task] = bool(getattr(task, "language_model", False))
        info = task.describe()
        corpus[plan.task] = (info.get("text_file", ""), info.get("text_sha256", ""))
    rows = []
    for (task, opt), (curve, _scales) in curves.items():
        row: dict = {c: np.nan for c in COLUMNS}
        row.update(task=task, optimizer=opt, status="not fitted", note="",
                   text_file=corpus.get(task, ("", ""))[0],
                   text_sha256=corpus.get(task, ("", ""))[1],
                   kaplan_alpha_b=KAPLAN_2020["alpha_b"] if kind.get(task) else np.nan)
        ok = curve.frame[curve.frame["status"] == "identified"]
        row["n_targets"] = len(ok)
        if len(ok) < 3:  # the law's interval needs 3 points (fit_b_crit_law)
            row["note"] = f"{len(ok)} target(s) with a two-sided B_crit interval; 3 needed"
            rows.append(row)
            continue
        law = fit_b_crit_law(curve, level=FIT_OPTIONS["level"])
        i_max, i_min = int(np.argmax(law.losses)), int(np.argmin(law.losses))
        row.update(
            loss_min=law.losses[i_min], loss_max=law.losses[i_max],
            b_crit_at_loss_max=law.b_crit[i_max], b_crit_at_loss_min=law.b_crit[i_min],
            span=law.span, ends_separated=law.ends_separated, alpha_b=law.alpha_b,
            alpha_b_low=law.alpha_b_interval.low, alpha_b_high=law.alpha_b_interval.high,
            status=law.status,
            b_star=law.b_star, tau=law.tau,
        )
        if kind.get(task):
            row["covers_kaplan"] = law.covers(KAPLAN_2020["alpha_b"])
        skipped = len(curve.frame) - len(ok)
        notes = [f"{skipped} target(s) without a two-sided B_crit interval left out"
                 if skipped else "", law.note]
        row["note"] = "; ".join(n for n in notes if n)
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _f(x, digits=3) -> str:
    """`fmt`, with an empty string and ±inf written out (interval ends)."""
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return fmt(x, digits) or "–"


def render_law(frame: pd.DataFrame) -> str:
    """The Markdown section of the report (empty string for an empty table)."""
    if frame.empty:
        return ""
    level = float(FIT_OPTIONS["level"])
    lines = [
        "## B_crit(L) = B*/L^(1/α_B) (Kaplan et al. 2020)\n",
        f"Fitted to the identified B_crit of each task and optimizer (`fit_b_crit_law`, "
        f"{level:.0%} intervals); Kaplan et al.'s α_B = {KAPLAN_2020['alpha_b']} "
        "(`empirical_batch.datasets.kaplan2020()`) beside the language-model tasks.\n",
        "| task | opt | n | L range | B_crit at max L → min L | span | ends apart | α_B "
        "| interval | status | Kaplan α_B | in interval | corpus (sha256) |",
        "|" + "---|" * 13,
    ]
    for _, r in frame.iterrows():
        corpus = (f"{r['text_file']} ({str(r['text_sha256'])[:12]}…)"
                  if isinstance(r["text_sha256"], str) and r["text_sha256"] else "–")
        lines.append(
            f"| {r['task']} | {r['optimizer']} | {_f(r['n_targets'])} | "
            f"{_f(r['loss_max'])}→{_f(r['loss_min'])} | "
            f"{_f(r['b_crit_at_loss_max'])} → {_f(r['b_crit_at_loss_min'])} | "
            f"{_f(r['span'])}× | {_f(r['ends_separated'])} | {_f(r['alpha_b'])} | "
            f"[{_f(r['alpha_b_low'])}, {_f(r['alpha_b_high'])}] | {r['status']} | "
            f"{_f(r['kaplan_alpha_b'])} | {_f(r['covers_kaplan'])} | {corpus} |")
    notes = [f"- {r['task']}/{r['optimizer']}: {r['note']}" for _, r in frame.iterrows()
             if isinstance(r["note"], str) and r["note"]]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"
