"""OLMoCoreNoiseScale inside a real OLMo-core ``Trainer`` on CPU (tests/olmo_core_worker.py):
two gloo processes with DDP, and one process, each step's squared norms against a float64
recomputation on the same micro-batches of every rank at the parameters the step saw
(ragged loss tokens, weights n_j/N); the values the trainer's metric loggers received;
the callback's state saved in a checkpoint and restored by a resumed run; the log read
by ``empirical-batch schedule --log``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("olmo_core")

from tests import engine_oracle as eo  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402
from tests import olmo_core_worker as ow  # noqa: E402

STEPS = 5
COLUMNS = ["sq_norm_small", "b_small", "sq_norm_big", "b_big"]


def _run(tmp_path, world, steps=STEPS, stop_at=None, name="run", kind="basic"):
    import torch.multiprocessing as mp

    out = str(tmp_path / f"{name}.pt")
    mp.spawn(
        ow.worker,
        args=(world, orc.free_port(), steps, str(tmp_path / "ckpt"), out, stop_at, kind),
        nprocs=world,
        join=True,
    )
    res = torch.load(out, weights_only=False)
    res["kind"] = kind
    return res


def _micro_grads(params: dict, batch: dict, kind: str):
    """(mean-per-token gradients, loss tokens) of each micro-batch, float64 autograd."""
    from olmo_core.data.utils import get_labels

    model = (ow.tiny_transformer() if kind == "transformer" else ow.tiny_lm()).double()
    model.load_state_dict({k: torch.tensor(v) for k, v in params.items()})
    tensors = {k: torch.tensor(v) for k, v in batch.items()}
    labels = get_labels(tensors)
    grads, sizes = [], []
    for s in range(0, ow.INSTANCES, ow.PER_MICRO):
        ids, lab = tensors["input_ids"][s : s + ow.PER_MICRO], labels[s : s + ow.PER_MICRO]
        n = int((lab != -100).sum())
        loss = (
            torch.nn.functional.cross_entropy(
                model(ids).reshape(-1, ow.VOCAB), lab.reshape(-1), reduction="sum"
            )
            / n
        )
        g = torch.autograd.grad(loss, list(model.parameters()))
        grads.append(torch.cat([x.reshape(-1) for x in g]).numpy())
        sizes.append(n)
    return grads, sizes


def _expected(res):
    rows = []
    for t, params in enumerate(res["params"]):
        micro, sizes, weights = [], [], []
        for rank_batches in res["batches"]:
            g, n = _micro_grads(params, rank_batches[t], res.get("kind", "basic"))
            micro += g
            sizes += n
            weights += [nj / sum(n) for nj in n]  # loss Σ_tokens / N of the rank's batch
        rows.append(eo.weighted(micro, sizes, weights))
    return np.array(rows)


def _check_run(res, world, steps=STEPS):
    frame = pd.DataFrame(res["frame"])
    assert len(frame) == steps
    # a float32 trainer against the float64 recomputation
    np.testing.assert_allclose(frame[COLUMNS].to_numpy(), _expected(res), rtol=2e-5)
    assert frame.b_small.nunique() > 1  # the loss tokens really were ragged
    first, last = res["params"][0], res["params"][-1]
    assert not all(np.allclose(first[k], last[k]) for k in first)  # it trained
    # what the trainer's loggers received at each step: the smoothed estimates after
    # that step, as in the step's row of the noise log
    rows = pd.DataFrame(res["rows"])
    for t in range(1, steps + 1):
        got, row = res["metrics"][t], rows.iloc[t - 1]
        for key in ("g2", "trace_sigma", "b_simple"):
            assert got[f"noise_scale/{key}"] == pytest.approx(row[key], rel=1e-12)
        assert got["noise_scale/examples"] == world * ow.INSTANCES * t
    assert rows["step"].tolist() == list(range(1, steps + 1))
    assert set(rows["unit"]) == {"tokens"}
    tokens = [
        sum(int((b["label_mask"][:, 1:]).sum()) for b in (rb[t] for rb in res["batches"]))
        for t in range(steps)
    ]
    assert rows["tokens"].tolist() == np.cumsum(tokens).tolist()
    assert f"{world} data-parallel ranks" in res["repr"]


@pytest.mark.slow
@pytest.mark.xdist_group("processes")  # one at a time: see Makefile (--dist loadgroup)
@pytest.mark.parametrize("kind", ["basic", "transformer"])
def test_ddp_two_ranks_match_float64_recomputation(tmp_path, kind):
    """BasicTrainModule with torch's DistributedDataParallel; TransformerTrainModule with
    an OLMo-core Transformer and dp_config "ddp" (composable replicate)."""
    res = _run(tmp_path, 2, kind=kind)
    _check_run(res, 2)
    log = tmp_path / "ckpt" / "gns.csv"
    assert pd.read_csv(log)["step"].tolist() == list(range(1, STEPS + 1))
    if kind == "basic":  # the transformer's 5 steps leave b_simple unresolved (<= 0)
        eo.schedule_reads(log, 2 * ow.INSTANCES * ow.SEQ, tmp_path)


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
@pytest.mark.parametrize("kind", ["basic", "transformer"])
def test_one_process_matches_float64_recomputation(tmp_path, kind):
    res = _run(tmp_path, 1, kind=kind)
    _check_run(res, 1)


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_state_is_saved_in_the_checkpoint_and_restored(tmp_path):
    steps, stop = 6, 3
    first = _run(tmp_path, 1, steps=steps, stop_at=stop, name="first")
    assert first["global_step"] == stop and len(first["rows"]) == stop
    second = _run(tmp_path, 1, steps=steps, name="second")
    assert second["global_step"] == steps
    rows = pd.DataFrame(second["rows"])
    assert rows["step"].tolist() == list(range(1, steps + 1))  # the log continued
    assert rows["examples"].tolist() == [ow.INSTANCES * (t + 1) for t in range(steps)]
    assert rows.iloc[:stop].equals(pd.DataFrame(first["rows"]))
    # the resumed estimator holds the first run's steps, then its own
    joined = {
        "params": first["params"] + second["params"],
        "batches": [first["batches"][0] + second["batches"][0]],
    }
    frame = pd.DataFrame(second["frame"])
    assert len(frame) == steps
    np.testing.assert_allclose(frame[COLUMNS].to_numpy(), _expected(joined), rtol=2e-5)


def test_refuses_a_sharded_or_unreduced_model_and_checks_its_state():
    from empirical_batch.errors import InputError
    from empirical_batch.integrations.olmo_core import OLMoCoreNoiseScale

    gns = OLMoCoreNoiseScale()
    with pytest.raises(InputError, match="unknown entries"):
        gns.load_state_dict({**gns.state_dict(), "bogus": 1})
    with pytest.raises(InputError, match="steps"):
        gns.load_state_dict({**gns.state_dict(), "steps": -1})

    class Trainer:  # a train module without a model
        train_module = object()
        dp_process_group = None

    gns.trainer = Trainer()
    with pytest.raises(InputError, match="train module with one model"):
        gns.pre_train()


def test_a_step_whose_backward_passes_differ_from_its_micro_batches_is_an_error():
    """Driven as Trainer._fit_epoch calls the hooks: pre_step, the train module's
    backward passes, pre_optim_step."""
    from empirical_batch.errors import UsageError
    from empirical_batch.integrations.olmo_core import OLMoCoreNoiseScale

    model = ow.tiny_lm()

    class Module:
        rank_microbatch_size = ow.PER_MICRO * ow.SEQ
        label_ignore_index = -100

    Module.model = model

    class Trainer:
        train_module = Module()
        dp_process_group = None

        def __init__(self):
            self.recorded = {}

        def get_metric(self, name):
            return None

        def record_metric(self, name, value, reduce_type=None):
            self.recorded[name] = value

    gns = OLMoCoreNoiseScale(beta=0.0)
    gns.trainer = Trainer()
    gns.pre_train()
    batch = ow.make_batch(0, 0)
    gns.pre_step(batch)
    for s in range(0, ow.INSTANCES, ow.PER_MICRO):  # all 3 micro-batches: measured
        model(batch["input_ids"][s : s + ow.PER_MICRO]).sum().backward()
    assert gns.pre_optim_step() is not None
    assert gns.trainer.recorded["noise_scale/b_simple"] == gns.b_simple
    gns.pre_step(batch)
    model(batch["input_ids"][: ow.PER_MICRO]).sum().backward()  # 1 of 3
    with pytest.raises(UsageError, match=r"1 backward passes .* 3 micro-batches"):
        gns.pre_optim_step()
    gns.remove()


def test_without_olmo_core_the_error_names_the_extra():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\nsys.modules['olmo_core'] = None\n"
        "from empirical_batch.errors import MissingDependencyError\n"
        "try:\n    import empirical_batch.integrations.olmo_core\n"
        "except MissingDependencyError as exc:\n    print(exc)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith(
        "needs ai2-olmo-core: pip install 'empirical_batch[olmo-core]'"), run.stdout
