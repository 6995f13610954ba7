"""RayTrainNoiseScale under a real Ray Train ``TorchTrainer`` on a local cluster with two
CPU workers (gloo): DDP from ``prepare_model`` and FSDP1's ``FullyShardedDataParallel``,
each step's squared norms against a float64 recomputation on the same micro-batches at
the parameters the step saw; the log read by ``empirical-batch schedule --log``;
`ElasticBatch` on a resize."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ray.train")

from tests import engine_oracle as eo  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402
from tests.ray_worker import MICRO, STEPS, train_func  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def local_ray():
    import ray

    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), before) if p)
    os.environ.setdefault("RAY_TRAIN_ENABLE_STATE_TRACKING", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield ray
    ray.shutdown()
    if before is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = before


@pytest.mark.slow
@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_torch_trainer_matches_float64_recomputation(local_ray, tmp_path, strategy):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    out = str(tmp_path / f"{strategy}.pt")
    trainer = TorchTrainer(
        train_func, train_loop_config={"strategy": strategy, "out": out},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False,
                                     resources_per_worker={"CPU": 1}),
        run_config=RunConfig(storage_path=str(tmp_path / "ray"), name=strategy))
    result = trainer.fit()
    assert result.error is None
    res = torch.load(out, weights_only=False)
    reported = res["reported"]  # the last ray.train.report: the group's examples
    assert reported["noise_scale/examples"] == STEPS * 4 * MICRO and "loss" in reported
    assert reported["noise_scale/b_simple"] == pytest.approx(res["rows"][-1]["b_simple"])
    frame = pd.DataFrame(res["frame"])
    assert len(frame) == STEPS and res["world"] == 2 and res["k"] == 2
    x, y = orc.dataset()
    k, world = res["k"], res["world"]
    want = []
    for t, (w, c) in enumerate(res["params"]):
        g = eo.grads_at(w, c, x, y)
        micro = [[g[eo.batch(t, r, j, MICRO)].mean(0) for j in range(k)]
                 for r in range(world)]
        if strategy == "ddp":  # one all-reduce of each worker's k micro-batches
            want.append(eo.replicas([np.mean(m, axis=0) for m in micro], k * MICRO))
        else:  # FSDP reduce-scatters every micro-batch: W k micro-gradients
            flat = [m for ms in micro for m in ms]
            want.append(eo.weighted(flat, [MICRO] * len(flat), [1.0] * len(flat)))
    got = frame[["sq_norm_small", "b_small", "sq_norm_big", "b_big"]].to_numpy()
    np.testing.assert_allclose(got, np.array(want, dtype=float), rtol=1e-10)
    assert f"{strategy} over 2 workers" in res["repr"]
    assert not np.allclose(res["params"][0][0], res["params"][-1][0])  # it trained
    eo.schedule_reads(out + ".csv", 4 * MICRO, tmp_path)


def test_elastic_batch_keeps_or_transfers():
    from empirical_batch.errors import InputError
    from empirical_batch.integrations.ray_train import ElasticBatch
    from empirical_batch.transfer import transfer

    keep = ElasticBatch(96, 8, policy="accumulate")
    assert [keep.at(w)["accumulation_steps"] for w in (1, 2, 3, 4, 6, 12)] == \
        [12, 6, 4, 3, 2, 1]
    assert {keep.at(w)["global_batch"] for w in (1, 2, 3)} == {96}
    with pytest.raises(InputError, match="policy='transfer'"):
        keep.at(5)
    hp = {"lr": 3e-4, "beta2": 0.95}
    grow = ElasticBatch(96, 8, policy="transfer", hparams=hp, optimizer="adam",
                        lr_rule="sqrt", accumulation_steps=3)
    at2 = grow.at(2)
    assert at2["global_batch"] == 48 and at2["accumulation_steps"] == 3
    assert at2["hparams"] == transfer(hp, 96, 48, optimizer="adam", rule="sqrt").new
    assert grow.at(4)["transfer"] is None and grow.at(4)["hparams"] == hp


def test_refuses_an_unwrapped_model():
    from empirical_batch.errors import InputError
    from empirical_batch.integrations.ray_train import RayTrainNoiseScale

    with pytest.raises(InputError, match="prepare_model"):
        RayTrainNoiseScale(orc.model(), local_batch_size=4)
