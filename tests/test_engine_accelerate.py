"""AccelerateNoiseScale inside a real ``accelerate.Accelerator`` on CPU: one process with
gradient accumulation (equal, ragged and token-weighted micro-batches) and DDP over two
gloo processes, each step's squared norms against a float64 recomputation on the same
micro-batches at the parameters the step saw; the log read by ``empirical-batch
schedule --log``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from tests import engine_oracle as eo  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402
from tests.accelerate_worker import STEPS, spawn_entry, train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def _expected_one_process(res, token_weighted=False):
    x, y = orc.dataset()
    rows = []
    for (w, c), step in zip(res["params"], res["batches"], strict=True):
        g = eo.grads_at(w, c, x, y)
        micro = [g[idx].mean(0) for idx in step]
        n = [len(idx) for idx in step]
        weights = n if token_weighted else [1.0] * len(n)
        rows.append(eo.weighted(micro, n, weights))
    return np.array(rows)


@pytest.mark.parametrize("ragged, token_weighted", [(False, False), (True, False),
                                                    (True, True)])
def test_one_process_matches_float64_recomputation(ragged, token_weighted):
    res = train(0, 1, k=4, b=6, ragged=ragged, token_weighted=token_weighted)
    frame = pd.DataFrame(res["frame"])
    assert len(frame) == STEPS
    want = _expected_one_process(res, token_weighted)
    got = frame[["sq_norm_small", "b_small", "sq_norm_big", "b_big"]].to_numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10)
    if not ragged:
        assert (frame.b_small == 6).all() and (frame.b_big == 24).all()
    # the parameters moved: the optimizer stepped once per accumulated step
    assert not np.allclose(res["params"][0][0], res["params"][-1][0])
    assert "one process, 4 micro-batches" in res["repr"]
    rows = pd.DataFrame(res["rows"])
    assert rows["step"].tolist() == list(range(1, STEPS + 1))
    assert set(rows["unit"]) == {"tokens" if token_weighted else "examples"}
    assert rows["b_simple"].iloc[-1] == pytest.approx(res["values"]["noise_scale/b_simple"])


@pytest.mark.slow
@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
def test_ddp_two_processes_match_float64_recomputation(tmp_path):
    import torch.multiprocessing as mp

    k, b, world = 2, 4, 2
    out = tmp_path / "acc.pt"
    mp.spawn(spawn_entry, args=(world, orc.free_port(), k, b, str(out)), nprocs=world,
             join=True)
    res = torch.load(out, weights_only=False)
    frame = pd.DataFrame(res["frame"])
    assert len(frame) == STEPS
    x, y = orc.dataset()
    want = []
    for t, (w, c) in enumerate(res["params"]):
        g = eo.grads_at(w, c, x, y)
        # each rank: the mean of its k micro-batch means (accelerate divides by k)
        local = [np.mean([g[eo.batch(t, r, j, b)].mean(0) for j in range(k)], axis=0)
                 for r in range(world)]
        want.append(eo.replicas(local, k * b))
    got = frame[["sq_norm_small", "b_small", "sq_norm_big", "b_big"]].to_numpy()
    np.testing.assert_allclose(got, np.array(want, dtype=float), rtol=1e-10)
    assert "DDP over 2 ranks" in res["repr"]
    # the log counts the data-parallel group's examples and feeds the schedule command
    log = pd.read_csv(str(out) + ".csv")
    assert log["examples"].tolist() == [world * k * b * (s + 1) for s in range(STEPS)]
    eo.schedule_reads(str(out) + ".csv", world * k * b, tmp_path)


def test_refusals():
    from accelerate import Accelerator

    from empirical_batch.errors import InputError
    from empirical_batch.integrations.accelerate import AccelerateNoiseScale

    acc = Accelerator(gradient_accumulation_steps=1, cpu=True)
    with pytest.raises(InputError, match="gradient_accumulation_steps >= 2"):
        AccelerateNoiseScale(acc, orc.model(), micro_batch_size=4)
    with pytest.raises(InputError, match=r"accelerate\.Accelerator"):
        AccelerateNoiseScale(object(), orc.model(), micro_batch_size=4)
