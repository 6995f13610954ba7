"""The framework callbacks inside the real frameworks, on CPU.

A linear least-squares model (tests/measure_oracle.py) trains inside a Hugging Face
``Trainer`` and a Lightning ``Trainer`` with gradient accumulation (2 micro-batches of
4), gradient clipping (which v0.1's hand-written callback turned into a wrong, even
negative, B_simple) and an epoch-end remainder with one backward pass. The model records
every micro-batch it sees and the parameters it sees it with, so each measured step's
squared norms are recomputed exactly (numpy, float64) from the same batches: the
plain-loop value. bf16 autocast (AMP on CPU) is checked the same way, to bf16 precision.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from empirical_batch.integrations import (  # noqa: E402
    log_tensorboard,
    log_wandb,
    noise_scale_values,
)
from empirical_batch.measure import GradientNoiseScale  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                         "ignore::FutureWarning", "ignore::UserWarning")]

MICRO, K, N_DATA, EPOCHS = 4, 2, 36, 2  # 9 micro-batches an epoch: 4 steps + 1 remainder


class Recorder(nn.Module):
    """The oracle's linear model; remembers (x, y, w, c) of every training forward."""

    def __init__(self):
        super().__init__()
        self.lin = orc.model().float()
        self.seen: list[tuple[np.ndarray, ...]] = []
        self.dtypes: set[torch.dtype] = set()

    def record(self, x, y):
        if torch.is_grad_enabled():
            w = self.lin.weight.detach().double().numpy().ravel().copy()
            c = float(self.lin.bias.detach())
            self.seen.append((x.detach().double().numpy(), y.detach().double().numpy(), w, c))

    def forward(self, x, labels):
        self.record(x, labels)
        out = self.lin(x)
        self.dtypes.add(out.dtype)
        return {"loss": orc.loss_fn(out.float(), labels), "logits": out}


def _expected(seen):
    """Per optimizer step (micro-batches sharing parameters): mean_j |g_j|² and |ḡ|² of
    the micro-batch mean gradients, for the steps with K micro-batches."""
    steps: list[list] = []
    for rec in seen:
        if steps and np.array_equal(steps[-1][0][2], rec[2]) and steps[-1][0][3] == rec[3]:
            steps[-1].append(rec)
        else:
            steps.append([rec])
    small, big = [], []
    for step in steps:
        if len(step) != K:
            continue
        gs = []
        for x, y, w, c in step:
            r = x @ w + c - y.ravel()
            gs.append(np.concatenate([r[:, None] * x, r[:, None]], axis=1).mean(0))
        gs = np.array(gs)
        small.append(np.mean(np.sum(gs**2, 1)))
        big.append(np.sum(gs.mean(0) ** 2))
    return np.array(small), np.array(big), [len(s) for s in steps]


def _dataset():
    x, y = orc.dataset()
    x, y = x[:N_DATA].float(), y[:N_DATA].float()
    return [{"x": x[i], "labels": y[i]} for i in range(N_DATA)]


