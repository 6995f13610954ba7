"""The adaptive-batch loop stopped after a batch change and resumed, in the real
frameworks, on CPU; and the learning-rate schedule on examples.

The setup of tests/test_integrations_adaptive.py (a linear model, plain SGD, the batch
doubles from 8 to 16 within the first epoch) with a linearly decaying learning rate.
The resumed run must train on the same micro-batches, with the same parameters and the
same rate at every step, as the uninterrupted one; the decay must reach 0 when the data
ends although the steps after the change hold twice the examples.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.errors import InputError  # noqa: E402
from empirical_batch.schedule import AdaptiveBatchRule  # noqa: E402
from tests.test_integrations import Recorder, _group_steps  # noqa: E402
from tests.test_integrations_adaptive import K0, LR, MICRO, N, _data  # noqa: E402

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                         "ignore::FutureWarning", "ignore::UserWarning")]


def _steps(seen):
    """(micro-batches, parameters) of every optimizer step, in order."""
    recs = [{"x": x, "w": w, "c": c, "theta": np.r_[w, c]} for x, _, w, c in seen]
    return [(np.concatenate([r["x"] for r in s]), s[0]["theta"]) for s in _group_steps(recs)]


def _sizes(seen):
    """Micro-batches of every optimizer step."""
    return [len(s) for s in _group_steps([{"w": w, "c": c} for *_, w, c in seen])]


def _same_steps(a, b):
    assert len(a) == len(b)
    for (xa, ta), (xb, tb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(xa, xb)  # the same examples in the same steps
        np.testing.assert_allclose(ta, tb, rtol=1e-6, atol=1e-7)  # the same updates


# --------------------------------------------------------------------- transformers
def _hf(tmp_path, **kw):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    base = dict(output_dir=str(tmp_path), per_device_train_batch_size=MICRO,
                gradient_accumulation_steps=K0, num_train_epochs=1, learning_rate=LR,
                optim="sgd", lr_scheduler_type="linear", max_grad_norm=0.0,
                logging_steps=1, report_to=[], save_strategy="steps", save_steps=20,
                use_cpu=True, seed=0, disable_tqdm=True)
    return transformers, transformers.TrainingArguments(**{**base, **kw})


def _hf_run(tmp_path, resume=None, beta=0.95, **kw):
    transformers, args = _hf(tmp_path, **kw)
    from empirical_batch.integrations.hf import install_adaptive

    model = Recorder()
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_data())
    cb = install_adaptive(trainer, AdaptiveBatchRule("doubling", min_steps=4), beta=beta,
                          level=0.5)
    trainer.train(resume_from_checkpoint=resume)
    return trainer, cb, model


@pytest.mark.parametrize("restore", [False, True], ids=["default", "restore_callbacks"])
def test_hf_adaptive_run_resumed_after_a_change_equals_the_uninterrupted_run(
        tmp_path, restore):
    full, cb, model = _hf_run(tmp_path, restore_callback_states_from_checkpoint=restore)
    change = cb.changes[0]["step"]
    ckpt = json.loads((tmp_path / "checkpoint-20" / "trainer_state.json").read_text())
    assert change < 20 < full.state.global_step  # the checkpoint holds the grown batch
    steps = _steps(model.seen)
    again, cb2, model2 = _hf_run(tmp_path, resume=str(tmp_path / "checkpoint-20"),
                                 restore_callback_states_from_checkpoint=restore)
    assert ckpt["global_step"] == 20
    _same_steps(_steps(model2.seen), steps[20:])
    assert json.dumps(cb2.changes, sort_keys=True) == json.dumps(cb.changes, sort_keys=True)
    assert again.state.global_step == full.state.global_step
    assert again.args.gradient_accumulation_steps == 2 * K0
    assert cb2.noise.values()["noise_scale/examples"] == N  # no example trained twice
    assert again.state.epoch == pytest.approx(1.0)
    rates = [h["learning_rate"] for h in full.state.log_history if "learning_rate" in h]
    rates2 = [h["learning_rate"] for h in again.state.log_history if "learning_rate" in h]
    np.testing.assert_allclose(rates2, rates, rtol=1e-12)
    assert again.lr_scheduler.base_lrs == [pytest.approx(2 * LR)] * 2  # two groups


def test_hf_decaying_schedule_runs_on_examples_and_reaches_its_end(tmp_path):
    full, cb, model = _hf_run(tmp_path, save_strategy="no")
    assert cb.changes
    sizes = _sizes(model.seen)
    assert sum(sizes) * MICRO == N and max(sizes) == 2 * K0  # fewer, larger steps
    # the rate reached the end of the decay exactly when the data ended
    assert full.lr_scheduler.get_last_lr() == [0.0, 0.0]
    # and a bound in optimizer steps holds the examples of that many configured steps
    bounded, cb_b, model_b = _hf_run(tmp_path / "b", save_strategy="no", max_steps=20)
    assert sum(_sizes(model_b.seen)) == 20 * K0  # the examples of 20 steps of 8
    assert cb_b.changes and bounded.state.global_step < 20
    assert bounded.lr_scheduler.get_last_lr() == [0.0, 0.0]


def test_hf_resume_with_another_beta_is_refused(tmp_path):
    _hf_run(tmp_path)
    with pytest.raises(InputError, match=r"beta=0\.95.*beta=0\.5"):
        _hf_run(tmp_path, resume=str(tmp_path / "checkpoint-20"), beta=0.5)
    # without a beta the callback continues with the checkpoint's, and says so
    _, cb, _ = _hf_run(tmp_path, resume=str(tmp_path / "checkpoint-20"), beta=None)
    assert cb.noise.beta == cb.noise.collector.estimator.beta == 0.95
    per_step = cb.noise.ema_examples * (1 - 0.95)  # mean examples of a measured step
    assert 8 < per_step < 16


def test_hf_adaptive_refuses_a_scheduler_on_optimizer_steps(tmp_path):
    transformers, args = _hf(tmp_path, save_strategy="no")
    from empirical_batch.integrations.hf import install_adaptive

    model = Recorder()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=32)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_data(),
                                   optimizers=(opt, sched))
    install_adaptive(trainer)
    with pytest.raises(InputError, match=r"CosineAnnealingLR.*LambdaLR"):
        trainer.train()


# ------------------------------------------------------------------------ lightning
def _lightning_run(tmp_path, resume=None, beta=0.95, epochs=1, max_steps=-1, save=True):
    L = pytest.importorskip("lightning")
    from empirical_batch.integrations.lightning import AdaptiveBatchCallback, NoiseScaleCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = Recorder()

        def training_step(self, batch, batch_idx):
            return self.net(batch["x"], batch["labels"])["loss"]

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=LR)
            total = epochs * N // (MICRO * K0) if max_steps < 0 else max_steps
            decay = torch.optim.lr_scheduler.LambdaLR(
                opt, lambda s: max(0.0, 1.0 - s / total))
            return {"optimizer": opt,
                    "lr_scheduler": {"scheduler": decay, "interval": "step"}}

    module = Module()
    noise = NoiseScaleCallback(beta=beta, level=0.5)
    cb = AdaptiveBatchCallback(noise, AdaptiveBatchRule("doubling", min_steps=4))
    callbacks = [noise, cb]
    if save:
        callbacks.append(L.pytorch.callbacks.ModelCheckpoint(
            dirpath=tmp_path, every_n_epochs=1, save_top_k=-1, filename="{epoch}"))
    loader = torch.utils.data.DataLoader(_data(), batch_size=MICRO)
    trainer = L.Trainer(max_epochs=epochs, max_steps=max_steps,
                        accumulate_grad_batches=K0, accelerator="cpu", devices=1,
                        callbacks=callbacks, logger=False, enable_checkpointing=save,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, loader, ckpt_path=resume)
    return trainer, cb, module.net


def test_lightning_adaptive_run_resumed_after_a_change_equals_the_uninterrupted_run(
        tmp_path):
    """Stopped at the end of the first epoch (Lightning restarts a plain DataLoader's
    epoch on a resume, so a mid-epoch checkpoint replays data with or without the
    callback)."""
    full, cb, net = _lightning_run(tmp_path, epochs=2)
    steps = _steps(net.seen)
    n_first = next(i for i in range(len(steps) + 1)
                   if sum(len(x) for x, _ in steps[:i]) == N)  # the steps of epoch 0
    assert cb.changes and cb.changes[0]["step"] < n_first < full.global_step
    again, cb2, net2 = _lightning_run(tmp_path / "again", epochs=2,
                                      resume=str(tmp_path / "epoch=0.ckpt"))
    _same_steps(_steps(net2.seen), steps[n_first:])
    assert json.dumps(cb2.changes, sort_keys=True) == json.dumps(cb.changes, sort_keys=True)
    assert again.global_step == full.global_step
    assert again.accumulate_grad_batches == 2 * K0
    assert cb2.noise.values()["noise_scale/examples"] == 2 * N
    sched = again.lr_scheduler_configs[0].scheduler
    assert sched.base_lrs == [pytest.approx(2 * LR)]
    assert sched.get_last_lr() == full.lr_scheduler_configs[0].scheduler.get_last_lr()


def test_lightning_decaying_schedule_runs_on_examples_and_reaches_its_end(tmp_path):
    full, cb, net = _lightning_run(tmp_path, save=False)
    assert cb.changes and max(_sizes(net.seen)) == 2 * K0
    assert full.lr_scheduler_configs[0].scheduler.get_last_lr() == [0.0]
    bounded, cb_b, net_b = _lightning_run(tmp_path, save=False, max_steps=20)
    assert cb_b.changes and bounded.global_step < 20
    assert sum(_sizes(net_b.seen)) == 20 * K0
    assert bounded.lr_scheduler_configs[0].scheduler.get_last_lr() == [0.0]


def test_lightning_resume_with_another_beta_is_refused(tmp_path):
    _lightning_run(tmp_path)
    with pytest.raises(InputError, match=r"beta=0\.95.*beta=0\.5"):
        _lightning_run(tmp_path / "again", resume=str(tmp_path / "epoch=0.ckpt"), beta=0.5)
