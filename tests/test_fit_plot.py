"""plot.fit: each plot draws on the given Axes and returns it (Agg backend)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from empirical_batch.fit import critical_batch_curve, fit_power_law, fit_tradeoff
from empirical_batch.plot import fit as plot_fit
from empirical_batch.plot.fit import (
    plot_critical_batch_curve,
    plot_steps_vs_batch,
    plot_tradeoff_fit,
)
from empirical_batch.tradeoff import Tradeoff
from tests._synth_fit import synthetic_sweep


def test_plots_return_axes():
    t = Tradeoff(1000, 64000)
    b = 2.0 ** np.arange(2, 12)
    fit = fit_tradeoff(pd.DataFrame({"batch_size": b, "steps": t.steps(b) * 1.01}), n_boot=20)
    fig, axes = plt.subplots(1, 3)
    assert plot_tradeoff_fit(fit, axes[0]) is axes[0]
    assert len(axes[0].collections) >= 1 and axes[0].get_xscale() == "log"
    assert plot_steps_vs_batch(fit, axes[1]) is axes[1]
    curve = critical_batch_curve(synthetic_sweep(t, b, rng=0), [1.5, 1.0, 0.5], n_boot=20)
    law = fit_power_law(curve["target"], curve["b_crit"])
    assert plot_critical_batch_curve(curve, axes[2], power_law=law) is axes[2]
    plt.close(fig)
    ax = plot_tradeoff_fit(fit)  # creates its own figure
    assert not hasattr(plot_fit, "plot_tradeoff")  # its v0.1 name, removed in 0.4
    plt.close(ax.figure)