# --------------------------------------------------------------------- transformers
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16-autocast"])
def test_hf_trainer_callback_matches_the_exact_steps(tmp_path, bf16):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from empirical_batch.integrations.hf import NoiseScaleCallback, install

    model = Recorder()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=MICRO,
        gradient_accumulation_steps=K, num_train_epochs=EPOCHS, max_grad_norm=0.1,
        learning_rate=0.05, optim="sgd", lr_scheduler_type="constant", logging_steps=1,
        report_to=["tensorboard"], save_strategy="no", use_cpu=True, bf16=bf16, seed=0,
        dataloader_num_workers=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_dataset())
    cb = install(trainer, beta=0.9)
    assert trainer.callback_handler.callbacks[0] is cb
    trainer.train()

    small, big, sizes = _expected(model.seen)
    assert sizes == [K] * 4 + [1] + [K] * 4 + [1]  # an epoch-end remainder each epoch
    assert np.sqrt(big).min() > 0.1  # max_grad_norm clipped every step
    assert model.dtypes == ({torch.bfloat16} if bf16 else {torch.float32})
    hist = cb.collector.estimator.history()
    assert cb.collector.skipped["single_backward"] == EPOCHS
    rtol = 3e-2 if bf16 else 1e-5
    np.testing.assert_allclose(hist["sq_norm_small"], small, rtol=rtol)
    np.testing.assert_allclose(hist["sq_norm_big"], big, rtol=rtol)
    assert hist["b_small"][0] == MICRO and hist["b_big"][0] == MICRO * K

    # the values reached TensorBoard through report_to (the callback ran first)
    from tbparse import SummaryReader

    scalars = SummaryReader(str(tmp_path)).scalars
    logged = scalars[scalars.tag == "train/noise_scale/b_simple"]
    assert len(logged) >= 8
    assert logged.value.iloc[-1] == pytest.approx(cb.values()["noise_scale/b_simple"],
                                                  rel=1e-5)

    # the state rides in the Trainer's checkpoint (JSON) and is restored on resume
    saved = json.loads(json.dumps(cb.state()))
    again = NoiseScaleCallback(**saved["args"])
    for key, value in saved["attributes"].items():
        setattr(again, key, value)
    again.on_train_begin(args, None, None, model=model)
    assert again.collector.estimator.steps == cb.collector.estimator.steps
    assert again.values() == pytest.approx(cb.values())
    again.collector.remove()


