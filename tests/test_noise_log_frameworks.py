"""The callbacks' logs read as noise logs: a real Hugging Face ``Trainer``'s
``log_history`` and ``trainer_state.json``, and Lightning's ``CSVLogger`` metrics, on
CPU (the models and data of tests/test_integrations.py)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.noise_log import load_noise_log  # noqa: E402
from empirical_batch.schedule import NoiseTrajectory  # noqa: E402
from tests.test_integrations import MICRO, RAGGED, Recorder, _dataset, _hf_args  # noqa: E402

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                         "ignore::FutureWarning", "ignore::UserWarning")]


def test_hf_log_history_is_a_noise_log(tmp_path):
    transformers, args = _hf_args(tmp_path, save_strategy="steps", save_steps=8)
    from empirical_batch.integrations.hf import install

    trainer = transformers.Trainer(model=Recorder(), args=args,
                                   train_dataset=_dataset()[:RAGGED])
    cb = install(trainer, beta=0.9)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "noise_scale/b_simple" in h]
    for source in (trainer.state.log_history, tmp_path / "checkpoint-8" / "trainer_state.json"):
        f = load_noise_log(source)
        assert f["step"].tolist() == sorted({h["step"] for h in logged})
        last = f.iloc[-1]
        assert last["b_simple"] == pytest.approx(cb.values()["noise_scale/b_simple"])
        assert last["examples"] == 2 * RAGGED and set(f["unit"]) == {"examples"}
        assert np.all(np.diff(f["examples"]) > 0)
    t = NoiseTrajectory.from_log(trainer.state.log_history, 2 * MICRO, quantity="b_simple",
                                 unresolved="drop")
    assert t.progress.size + t.n_dropped == len(load_noise_log(trainer.state.log_history))


def test_lightning_csv_metrics_are_a_noise_log(tmp_path):
    L = pytest.importorskip("lightning")
    from lightning.pytorch.loggers import CSVLogger

    from empirical_batch.integrations.lightning import NoiseScaleCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = Recorder()

        def training_step(self, batch, batch_idx):
            loss = self.net(batch["x"], batch["labels"])["loss"]
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    loader = torch.utils.data.DataLoader(_dataset()[:RAGGED], batch_size=MICRO)
    cb = NoiseScaleCallback(beta=0.9)
    logger = CSVLogger(str(tmp_path), name="run")
    trainer = L.Trainer(max_epochs=2, accumulate_grad_batches=2, accelerator="cpu",
                        devices=1, callbacks=[cb], logger=logger, log_every_n_steps=1,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(Module(), loader)
    f = load_noise_log(tmp_path / "run" / "version_0" / "metrics.csv")
    assert len(f) >= 4 and f["step"].is_monotonic_increasing
    assert f["b_simple"].iloc[-1] == pytest.approx(cb.values()["noise_scale/b_simple"])
    assert f["examples"].iloc[-1] == 2 * RAGGED
