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
    # every example counted; the time constant from the measured steps' 8 examples
    assert cb.values()["noise_scale/examples"] == EPOCHS * N_DATA
    assert cb.ema_examples == pytest.approx(MICRO * K / (1 - 0.9))

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
def lightning_module(net, *, lr=0.05, kwargs=False):
    """A LightningModule that trains ``net`` with SGD at ``lr``; each batch goes in as
    keyword arguments (``kwargs``) or as ``(batch["x"], batch["labels"])``."""
    L = pytest.importorskip("lightning")

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = net

        def training_step(self, batch, batch_idx):
            out = self.net(**batch) if kwargs else self.net(batch["x"], batch["labels"])
            return out["loss"]

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=lr)

    return Module()


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_lightning_callback_matches_the_exact_steps(tmp_path, precision):
    L = pytest.importorskip("lightning")
    from lightning.pytorch.loggers import CSVLogger

    from empirical_batch.integrations.lightning import NoiseScaleCallback

    data = torch.utils.data.DataLoader(_dataset(), batch_size=MICRO, shuffle=True,
                                       generator=torch.Generator().manual_seed(0))
    module = lightning_module(Recorder())
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


def test_engine_state_round_trip_and_refusals():
    """EngineNoiseScale.load_state_dict restores counters, rows and the collector, and a
    bad entry is refused before anything changes."""
    from empirical_batch.errors import InputError
    from empirical_batch.integrations.engine import EngineNoiseScale

    class Engine(EngineNoiseScale):
        def __init__(self, gns):
            self._init_log()
            self.collector = gns

    src = Engine(_plain_loop())
    src._measured(MICRO * K, 40.0, loss=1.5)
    state = src.state_dict()
    dst = Engine(GradientNoiseScale(orc.model(), micro_batch_size=MICRO, accumulation_steps=K))
    dst.load_state_dict(state)
    assert dst.state_dict() == state
    for key, value in [("steps", -1), ("steps", 1.5), ("examples", float("nan")),
                       ("tokens", -3.0), ("rows", [1]), ("extra", 0)]:
        fresh = Engine(GradientNoiseScale(orc.model(), micro_batch_size=MICRO,
                                          accumulation_steps=K))
        before = fresh.state_dict()
        with pytest.raises(InputError, match=key):
            fresh.load_state_dict({**state, key: value})
        assert fresh.state_dict() == before
    with pytest.raises(InputError, match="collector"):
        dst.load_state_dict({k: v for k, v in state.items() if k != "collector"})


# ------------------------------------------- ragged steps, padded tokens, log_history
RAGGED = 29  # batch 4, accumulation 2: 8 micro-batches an epoch, the last step 4 + 1


def _group_steps(seen):
    """Consecutive training forwards that saw the same parameters: one optimizer step."""
    steps: list[list] = []
    for rec in seen:
        if steps and np.array_equal(steps[-1][0]["w"], rec["w"]) and \
                steps[-1][0]["c"] == rec["c"]:
            steps[-1].append(rec)
        else:
            steps.append([rec])
    return steps


def _weighted_expected(steps):
    """Per step with >= 2 micro-batches of mean gradients g_j, sizes n_j and weights
    c_j: Σ|c_j g_j|²/Σc_j², |Σ c_j g_j|²/(Σc_j)² and b_small = Σc_j²/Σ(c_j²/n_j)."""
    small, big, b_small = [], [], []
    for step in steps:
        if len(step) < 2:
            continue
        g = np.array([r["g"] for r in step])
        n = np.array([r["n"] for r in step], float)
        c = np.array([r["cw"] for r in step], float)
        small.append(np.sum((c[:, None] * g) ** 2) / np.sum(c**2))
        big.append(np.sum((c[:, None] * g).sum(0) ** 2) / c.sum() ** 2)
        b_small.append(np.sum(c**2) / np.sum(c**2 / n))
    return np.array(small), np.array(big), np.array(b_small)


