"""Plots of tradeoff fits (McCandlish et al. 2018, Fig. 1 and §3 style).

* `plot_tradeoff_fit` — steps vs examples: the hyperbola
  $(S/S_{min} - 1)(E/E_{min} - 1) = 1$, the measured points and the
  $S_{min}$/$E_{min}$ asymptotes, $B_{crit}$ marked.
* `plot_steps_vs_batch` — steps vs batch size with the fitted
  $S(B) = S_{min}(1 + B_{crit}/B)$.
* `plot_critical_batch_curve` — $B_{crit}$ vs target with its interval band.

pyplot is imported inside the functions; each returns the Axes. (The theory's
`empirical_batch.plot.theory.plot_tradeoff` draws a `Tradeoff`, not a fit.)
"""

from __future__ import annotations

import numpy as np

from ._axes import axes
from .theory import plot_tradeoff as _plot_hyperbola

__all__ = ["plot_critical_batch_curve", "plot_steps_vs_batch", "plot_tradeoff_fit"]


def plot_tradeoff_fit(fit, ax=None, *, label: str | None = None):
    """Steps vs examples (log-log): measured points, fitted hyperbola and asymptotes."""
    ax = axes(ax)
    t = fit.tradeoff
    b = np.asarray(fit.batch_sizes)
    s = np.asarray(fit.steps)
    bb = np.geomspace(min(b.min(), fit.b_crit) / 10, max(b.max(), fit.b_crit) * 10, 200)
    first = len(ax.get_lines())
    _plot_hyperbola(t, bb, ax=ax, label=label or "fit")
    colour = ax.get_lines()[first].get_color()
    ax.scatter(s * b, s, color=colour, zorder=3, label="measured")
    ax.set_xlabel("examples to target E")
    ax.set_ylabel("steps to target S")
    ax.set_title("")
    ax.annotate("S_min", (ax.get_xlim()[1], t.s_min), ha="right", va="bottom", fontsize=8)
    ax.annotate("E_min", (t.e_min, ax.get_ylim()[1]), ha="left", va="top", fontsize=8,
                rotation=90)
    ax.legend(fontsize=8)
    return ax


def plot_steps_vs_batch(fit, ax=None, *, label: str | None = None):
    """Steps vs batch size (log-log) with the fitted S(B) and B_crit's interval shaded."""
    ax = axes(ax)
    b = np.asarray(fit.batch_sizes)
    bb = np.geomspace(b.min() / 2, b.max() * 2, 200)
    line = ax.plot(bb, fit.tradeoff.steps(bb), label=label or "S(B) fit")[0]
    ax.scatter(b, fit.steps, color=line.get_color(), zorder=3)
    lo, hi = fit.b_crit_interval
    if np.isfinite(lo) and np.isfinite(hi):
        ax.axvspan(max(lo, bb[0]), min(hi, bb[-1]), color=line.get_color(), alpha=0.15)
    ax.axvline(fit.b_crit, color=line.get_color(), ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("batch size B")
    ax.set_ylabel("steps to target S")
    ax.legend(fontsize=8)
    return ax


def plot_critical_batch_curve(curve, ax=None, *, power_law=None, label: str | None = None):
    """B_crit vs target (a `CriticalBatchCurve`) with the interval band; optional fitted
    power law overlaid. Targets whose fit is only a bound are drawn as open markers at
    the bound (an arrow-like triangle pointing the open way)."""
    ax = axes(ax)
    frame = curve.to_frame() if hasattr(curve, "to_frame") else curve
    keep = frame["b_crit"].notna()  # bounds have no b_crit but a b_crit_bound
    if "b_crit_bound" in frame.columns:
        keep |= frame["b_crit_bound"].notna()
    c = frame[keep].sort_values("target")
    status = c["status"].to_numpy() if "status" in c.columns else np.full(len(c), "identified")
    ident = status == "identified"
    x = c["target"].to_numpy()
    lo = c["b_crit_low"].to_numpy(dtype=float)
    hi = c["b_crit_high"].to_numpy(dtype=float)
    y = np.where(ident, c["b_crit"].to_numpy(dtype=float), np.nan)
    line = ax.plot(x, y, marker="o", label=label or "B_crit")[0]
    for kind, marker, at in (("lower_bound", "^", lo), ("upper_bound", "v", hi)):
        m = status == kind
        if m.any():
            ax.scatter(x[m], at[m], marker=marker, facecolors="none",
                       edgecolors=line.get_color(), zorder=3,
                       label=f"{kind.replace('_', ' ')} only")
    ok = np.isfinite(lo) & np.isfinite(hi) & (lo > 0)
    ax.fill_between(x[ok], lo[ok], hi[ok], color=line.get_color(), alpha=0.2)
    if power_law is not None:
        xx = np.linspace(x.min(), x.max(), 100)
        ax.plot(xx, power_law(xx), ls="--", color="k",
                label=f"{power_law.coefficient:.3g}·x^{power_law.exponent:.3g}")
    ax.set_yscale("log")
    ax.set_xlabel(getattr(curve, "metric_name", "target"))
    ax.set_ylabel("critical batch size B_crit")
    ax.legend(fontsize=8)
    return ax

