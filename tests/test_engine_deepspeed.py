"""DeepSpeedNoiseScale inside real DeepSpeed engines on CPU (two gloo processes), ZeRO
stages 0, 1 and 2: each step's squared norms against a float64 recomputation on the same
micro-batches of both ranks at the parameters the step saw (equal, and ragged
token-weighted micro-batches); ``set_batch`` through ``engine.set_train_batch_size``; the
log read by ``empirical-batch schedule --log``. The first run builds DeepSpeed's CPU
communication op (minutes, once per machine)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")

from tests import engine_oracle as eo  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402
from tests.deepspeed_worker import STEPS, worker  # noqa: E402

WORLD, K, B = 2, 2, 4


def _run(tmp_path, stage, token_weighted=False, grow_at=None):
    import torch.multiprocessing as mp

    out = str(tmp_path / f"ds{stage}.pt")
    mp.spawn(worker, args=(WORLD, orc.free_port(), stage, K, B, token_weighted, out, grow_at),
             nprocs=WORLD, join=True)
    return torch.load(out, weights_only=False), out


def _expected(res, token_weighted):
    x, y = orc.dataset()
    rows = []
    for t, (w, c) in enumerate(res["params"]):
        g = eo.grads_at(w, c, x, y)
        micro, sizes, weights = [], [], []
        for r in range(WORLD):
            step = res["batches"][r][t]
            n = [len(idx) for idx in step]
            for idx in step:
                micro.append(g[idx].mean(0))
                sizes.append(len(idx))
                # DeepSpeed divides each micro-batch loss by k
                weights.append(len(idx) / (sum(n) * len(n)) if token_weighted else
                               1.0 / len(n))
        rows.append(eo.weighted(micro, sizes, weights))
    return np.array(rows)


@pytest.mark.slow
@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
@pytest.mark.parametrize("stage", [0, 1, 2])
def test_zero_stages_match_float64_recomputation(tmp_path, stage):
    res, out = _run(tmp_path, stage)
    frame = pd.DataFrame(res["frame"])
    assert len(frame) == STEPS
    got = frame[["sq_norm_small", "b_small", "sq_norm_big", "b_big"]].to_numpy()
    # a float32 engine against the float64 recomputation
    np.testing.assert_allclose(got, _expected(res, False), rtol=2e-5)
    assert (frame.b_small == B).all() and (frame.b_big == WORLD * K * B).all()
    assert f"ZeRO stage {stage}, 2 data-parallel ranks" in res["repr"]
    assert not np.allclose(res["params"][0][0], res["params"][-1][0])  # it trained
    log = pd.read_csv(out + ".csv")
    assert log["examples"].tolist() == [WORLD * K * B * (s + 1) for s in range(STEPS)]
    eo.schedule_reads(out + ".csv", WORLD * K * B, tmp_path)


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_token_weighted_ragged_micro_batches(tmp_path):
    res, out = _run(tmp_path, 2, token_weighted=True)
    frame = pd.DataFrame(res["frame"])
    got = frame[["sq_norm_small", "b_small", "sq_norm_big", "b_big"]].to_numpy()
    np.testing.assert_allclose(got, _expected(res, True), rtol=2e-5)
    assert frame.b_small.nunique() > 1  # the sizes really were ragged
    assert set(pd.read_csv(out + ".csv")["unit"]) == {"tokens"}


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_set_batch_doubles_the_accumulation(tmp_path):
    grow = STEPS // 2
    res, _ = _run(tmp_path, 1, grow_at=grow)
    frame = pd.DataFrame(res["frame"])
    assert (frame.b_big[:grow] == WORLD * K * B).all()
    assert (frame.b_big[grow:] == 2 * WORLD * K * B).all()
    assert all(len(s) == 2 * K for s in res["batches"][0][grow:])
    got = frame[["sq_norm_small", "b_small", "sq_norm_big", "b_big"]].to_numpy()
    np.testing.assert_allclose(got, _expected(res, False), rtol=2e-5)


def test_refuses_what_is_not_an_engine():
    from empirical_batch.errors import InputError
    from empirical_batch.integrations.deepspeed import DeepSpeedNoiseScale

    with pytest.raises(InputError, match="deepspeed engine"):
        DeepSpeedNoiseScale(orc.model())