def test_hf_trainer_without_accumulation_uses_per_example_norms(tmp_path):
    """gradient_accumulation_steps=1: the per-example collector, exact per step, with the
    Trainer's clipping active."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from empirical_batch.integrations.hf import install

    model = Recorder()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=MICRO,
        gradient_accumulation_steps=1, num_train_epochs=1, max_grad_norm=0.1,
        learning_rate=0.05, optim="sgd", lr_scheduler_type="constant", logging_steps=1,
        report_to=[], save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_dataset())
    cb = install(trainer, beta=0.9)
    trainer.train()
    assert type(cb.collector).__name__ == "PerExampleNoiseScale"
    small, big = [], []
    for x, y, w, c in model.seen:
        r = x @ w + c - y.ravel()
        g = np.concatenate([r[:, None] * x, r[:, None]], axis=1)
        small.append(np.mean(np.sum(g**2, 1)))
        big.append(np.sum(g.mean(0) ** 2))
    assert len(small) == N_DATA // MICRO and np.sqrt(big).min() > 0.1
    hist = cb.collector.estimator.history()
    np.testing.assert_allclose(hist["sq_norm_small"], small, rtol=1e-5)
    np.testing.assert_allclose(hist["sq_norm_big"], big, rtol=1e-5)
    assert hist["b_small"][0] == 1 and hist["b_big"][0] == MICRO


def test_hf_callback_refuses_what_it_cannot_measure(tmp_path):
    transformers = pytest.importorskip("transformers")
    from empirical_batch.integrations.hf import NoiseScaleCallback

    with pytest.raises(ValueError, match="mode must be"):
        NoiseScaleCallback(mode="ddp")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True,
                                          gradient_accumulation_steps=1, report_to=[])
    cb = NoiseScaleCallback(mode="micro_batch")
    with pytest.raises(ValueError, match="gradient_accumulation_steps >= 2"):
        cb.on_train_begin(args, None, None, model=Recorder())
    auto = NoiseScaleCallback()  # no accumulation: per-example norms
    auto.on_train_begin(args, None, None, model=Recorder())
    assert type(auto.collector).__name__ == "PerExampleNoiseScale"
    assert auto.values() == {}


# ------------------------------------------------------------------------ lightning
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_lightning_callback_matches_the_exact_steps(tmp_path, precision):
    L = pytest.importorskip("lightning")
    from lightning.pytorch.loggers import CSVLogger

    from empirical_batch.integrations.lightning import NoiseScaleCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = Recorder()

        def training_step(self, batch, batch_idx):
            return self.net(batch["x"], batch["labels"])["loss"]

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    data = torch.utils.data.DataLoader(_dataset(), batch_size=MICRO, shuffle=True,
                                       generator=torch.Generator().manual_seed(0))
    module = Module()
    cb = NoiseScaleCallback(micro_batch_size=MICRO, beta=0.9)
    trainer = L.Trainer(max_epochs=EPOCHS, accumulate_grad_batches=K, gradient_clip_val=0.1,
                        accelerator="cpu", devices=1, precision=precision, callbacks=[cb],
                        logger=CSVLogger(str(tmp_path)), log_every_n_steps=1,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(module, data)

    small, big, sizes = _expected(module.net.seen)
    assert sizes == [K] * 4 + [1] + [K] * 4 + [1]
    assert np.sqrt(big).min() > 0.1  # gradient_clip_val clipped every step
    assert module.net.dtypes == ({torch.bfloat16} if precision.startswith("bf16") else
                                 {torch.float32})
    hist = cb.collector.estimator.history()
    assert cb.collector.skipped["single_backward"] == EPOCHS
    rtol = 3e-2 if precision.startswith("bf16") else 1e-5
    np.testing.assert_allclose(hist["sq_norm_small"], small, rtol=rtol)
    np.testing.assert_allclose(hist["sq_norm_big"], big, rtol=rtol)

    import pandas as pd

    metrics = pd.read_csv(next(tmp_path.rglob("metrics.csv")))
    logged = metrics["noise_scale/b_simple"].dropna()
    # one row per optimizer step (10); Lightning repeats the last value at the two
    # skipped remainder steps, which add no new value
    assert len(logged) == 10 and logged.nunique() == 8
    assert logged.iloc[-1] == pytest.approx(cb.collector.b_simple, rel=1e-6)

    restored = NoiseScaleCallback(micro_batch_size=MICRO)
    restored.load_state_dict(cb.state_dict())
    assert restored.state_dict()["estimator"]["steps"] == 8


# ----------------------------------------------------------------------- plain loops
def _plain_loop(steps=5):
    x, y = orc.dataset()
    m = orc.model()
    gns = GradientNoiseScale(m, micro_batch_size=MICRO, accumulation_steps=K, beta=0.9)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        for _ in range(K):
            idx = rng.integers(0, orc.N, MICRO)
            (orc.loss_fn(m(x[idx]), y[idx]) / K).backward()
        gns.step()
        m.zero_grad()
    return gns


def test_plain_loop_loggers(tmp_path):
    from tbparse import SummaryReader
    from torch.utils.tensorboard import SummaryWriter

    gns = _plain_loop()
    with SummaryWriter(str(tmp_path)) as writer:
        written = log_tensorboard(writer, gns, step=5)
    assert set(written) == {"noise_scale/b_simple", "noise_scale/g2",
                            "noise_scale/trace_sigma", "noise_scale/skipped"}
    scalars = SummaryReader(str(tmp_path)).scalars
    got = dict(zip(scalars.tag, scalars.value, strict=True))
    assert got["noise_scale/b_simple"] == pytest.approx(gns.b_simple, rel=1e-6)

    class Run:  # wandb.init()'s result: log(dict, step=)
        def __init__(self):
            self.calls: list = []

        def log(self, values, step=None):
            self.calls.append((values, step))

    run = Run()
    assert log_wandb(run, gns, step=7) == noise_scale_values(gns)
    assert run.calls == [(noise_scale_values(gns), 7)]
    fresh = GradientNoiseScale(orc.model(), micro_batch_size=MICRO, accumulation_steps=K)
    assert log_wandb(run, fresh, step=8) == {} and len(run.calls) == 1
