"""FSDP1NoiseScale (FSDP1's ``FullyShardedDataParallel``, what Ray Train's
``prepare_model(parallel_strategy="fsdp")`` wraps with) on 2 gloo processes: a model of
two FSDP units under the root, sharded and unsharded, reducing every micro-batch or once
per step (``no_sync``), against a float64 autograd recomputation on the same
micro-batches at the parameters each step saw."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from tests import measure_oracle as orc  # noqa: E402
from tests.fsdp1_worker import MICRO, STEPS, WORLD, reference, worker  # noqa: E402


@pytest.mark.slow
@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
@pytest.mark.parametrize("strategy, k, no_sync", [("FULL_SHARD", 2, False),
                                                  ("FULL_SHARD", 2, True),
                                                  ("NO_SHARD", 2, False)])
def test_fsdp1_matches_float64_recomputation(tmp_path, strategy, k, no_sync):
    import torch.multiprocessing as mp

    out = tmp_path / "fsdp1.pt"
    mp.spawn(worker, args=(orc.free_port(), str(out), strategy, k, no_sync), nprocs=WORLD,
             join=True)
    res = torch.load(out, weights_only=False)
    frame = pd.DataFrame(res["frame"])
    assert len(frame) == STEPS
    got = frame[["sq_norm_small", "b_small", "sq_norm_big", "b_big"]].to_numpy()
    np.testing.assert_allclose(got, reference(res["states"], k, no_sync), rtol=1e-10)
    assert (frame.b_small == (k * MICRO if no_sync else MICRO)).all()
    assert (frame.b_big == WORLD * k * MICRO).all()
    assert "2 FSDP units" in res["repr"]  # the root holds no parameter of its own


def test_refuses_a_model_that_is_not_fsdp1():
    from empirical_batch.errors import InputError
    from empirical_batch.measure.fsdp1 import FSDP1NoiseScale

    with pytest.raises(InputError, match="FullyShardedDataParallel"):
        FSDP1NoiseScale(orc.model(), local_batch_size=4)
