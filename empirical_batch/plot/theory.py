"""Plots of the one-step model and the steps/examples tradeoff."""

from __future__ import annotations

import numpy as np

from ._axes import axes

__all__ = ["plot_step_model", "plot_tradeoff"]


def plot_step_model(model, batch_sizes=None, *, ax=None):
    r"""ε_opt(B)/ε_max and ΔL_opt(B)/ΔL_max against B, with B_noise and B_simple marked.

    Both curves are $1/(1 + B_{noise}/B)$ (eqs. 2.6–2.7); they reach one half
    at $B = B_{noise}$. Returns the ``Axes``.
    """
    if batch_sizes is None:
        lo = max(model.b_noise, 1.0)
        batch_sizes = np.logspace(np.log10(lo) - 3, np.log10(lo) + 3, 200)
    b = np.asarray(batch_sizes, dtype=float)
    ax = axes(ax, figsize=(6, 4.5))
    ax.plot(b, np.asarray(model.eps_opt(b)) / model.eps_max,
            label=r"$\epsilon_{opt}/\epsilon_{max}$")
    ax.plot(b, np.asarray(model.dl_opt(b)) / model.dl_max, "--",
            label=r"$\Delta L_{opt}/\Delta L_{max}$")
    ax.axvline(model.b_noise, color="C3", lw=1, label=f"$B_{{noise}}$={model.b_noise:.3g}")
    ax.axvline(model.b_simple, color="C2", lw=1, ls=":",
               label=f"$B_{{simple}}$={model.b_simple:.3g}")
    ax.set_xscale("log")
    ax.set_xlabel("batch size B")
    ax.set_ylabel("fraction of the infinite-batch value")
    ax.set_title("One SGD step on the quadratic model")
    ax.legend(fontsize=7)
    return ax


def plot_tradeoff(tradeoff, batch_sizes=None, *, ax=None, label="S(B), E(B)"):
    r"""Steps against examples, $(S/S_{min}-1)(E/E_{min}-1)=1$, with B_crit marked.

    Draws the hyperbola over ``batch_sizes`` (default $B_{crit}\cdot 10^{\pm 2}$), the
    point $(2E_{min}, 2S_{min})$ it passes through at $B_{crit}$, and the
    $S_{min}$/$E_{min}$ asymptotes. Returns the ``Axes``.
    """
    if batch_sizes is None:
        batch_sizes = tradeoff.b_crit * np.logspace(-2, 2, 200)
    b = np.asarray(batch_sizes, dtype=float)
    ax = axes(ax, figsize=(6, 4.5))
    ax.plot(tradeoff.examples(b), tradeoff.steps(b), label=label)
    ax.plot(2 * tradeoff.e_min, 2 * tradeoff.s_min, "o", color="C3",
            label=f"$B_{{crit}}$={tradeoff.b_crit:.3g}: 2$S_{{min}}$, 2$E_{{min}}$")
    ax.axhline(tradeoff.s_min, color="0.6", ls=":", lw=1)
    ax.axvline(tradeoff.e_min, color="0.6", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("examples E")
    ax.set_ylabel("steps S")
    ax.set_title("Steps/examples tradeoff")
    ax.legend(fontsize=7)
    return ax
