"""fit_lr_scaling on a sweep built from the quadratic model, where the best learning
rate follows eps_opt(B) = eps_max/(1 + B_noise/B) exactly (paper eq. 2.6)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from empirical_batch.fit import LRScalingFit, fit_lr_scaling
from empirical_batch.sweeps import load_sweep

EPS_MAX, B_NOISE, D = 1.0, 100.0, 1000.0
BATCH = 2.0 ** np.arange(2, 15)  # 4 … 16384
LRS = EPS_MAX * 2.0 ** (np.arange(-40, 5) / 4)  # quarter-octave grid


def _quadratic_sweep():
    """One step improves the loss by ΔL(ε, B) = ε|G|² − ½ε²(GᵀHG + tr(HΣ)/B) (eq. 2.5)
    with |G|² = GᵀHG = 1, tr(HΣ) = B_noise; reaching a loss drop D takes S = D/ΔL steps.
    metric = 1 − log(step/S) crosses the target 1 at S; ΔL ≤ 0 diverges (NaN)."""
    rows = []
    for b in BATCH:
        for lr in LRS:
            dl = lr - 0.5 * lr**2 * (1 + B_NOISE / b)
            run = f"b{b:g}-lr{lr:.4g}"
            if dl <= 0:
                rows.append(pd.DataFrame({"run": run, "batch_size": b, "learning_rate": lr,
                                          "step": [0, 1], "loss": [2.0, np.nan]}))
                continue
            s = D / dl
            steps = np.geomspace(s / 4, s * 4, 12)
            rows.append(pd.DataFrame({"run": run, "batch_size": b, "learning_rate": lr,
                                      "step": steps, "loss": 1 - np.log(steps / s)}))
    return load_sweep(pd.concat(rows, ignore_index=True))


@pytest.fixture(scope="module")
def lr_fit():
    return fit_lr_scaling(_quadratic_sweep(), target=1.0, n_boot=200, seed=0)


def test_recovers_sgd_law(lr_fit):
    assert isinstance(lr_fit, LRScalingFit)
    # the only error is the parabola through 3 quarter-octave grid points around the
    # optimum of the (slightly asymmetric) log S(log ε) curve: observed < 3 % on α
    assert lr_fit.alpha == pytest.approx(1.0, abs=0.05)
    assert lr_fit.b_star == pytest.approx(B_NOISE, rel=0.10)
    assert lr_fit.eps_star == pytest.approx(EPS_MAX, rel=0.05)
    assert lr_fit.alpha_interval[0] <= lr_fit.alpha <= lr_fit.alpha_interval[1]
    assert all(lr_fit.refined)
    # steps at the best rate follow the tradeoff with B_crit = B_noise, S_min = 2D
    tf = lr_fit.tradeoff_fit
    assert tf.b_crit == pytest.approx(B_NOISE, rel=0.03)
    assert tf.s_min == pytest.approx(2 * D, rel=0.03)


def test_recommend(lr_fit):
    rec = lr_fit.recommend(300.0)
    assert rec.learning_rate == pytest.approx(EPS_MAX / (1 + B_NOISE / 300), rel=0.05)
    assert rec.learning_rate_interval[0] <= rec.learning_rate <= rec.learning_rate_interval[1]
    assert rec.steps == pytest.approx(2 * D * (1 + B_NOISE / 300), rel=0.05)
    assert rec.examples == pytest.approx(rec.steps * 300)
    assert lr_fit.learning_rate(np.array([300.0, 600.0])).shape == (2,)
    assert set(rec.to_dict()) >= {"learning_rate", "steps"}
    assert "alpha" in lr_fit.to_dict()
    with pytest.raises(ValueError, match="batch_size"):
        lr_fit.recommend(-1.0)


def test_fixed_alpha_and_table_input():
    b = np.geomspace(8, 8192, 11)
    lr = 0.5 / (1 + 64 / b) ** 0.7
    free = fit_lr_scaling(pd.DataFrame({"batch_size": b, "learning_rate": lr}), n_boot=50)
    assert free.alpha == pytest.approx(0.7, rel=1e-4) and free.b_star == pytest.approx(64,
                                                                                       rel=1e-3)
    fixed = fit_lr_scaling(pd.DataFrame({"batch_size": b, "learning_rate": lr}), alpha=0.7,
                           n_boot=50)
    assert fixed.alpha_fixed and fixed.alpha == 0.7
    assert fixed.b_star == pytest.approx(64, rel=1e-3)
    assert math.isnan(fixed.recommend(100).steps)  # no tradeoff fit from a bare table


def test_bad_input():
    with pytest.raises(ValueError, match="target is required"):
        fit_lr_scaling(_quadratic_sweep())
    with pytest.raises(ValueError, match="at least 4"):
        fit_lr_scaling(pd.DataFrame({"batch_size": [1, 2, 3], "learning_rate": [1, 2, 3]}))
    with pytest.raises(ValueError, match="learning_rate"):
        fit_lr_scaling(pd.DataFrame({"batch_size": [1, 2, 3]}))
    with pytest.raises(TypeError):
        fit_lr_scaling([1, 2, 3])


if __name__ == "__main__":  # prints the numbers quoted in docs/fit.md
    f = fit_lr_scaling(_quadratic_sweep(), target=1.0, n_boot=200, seed=0)
    print(f"alpha = {f.alpha:.3f} {f.alpha_interval}, B* = {f.b_star:.1f} {f.b_star_interval}, "
          f"eps* = {f.eps_star:.3f}, B_crit from steps = {f.tradeoff_fit.b_crit:.1f}")


def test_learning_rates_decades_apart_give_inf_and_a_note_not_an_overflow():
    """The free-exponent law's ε_* = exp(intercept) overflowed math.exp (OverflowError)."""
    import math

    table = pd.DataFrame({"batch_size": [1, 2, 4, 8, 16],
                          "learning_rate": [1e-300, 1e-200, 1e-100, 1.0, 1e100]})
    for family in ("power", "auto"):
        fit = fit_lr_scaling(table, family=family, n_boot=20)
        assert fit.eps_star == math.inf and "float range" in fit.note
    assert fit_lr_scaling(table, family="sgd", n_boot=20).note == ""
