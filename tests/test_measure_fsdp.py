"""FSDPNoiseScale with real torch.distributed processes (gloo, 2 ranks, CPU), against
the single-process oracle on the same data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
import torch.multiprocessing as mp  # noqa: E402

from tests import measure_oracle as orc  # noqa: E402
from tests.fsdp_worker import STEPS, WORLD, B, indices, worker  # noqa: E402


@pytest.mark.slow
@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
@pytest.mark.parametrize("micro", [1, 2])
def test_fsdp_matches_single_process(tmp_path, micro):
    out = tmp_path / "fsdp.pt"
    mp.spawn(worker, args=(orc.free_port(), str(out), micro), nprocs=WORLD, join=True)
    res = torch.load(out, weights_only=False)
    frame = pd.DataFrame(res["frame"])
    assert len(frame) == STEPS
    x, y = orc.dataset()
    m = orc.model()
    g = orc.per_example_grads(m, x, y)
    # the model does not move (the loop never steps an optimizer): exact per-step norms
    parts = np.stack([  # (T, WORLD * micro, D+1): every micro-batch's mean gradient
        np.concatenate([[g[p].mean(0) for p in np.array_split(indices(t)[r], micro)]
                        for r in range(WORLD)])
        for t in range(STEPS)
    ])
    small = np.mean(np.sum(parts**2, -1), 1)
    big = np.sum(parts.mean(1) ** 2, -1)
    # clipping (step 3) and zeroed gradients (step 4) before step() change nothing
    # a float32 model against the float64 oracle
    np.testing.assert_allclose(frame.sq_norm_small, small, rtol=1e-5)
    np.testing.assert_allclose(frame.sq_norm_big, big, rtol=1e-5)
    assert (frame.b_small == B // micro).all() and (frame.b_big == B * WORLD).all()
    assert "2 ranks" in res["repr"]


def test_refuses_a_model_that_is_not_sharded():
    from empirical_batch.measure.fsdp import FSDPNoiseScale

    with pytest.raises(TypeError, match="fully_shard"):
        FSDPNoiseScale(orc.model(), local_batch_size=4)
