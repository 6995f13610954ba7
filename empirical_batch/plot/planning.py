"""The time/cost frontier of a `empirical_batch.planning.plan` table."""

from __future__ import annotations

import numpy as np

from ._axes import axes

__all__ = ["plot_frontier"]


def plot_frontier(df, *, tradeoff=None, ax=None, annotate: bool = True):
    r"""Cost against wall time for every candidate, the Pareto frontier and its bend.

    ``df`` is a `empirical_batch.planning.Plan` or its ``frame``.

    Grey points are all feasible (batch size, devices) pairs; the line joins the
    Pareto rows (fastest first), labelled with their batch sizes; the star marks
    `empirical_batch.planning.frontier_bend` (least time × cost, where the
    frontier's log-log slope is −1) and, when ``tradeoff`` is given, the
    frontier point whose batch size is nearest $B_{crit}$ is ringed.

    Returns the matplotlib ``Axes``.
    """

    from ..planning import frontier, frontier_bend
    from ..result import unwrap_table

    df = unwrap_table(df)  # a Plan or its table
    f = frontier(df)
    ax = axes(ax, figsize=(6, 4.5))
    ax.scatter(df["wall_hours"], df["cost"], s=8, color="0.75", label="all candidates")
    ax.plot(f["wall_hours"], f["cost"], "-o", ms=4, color="C0", label="Pareto frontier")
    if annotate:
        for _, row in f.iterrows():
            ax.annotate(
                f"B={int(row.batch_size)}\nn={int(row.devices)}",
                (row.wall_hours, row.cost), fontsize=6, xytext=(3, 3),
                textcoords="offset points", color="C0",
            )
    bend = frontier_bend(df)
    ax.plot(bend.wall_hours, bend.cost, "*", ms=14, color="C3",
            label=f"bend (min time×cost): B={int(bend.batch_size)}")
    if tradeoff is not None:
        i = int(np.argmin(np.abs(np.log(f["batch_size"].to_numpy() / tradeoff.b_crit))))
        row = f.iloc[i]
        ax.plot(row.wall_hours, row.cost, "o", ms=14, mfc="none", color="C2",
                label=f"B nearest B_crit={tradeoff.b_crit:.3g}")
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("wall-clock hours")
    ax.set_ylabel("cost (price × device-hours)")
    ax.set_title("Time/cost frontier")
    ax.legend(fontsize=7)
    return ax
