"""Production settings of the collectors: the device-to-host transfer deferred to every
``sync_every`` steps gives the same estimates as a transfer every step, and the
per-step history can be bounded (``max_history``) without changing the averages."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.measure import GradientNoiseScale, PerExampleNoiseScale  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")
B, K, STEPS = 8, 2, 23


def _micro(**kw):
    x, y = orc.dataset()
    m = orc.model()
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.9, **kw)
    rng = np.random.default_rng(0)
    returned = []
    for _ in range(STEPS):
        for _ in range(K):
            idx = rng.integers(0, orc.N, B)
            (orc.loss_fn(m(x[idx]), y[idx]) / K).backward()
        returned.append(gns.step())
        m.zero_grad()
    return gns, returned


def _per_example(**kw):
    x, y = orc.dataset()
    m = orc.model()
    pe = PerExampleNoiseScale(m, beta=0.9, **kw)
    rng = np.random.default_rng(1)
    returned = []
    for _ in range(STEPS):
        idx = rng.integers(0, orc.N, B)
        orc.loss_fn(m(x[idx]), y[idx]).backward()
        returned.append(pe.step())
        m.zero_grad()
    return pe, returned


@pytest.mark.parametrize("run", [_micro, _per_example], ids=["micro-batch", "per-example"])
def test_deferred_transfer_gives_the_same_estimates(run):
    every, returned = run()
    lazy, lazy_returned = run(sync_every=5)
    assert all(r is not None for r in returned)
    assert all(r is None for r in lazy_returned)  # values stay on the device
    assert len(lazy._pending) == STEPS % 5  # 20 folded in at steps 5, 10, 15, 20
    assert lazy.b_simple == every.b_simple  # reading folds in the rest, bit for bit
    assert lazy._pending == []
    for key, col in every.estimator.history().items():
        np.testing.assert_array_equal(lazy.estimator.history()[key], col)
    with pytest.raises(ValueError, match="sync_every"):
        run(sync_every=0)


def test_bounded_history_keeps_the_last_rows_and_the_same_averages():
    full, _ = _micro()
    ring, _ = _micro(max_history=5)
    assert ring.b_simple == full.b_simple and ring.b_simple_se == full.b_simple_se
    assert len(ring.to_frame()) == 5
    np.testing.assert_array_equal(ring.estimator.history()["step"],
                                  full.estimator.history()["step"][-5:])
    np.testing.assert_array_equal(ring.to_frame()["g2"], full.to_frame()["g2"].iloc[-5:])
    # the bound rides in the state
    again = GradientNoiseScale(orc.model(), micro_batch_size=B, accumulation_steps=K)
    again.load_state_dict(ring.state_dict())
    assert again.estimator.max_history == 5 and len(again.to_frame()) == 5
    with pytest.raises(ValueError, match="max_history"):
        _micro(max_history=0)


def test_reprs_say_what_is_measured():
    gns, _ = _micro()
    text = repr(gns)
    assert "gradient of 2 parameter tensors (6 elements)" in text
    assert "micro-batches of 8 x 2 per step" in text and f"steps={STEPS}" in text
    assert "b_simple=" in text and "skipped" not in text
    pe, _ = _per_example()
    assert repr(pe).startswith("PerExampleNoiseScale(measures 100.0% of 6 parameters")