class TokenRecorder(nn.Module):
    """Per-token linear regression on padded sequences: labels -100 mark padding; the
    loss is Σ over the valid tokens / num_items_in_batch when the Trainer passes it
    (transformers' token normalisation), else the mean over the valid tokens."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.lin = nn.Linear(3, 1)
        self.seen: list[dict] = []

    def forward(self, x, y, labels, **kwargs):
        n_items = kwargs.get("num_items_in_batch")
        valid = labels.ne(-100)
        pred = self.lin(x).squeeze(-1)
        sq = 0.5 * ((pred - y) ** 2) * valid
        n = int(valid.sum())
        if torch.is_grad_enabled():  # exact token-mean gradient of this micro-batch
            w = self.lin.weight.detach().double().numpy().ravel().copy()
            c = float(self.lin.bias.detach())
            xs, ys = x.detach().double().numpy(), y.detach().double().numpy()
            m = valid.numpy()
            r = (xs @ w + c - ys) * m
            g = np.concatenate([(r[..., None] * xs).sum((0, 1)), [r.sum()]]) / n
            self.seen.append({"w": w, "c": c, "g": g, "n": n, "examples": x.shape[0],
                              "N": None if n_items is None else float(n_items)})
        loss = sq.sum() / (n_items if n_items is not None else n)
        return {"loss": loss}


def _padded_dataset(n=RAGGED, t=6, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        length = int(rng.integers(1, t + 1))
        labels = np.full(t, -100)
        labels[:length] = 0
        x = rng.normal(size=(t, 3))
        rows.append({"x": torch.tensor(x, dtype=torch.float32),
                     "y": torch.tensor(x @ [1.0, -2.0, 0.5] + 0.3 * rng.normal(size=t),
                                       dtype=torch.float32),
                     "labels": torch.tensor(labels)})
    return rows


def _hf_args(tmp_path, **kw):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    base = dict(output_dir=str(tmp_path), per_device_train_batch_size=MICRO,
                gradient_accumulation_steps=K, num_train_epochs=2, max_grad_norm=0.1,
                learning_rate=0.05, optim="sgd", lr_scheduler_type="constant",
                logging_steps=1, report_to=[], save_strategy="no", use_cpu=True, seed=0,
                disable_tqdm=True)
    base.update(kw)
    return transformers, transformers.TrainingArguments(**base)


def test_hf_ragged_steps_measured_with_their_real_sizes(tmp_path):
    """29 examples, batch 4, accumulation 2: every 4th step is 4 + 1 examples and is
    measured as such (the Trainer divides both losses by 2); norms exact per step."""
    transformers, args = _hf_args(tmp_path)
    from empirical_batch.integrations.hf import install

    model = Recorder()
    data = _dataset()[:RAGGED]
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    cb = install(trainer, beta=0.9)
    trainer.train()
    steps = _group_steps([{"w": w, "c": c, "n": len(x), "cw": 0.5,
                           "g": (np.concatenate([(x @ w + c - y.ravel())[:, None] * x,
                                                 (x @ w + c - y.ravel())[:, None]], 1)
                                 .mean(0))} for x, y, w, c in model.seen])
    assert [[r["n"] for r in s] for s in steps] == ([[4, 4]] * 3 + [[4, 1]]) * 2
    small, big, b_small = _weighted_expected(steps)
    hist = cb.collector.estimator.history()
    assert cb.collector.skipped_steps == 0 and len(hist["b_small"]) == 8
    np.testing.assert_allclose(hist["sq_norm_small"], small, rtol=1e-5)
    np.testing.assert_allclose(hist["sq_norm_big"], big, rtol=1e-5)
    np.testing.assert_allclose(hist["b_small"], b_small)
    assert hist["b_small"][3] == pytest.approx(2 / (1 / 4 + 1))  # harmonic mean of 4, 1
    assert cb.values()["noise_scale/examples"] == 2 * RAGGED


def test_hf_token_weighted_padded_batches_and_log_history(tmp_path):
    """num_items_in_batch: micro-batch j's token-mean gradient enters with n_j/N; the
    per-step norms equal the exact recomputation, B_simple is per token and converted
    to sequences with the loss tokens per sequence; values reach log_history and the
    checkpoint's trainer_state.json."""
    transformers, args = _hf_args(tmp_path, save_strategy="steps", save_steps=4)
    from empirical_batch.integrations.hf import install

    model = TokenRecorder()
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_padded_dataset())
    cb = install(trainer, beta=0.9)
    trainer.train()
    assert all(r["N"] is not None for r in model.seen)  # the Trainer normalised by tokens
    steps = _group_steps(model.seen)
    for s in steps:
        assert sum(r["n"] for r in s) == s[0]["N"]
        for r in s:
            r["cw"] = r["n"] / r["N"]
    assert len({r["n"] for r in model.seen}) > 3  # padding: unequal token counts
    small, big, b_small = _weighted_expected(steps)
    hist = cb.collector.estimator.history()
    assert cb.collector.skipped_steps == 0 and len(hist["b_small"]) == 8
    np.testing.assert_allclose(hist["sq_norm_small"], small, rtol=1e-5)
    np.testing.assert_allclose(hist["sq_norm_big"], big, rtol=1e-5)
    np.testing.assert_allclose(hist["b_small"], b_small)
    np.testing.assert_allclose(hist["b_big"], [s[0]["N"] for s in steps])

    values = cb.values()
    tokens = sum(r["n"] for r in model.seen)
    assert values["noise_scale/tokens"] == tokens
    assert values["noise_scale/examples"] == 2 * RAGGED
    per_seq = tokens / (2 * RAGGED)
    est = cb.collector.estimator
    assert values["noise_scale/b_simple_tokens"] == pytest.approx(est.b_simple)
    assert values["noise_scale/b_simple"] == pytest.approx(est.b_simple / per_seq)
    assert values["noise_scale/ema_examples"] == pytest.approx(2 * RAGGED / 8 / (1 - 0.9))
    assert cb.ema_examples == values["noise_scale/ema_examples"]

    logged = [h for h in trainer.state.log_history if "noise_scale/b_simple" in h]
    assert len(logged) == 8 + 1  # every logging step and the final summary
    assert logged[-1]["noise_scale/b_simple_tokens"] == pytest.approx(
        values["noise_scale/b_simple_tokens"])
    saved = json.loads((tmp_path / "checkpoint-8" / "trainer_state.json").read_text())
    assert any("noise_scale/b_simple_se" in h for h in saved["log_history"])
    # the log says its b_simple counts sequences, and a reader labels it so
    from empirical_batch.noise_log import load_noise_log

    assert {h.get("noise_scale/unit") for h in logged} == {"sequences"}
    assert set(load_noise_log(tmp_path / "checkpoint-8" / "trainer_state.json")["unit"]) \
        == {"sequences"}


