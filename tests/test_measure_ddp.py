"""DDPNoiseScaleHook with real torch.distributed processes (gloo, 2 ranks, CPU)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.multiprocessing as mp  # noqa: E402

from tests import measure_oracle as orc  # noqa: E402
from tests.ddp_worker import STEPS, WORLD, B, _indices, _worker  # noqa: E402


@pytest.mark.slow
@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
def test_ddp_hook_matches_single_process(tmp_path):
    out = tmp_path / "ddp.pt"
    mp.spawn(_worker, args=(orc.free_port(), str(out)), nprocs=WORLD, join=True)
    res = torch.load(out, weights_only=False)
    import pandas as pd

    frame = pd.DataFrame(res["frame"])
    assert res["skipped"] == {"non_finite": 1}
    assert len(frame) == STEPS - 1
    # single-process reference on the same data: exact per-step norms
    x, y = orc.dataset()
    m = orc.model()
    g = orc.per_example_grads(m, x, y)
    steps = [t for t in range(STEPS) if t != 5]
    local = np.stack([g[_indices(t)].mean(1) for t in steps])  # (T, WORLD, D+1)
    small = np.mean(np.sum(local**2, -1), 1)
    big = np.sum(local.mean(1) ** 2, -1)
    # float64 model, power-of-two scale: agreement to rounding
    np.testing.assert_allclose(frame.sq_norm_small, small, rtol=1e-10)
    np.testing.assert_allclose(frame.sq_norm_big, big, rtol=1e-10)
    assert (frame.b_small == B).all() and (frame.b_big == B * WORLD).all()
    orc.check_recovers(frame, *orc.exact(m, x, y))


def test_bad_input():
    from empirical_batch.measure import DDPNoiseScaleHook

    with pytest.raises(TypeError, match="DistributedDataParallel"):
        DDPNoiseScaleHook(orc.model(), local_batch_size=4)
