"""Figures of the validation report (S–E curves use the fitted Tradeoff).

Drawn on `matplotlib.figure.Figure` objects, not through pyplot: no backend is chosen
and no global state changes (a program that uses pyplot interactively keeps its
backend and its open figures).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..plot.fit import plot_critical_batch_curve


def _figure(figsize):
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def task_figures(task: str, curves: dict, crit: pd.DataFrame, os_table: pd.DataFrame,
                 os_sum: pd.DataFrame, fig_dir: Path) -> list[Path]:
    files = []
    opts = [o for (t, o) in curves if t == task]
    # S–E hyperbolas: measured (E, S) per target and the fitted tradeoff
    fig = _figure((5.2 * len(opts), 4.2))
    axes = fig.subplots(1, len(opts), squeeze=False)
    for ax, opt in zip(axes[0], opts, strict=True):
        curve, _ = curves[(task, opt)]
        for fit, target in zip(curve.fits, curve.targets, strict=True):
            if fit is None:
                continue
            b = np.asarray(fit.batch_sizes)
            s = np.asarray(fit.steps)
            bb = np.geomspace(b.min() / 4, b.max() * 4, 200)
            t = fit.tradeoff
            line = ax.plot(t.examples(bb), t.steps(bb), lw=1,
                           label=f"L={target:.3g}: B_crit={fit.b_crit:.3g}")[0]
            ax.scatter(s * b, s, color=line.get_color(), s=14, zorder=3)
            ax.scatter([2 * t.e_min], [2 * t.s_min], marker="x", color=line.get_color())
        ax.set(xscale="log", yscale="log", xlabel="examples to target E",
               ylabel="steps to target S", title=f"{task} · {opt}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    files.append(_save(fig, fig_dir / f"{task}_tradeoff.png"))
    # B_crit vs loss with the noise scales along the reference run
    fig = _figure((5.2 * len(opts), 4.2))
    axes = fig.subplots(1, len(opts), squeeze=False)
    for ax, opt in zip(axes[0], opts, strict=True):
        curve, scales = curves[(task, opt)]
        if curve.frame["b_crit"].notna().any():  # the library's B_crit plot, band and bounds
            plot_critical_batch_curve(curve, ax, label="B_crit (sweep fit, 95% interval)")
        sc = scales.sort_values("step")
        for col, style in (("b_simple_collector", "-"), ("b_noise_pop", "--"),
                           ("b_noise", ":")):
            v = sc[col].to_numpy(float)
            ok = v > 0
            ax.plot(sc["eval_loss"].to_numpy(float)[ok], v[ok], style, label=col)
        # what the model compares B_crit(L) with: the progress-weighted mean up to L
        mine = crit[(crit["task"] == task) & (crit["optimizer"] == opt)] \
            if {"task", "optimizer", "b_simple_avg"} <= set(crit.columns) else crit.iloc[0:0]
        for col, marker in (("b_simple_avg", "s"), ("b_noise_avg", "^")):
            pts = mine[mine[col] > 0] if col in mine else mine.iloc[0:0]
            if len(pts):
                ax.plot(pts["target"], pts[col], marker, mfc="none", ls="none",
                        label=f"{col} (up to L)")
        ax.set(yscale="log", xlabel="evaluation loss", ylabel="batch size",
               title=f"{task} · {opt}")
        ax.invert_xaxis()
        ax.legend(fontsize=7)
    fig.tight_layout()
    files.append(_save(fig, fig_dir / f"{task}_b_crit_vs_loss.png"))
    # one-step: measured vs predicted eps_opt(B) and dL_opt(B)
    tab = os_table[os_table["task"] == task] if len(os_table) else os_table
    if len(tab):
        steps = sorted(tab["step"].unique())
        fig = _figure((4.2 * len(steps), 6.6))
        axes = fig.subplots(2, len(steps), squeeze=False)
        for j, step in enumerate(steps):
            t = tab[tab["step"] == step]
            for i, (m, name) in enumerate((("eps_opt", "ε_opt"), ("dl_opt", "ΔL_opt"))):
                ax = axes[i, j]
                err = [np.clip(t[m] - t[f"{m}_low"], 0, None), np.clip(t[f"{m}_high"] - t[m], 0,
                                                                       None)]
                ax.errorbar(t["batch_size"], t[m], yerr=err, fmt="o", color="k",
                            label="measured")
                ax.plot(t["batch_size"], t[f"{m}_pred_hvp"], "-", label="pred. (HVP B_noise)")
                ax.plot(t["batch_size"], t[f"{m}_pred_fit"], "--", label="pred. (fitted)")
                ax.set(xscale="log", yscale="log", xlabel="batch size B", ylabel=name,
                       title=f"{task} step {step}")
                ax.legend(fontsize=7)
        fig.tight_layout()
        files.append(_save(fig, fig_dir / f"{task}_one_step.png"))
    return files


def _save(fig, path: Path) -> Path:
    from .._io import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    return path