@pytest.mark.parametrize("restore", [False, True], ids=["default", "restore_callbacks"])
def test_hf_resume_restores_the_estimator(tmp_path, restore):
    """Checkpoint at step 4 of 8, resume: the callback install() returned starts from the
    state saved in checkpoint-4's trainer_state.json and ends with 8 measured steps, with
    default arguments and with restore_callback_states_from_checkpoint."""
    transformers, args = _hf_args(tmp_path, save_strategy="steps", save_steps=4,
                                  restore_callback_states_from_checkpoint=restore)
    from empirical_batch.integrations.hf import NoiseScaleCallback, install

    first = transformers.Trainer(model=TokenRecorder(), args=args,
                                 train_dataset=_padded_dataset())
    cb1 = install(first, beta=0.9)
    first.train()
    assert cb1.collector.estimator.steps == 8
    again = transformers.Trainer(model=TokenRecorder(), args=args,
                                 train_dataset=_padded_dataset())
    cb2 = install(again, beta=0.9)
    started = []
    begin = cb2.on_train_begin

    def on_train_begin(*a, **kw):  # the state it starts from, once loaded
        begin(*a, **kw)
        started.append(json.loads(json.dumps({"estimator_state": cb2.collector.state_dict(),
                                              "counters": cb2.account.state_dict()})))

    cb2.on_train_begin = on_train_begin
    again.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    saved = json.loads((tmp_path / "checkpoint-4" / "trainer_state.json").read_text())
    entry = saved["stateful_callbacks"]["NoiseScaleCallback"]
    assert entry["attributes"]["estimator_state"]["estimator"]["steps"] == 4
    assert started == [{k: entry["attributes"][k] for k in ("estimator_state", "counters")}]
    assert entry["attributes"]["adaptive"] is None  # no AdaptiveBatchCallback
    assert again.callback_handler.callbacks[0] is cb2
    assert [c for c in again.callback_handler.callbacks
            if isinstance(c, NoiseScaleCallback)] == [cb2]
    assert cb2.collector.estimator.steps == 8
    assert cb2.values()["noise_scale/examples"] == cb1.values()["noise_scale/examples"]
    assert cb2.values()["noise_scale/b_simple"] == pytest.approx(
        cb1.values()["noise_scale/b_simple"], rel=1e-6)
    assert "noise_scale/b_simple" in again.state.log_history[-2]


