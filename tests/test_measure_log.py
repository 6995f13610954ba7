"""NoiseScaleLog, the B_simple plot, and the torch-missing import error."""

from __future__ import annotations

import subprocess
import sys

import matplotlib
import numpy as np
import pytest

from empirical_batch.estimators import GNSEstimator

matplotlib.use("Agg")


def _log(tmp_path):
    pytest.importorskip("torch")
    from empirical_batch.measure import NoiseScaleLog

    rng = np.random.default_rng(0)
    est, log = GNSEstimator(beta=0.9), NoiseScaleLog(level=0.9)
    for step in range(30):
        s = 2 + 40 / 4 + rng.normal()
        est.update(s, 4, 2 + 40 / 16 + 0.3 * rng.normal(), 16)
        log.record(step, est, loss=3.0 / (1 + step), lr=0.1)
    path = log.to_csv(tmp_path / "gns.csv")
    return log, path


def test_log_rows_match_estimator(tmp_path):
    import pandas as pd

    _, path = _log(tmp_path)
    df = pd.read_csv(path)
    assert len(df) == 30 and {"step", "loss", "b_simple", "b_simple_se", "lr"} <= set(df)
    assert df.updates.tolist() == list(range(1, 31))
    assert df.b_simple_low.iloc[-1] <= df.b_simple.iloc[-1] <= df.b_simple_high.iloc[-1]


@pytest.mark.parametrize("x", ["step", "loss"])
def test_plot(tmp_path, x):
    from empirical_batch.plot.measure import plot_b_simple

    log, _ = _log(tmp_path)
    frame = log.to_frame()
    frame.loc[0, "b_simple"] = -5.0  # an unresolved row is left out and counted
    ax = plot_b_simple(frame, x=x, band="interval")
    assert len(ax.lines) == 1 and len(ax.lines[0].get_xdata()) == 29
    assert "1 unresolved" in ax.get_legend().get_texts()[0].get_text()
    with pytest.raises(ValueError, match="x must be"):
        plot_b_simple(frame, x="epoch")


def test_import_error_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "try:\n    import empirical_batch.measure\nexcept ImportError as e:\n"
        "    assert 'install' in str(e) and 'torch' in str(e).lower(), e\n"
        "else:\n    raise SystemExit('no ImportError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