def test_hf_install_uses_no_private_trainer_api(tmp_path):
    """install() only adds callbacks: no attribute of the Trainer is set or replaced, and
    the package names no private Trainer method (a transformers release may drop it)."""
    from pathlib import Path

    import empirical_batch

    transformers, args = _hf_args(tmp_path)
    from empirical_batch.integrations.hf import install, install_adaptive

    trainer = transformers.Trainer(model=TokenRecorder(), args=args,
                                   train_dataset=_padded_dataset())
    before = dict(vars(trainer))
    install_adaptive(trainer, prefix="a/")
    install(trainer, prefix="b/")
    assert vars(trainer).keys() == before.keys()
    assert all(vars(trainer)[k] is v for k, v in before.items())
    package = Path(empirical_batch.__file__).parent
    for path in package.rglob("*.py"):
        assert "_load_callback_state" not in path.read_text(), path


def test_per_example_collector_refuses_batchnorm_switched_to_training(tmp_path):
    """A model with BatchNorm built in eval mode (as from_pretrained returns it) passes
    the constructor; the Trainer switches it to training mode and the first step
    refuses."""
    from empirical_batch.errors import UsageError

    transformers, args = _hf_args(tmp_path, gradient_accumulation_steps=1)
    from empirical_batch.integrations.hf import install

    class BN(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(orc.D, 4)
            self.bn = nn.BatchNorm1d(4)
            self.out = nn.Linear(4, 1)

        def forward(self, x, labels):
            return {"loss": orc.loss_fn(self.out(self.bn(self.lin(x))), labels)}

    model = BN().eval()
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_dataset())
    install(trainer)
    with pytest.raises(UsageError, match="batch normalisation is in training mode"):
        trainer.train()


def test_lightning_ragged_steps_measured_with_their_real_sizes(tmp_path):
    """29 examples, batch 4, accumulation 2: the epoch-end step of 4 + 1 examples is
    measured with those sizes (Lightning divides each loss by 2); norms exact per step;
    the counters and the state survive a checkpoint."""
    L = pytest.importorskip("lightning")

    from empirical_batch.integrations.lightning import NoiseScaleCallback

    data = (_dataset() * 2)[:RAGGED]
    loader = torch.utils.data.DataLoader(data, batch_size=MICRO, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    module = lightning_module(Recorder())
    cb = NoiseScaleCallback(beta=0.9)
    trainer = L.Trainer(max_epochs=2, accumulate_grad_batches=K, gradient_clip_val=0.1,
                        accelerator="cpu", devices=1, callbacks=[cb], logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(module, loader)
    steps = _group_steps([{"w": w, "c": c, "n": len(x), "cw": 0.5,
                           "g": (np.concatenate([(x @ w + c - y.ravel())[:, None] * x,
                                                 (x @ w + c - y.ravel())[:, None]], 1)
                                 .mean(0))} for x, y, w, c in module.net.seen])
    assert [[r["n"] for r in s] for s in steps] == ([[4, 4]] * 3 + [[4, 1]]) * 2
    small, big, b_small = _weighted_expected(steps)
    hist = cb.collector.estimator.history()
    assert cb.collector.skipped_steps == 0
    np.testing.assert_allclose(hist["sq_norm_small"], small, rtol=1e-5)
    np.testing.assert_allclose(hist["sq_norm_big"], big, rtol=1e-5)
    np.testing.assert_allclose(hist["b_small"], b_small)
    values = cb.values()
    assert values["noise_scale/examples"] == 2 * RAGGED
    assert values["noise_scale/ema_examples"] == pytest.approx(2 * RAGGED / 8 / 0.1)
    assert cb.ema_examples == values["noise_scale/ema_examples"]
    restored = NoiseScaleCallback()
    restored.load_state_dict(json.loads(json.dumps(cb.state_dict())))
    assert restored.state_dict()["counters"]["examples"] == 2 * RAGGED


def test_lightning_padded_token_batches_count_tokens(tmp_path):
    """Batches with integer labels (-100 for padding): the tokens counter and the
    per-token B_simple = B_simple × loss tokens per sequence are logged."""
    L = pytest.importorskip("lightning")
    from lightning.pytorch.loggers import CSVLogger

    from empirical_batch.integrations.lightning import NoiseScaleCallback

    data = _padded_dataset()
    loader = torch.utils.data.DataLoader(data, batch_size=MICRO)
    module = lightning_module(TokenRecorder(), kwargs=True)
    cb = NoiseScaleCallback(beta=0.9)
    trainer = L.Trainer(max_epochs=1, accumulate_grad_batches=K, accelerator="cpu",
                        devices=1, callbacks=[cb], logger=CSVLogger(str(tmp_path)),
                        log_every_n_steps=1, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, loader)
    tokens = sum(int((r["labels"] != -100).sum()) for r in data)
    values = cb.values()
    assert values["noise_scale/tokens"] == tokens
    assert values["noise_scale/b_simple_tokens"] == pytest.approx(
        values["noise_scale/b_simple"] * tokens / RAGGED)

    import pandas as pd

    metrics = pd.read_csv(next(tmp_path.rglob("metrics.csv")))
    assert metrics["noise_scale/tokens"].dropna().iloc[-1] == tokens


def _lightning_token_run(tmp_path, **options):
    """Two shuffled epochs of 29 padded sequences (batch 4, accumulation 2: each epoch
    ends with a step of 4 + 1 sequences); the loss of each micro-batch is the mean over
    its valid tokens."""
    L = pytest.importorskip("lightning")
    from lightning.pytorch.loggers import CSVLogger

    from empirical_batch.integrations.lightning import NoiseScaleCallback

    data = _padded_dataset()
    loader = torch.utils.data.DataLoader(data, batch_size=MICRO, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    module = lightning_module(TokenRecorder(), kwargs=True)
    cb = NoiseScaleCallback(beta=0.9, **options)
    trainer = L.Trainer(max_epochs=2, accumulate_grad_batches=K, gradient_clip_val=0.1,
                        accelerator="cpu", devices=1, callbacks=[cb],
                        logger=CSVLogger(str(tmp_path)), log_every_n_steps=1,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(module, loader)
    return data, module.net.seen, cb


def test_lightning_padded_token_batches_measured_exactly(tmp_path):
    """Lightning divides each micro-batch's token-mean loss by K: micro-batch j enters
    with c_j = 1/K and n_j tokens. Every step's squared norms and sizes (tokens) equal a
    float64 recomputation from the batches the model saw; B_simple is logged in
    sequences and in tokens."""
    data, seen, cb = _lightning_token_run(tmp_path)
    steps = _group_steps([{**r, "cw": 1 / K} for r in seen])
    assert [[r["examples"] for r in s] for s in steps] == ([[4, 4]] * 3 + [[4, 1]]) * 2
    assert len({r["n"] for s in steps for r in s}) > 3  # padded: unequal token counts
    small, big, b_small = _weighted_expected(steps)
    hist = cb.collector.estimator.history()
    assert cb.collector.skipped_steps == 0 and len(hist["b_small"]) == 8
    np.testing.assert_allclose(hist["sq_norm_small"], small, rtol=1e-5)
    np.testing.assert_allclose(hist["sq_norm_big"], big, rtol=1e-5)
    np.testing.assert_allclose(hist["b_small"], b_small)  # harmonic mean of the n_j
    n = [[r["n"] for r in s] for s in steps]
    np.testing.assert_allclose(hist["b_big"], [len(s) ** 2 / sum(1 / v for v in s)
                                               for s in n])
    tokens = 2 * sum(int((r["labels"] != -100).sum()) for r in data)
    values = cb.values()
    assert values["noise_scale/tokens"] == tokens
    assert values["noise_scale/examples"] == 2 * RAGGED
    assert values["noise_scale/b_simple_tokens"] == pytest.approx(cb.collector.b_simple)
    assert values["noise_scale/b_simple"] == pytest.approx(
        cb.collector.b_simple * 2 * RAGGED / tokens)

    import pandas as pd

    metrics = pd.read_csv(next(tmp_path.rglob("metrics.csv")))
    assert metrics["noise_scale/b_simple_tokens"].dropna().iloc[-1] == pytest.approx(
        values["noise_scale/b_simple_tokens"], rel=1e-6)
    assert metrics["noise_scale/b_simple"].dropna().iloc[-1] == pytest.approx(
        values["noise_scale/b_simple"], rel=1e-6)


def test_lightning_loss_normalization_stated(tmp_path):
    """loss_normalization="examples" keeps the sizes in sequences (a loss that is a mean
    over examples); a bad option is refused by name."""
    from empirical_batch.errors import InputError
    from empirical_batch.integrations.lightning import NoiseScaleCallback

    _, seen, cb = _lightning_token_run(tmp_path, loss_normalization="examples")
    steps = _group_steps(seen)
    hist = cb.collector.estimator.history()
    np.testing.assert_allclose(hist["b_small"],
                               [K / sum(1 / r["examples"] for r in s) for s in steps])
    with pytest.raises(InputError, match="loss_normalization"):
        NoiseScaleCallback(loss_normalization="tokens")
    with pytest.raises(InputError, match="token_rule"):
        NoiseScaleCallback(token_rule="half")


def test_step_account_token_means_shifted_and_mixed():
    """Per-micro-batch token means with the shifted rule count labels[..., 1:]; a run
    whose batches lose their labels after a per-token step is refused."""
    from empirical_batch.errors import InputError
    from empirical_batch.integrations.steps import StepAccount

    acc = StepAccount(token_rule="shifted", loss_normalization="auto")
    for lab in ([[0, 0, 0, -100]], [[0, 0, -100, -100], [0, 0, 0, 0]]):
        acc.record({"input_ids": torch.zeros(len(lab), 4), "labels": torch.tensor(lab)})
    assert acc.plan(lambda n: [1 / K] * n) == (None, [2, 4], [1 / K, 1 / K])
    assert acc.tokens == 6 and acc.unit == "tokens"
    acc.record({"x": torch.zeros(2, 3)})
    acc.record({"x": torch.zeros(2, 3)})
    with pytest.raises(InputError, match="switched from token-normalised"):
        acc.plan(lambda n: [1 / K] * n)
    strict = StepAccount(loss_normalization="micro_batch_tokens")
    strict.record({"x": torch.zeros(2, 3)})
    strict.record({"x": torch.zeros(2, 3)})
    assert strict.plan(lambda n: [1 / K] * n)[0] == "unknown_sizes"
