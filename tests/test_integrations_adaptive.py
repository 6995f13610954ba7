"""The adaptive-batch loop inside the real frameworks, on CPU.

A linear model (tests/test_integrations.py's Recorder) trains with plain SGD on noisy
targets; the measuring callback's interval (level 0.5) passes twice the batch of 8
within the first epoch and the doubling rule grows the accumulation from 2 to 4. The
model records every micro-batch and the parameters it saw, so the test reads off what
really happened: the micro-batches per optimizer step, and the learning rate each step
applied (SGD without clipping: Δθ = -lr · mean of the micro-batch mean gradients).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.schedule import AdaptiveBatchRule  # noqa: E402
from tests.test_integrations import Recorder, _group_steps  # noqa: E402

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                         "ignore::FutureWarning", "ignore::UserWarning")]

N, MICRO, K0, LR = 256, 4, 2, 0.002


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 5))
    y = 1.0 + 2.0 * rng.normal(size=N)
    return [{"x": torch.tensor(x[i], dtype=torch.float32),
             "labels": torch.tensor([y[i]], dtype=torch.float32)} for i in range(N)]


def _steps_and_rates(seen):
    """Micro-batches per optimizer step and the rate each step applied."""
    recs = []
    for x, y, w, c in seen:
        r = x @ w + c - y.ravel()
        g = np.concatenate([r[:, None] * x, r[:, None]], 1).mean(0)
        recs.append({"w": w, "c": c, "g": g, "theta": np.r_[w, c]})
    steps = _group_steps(recs)
    rates = []
    for a, b in itertools.pairwise(steps):
        gbar = np.mean([r["g"] for r in a], axis=0)
        delta = b[0]["theta"] - a[0]["theta"]
        rates.append(float(-delta @ gbar / (gbar @ gbar)))
    return [len(s) for s in steps], np.array(rates)


def _check(sizes, rates, changes, examples_logged):
    assert changes, "the batch never grew"
    first = changes[0]
    assert (first["old_batch"], first["new_batch"]) == (MICRO * K0, 2 * MICRO * K0)
    assert first["b_simple_low"] >= 2 * MICRO * K0  # the test that triggered it
    assert first["lr_factor"] == pytest.approx(2.0)  # linear rule, κ = 2
    # micro-batches per step: K0 until the change, then 2 K0 (the last may be partial)
    n_before = sizes.index(2 * K0)
    assert set(sizes[:n_before]) == {K0} and set(sizes[n_before:-1]) == {2 * K0}
    assert first["examples"] == n_before * K0 * MICRO
    # the rate each step applied: LR before the change, 2 LR after
    np.testing.assert_allclose(rates[:n_before], LR, rtol=1e-4)
    np.testing.assert_allclose(rates[n_before:], 2 * LR, rtol=1e-4)
    assert examples_logged == N


def test_hf_adaptive_batch_grows_and_the_rate_follows(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from empirical_batch.integrations.hf import install_adaptive

    model = Recorder()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=MICRO,
        gradient_accumulation_steps=K0, num_train_epochs=1, learning_rate=LR, optim="sgd",
        lr_scheduler_type="constant", max_grad_norm=0.0, logging_steps=1, report_to=[],
        save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_data())
    cb = install_adaptive(trainer, AdaptiveBatchRule("doubling", min_steps=4), beta=0.95,
                          level=0.5)
    trainer.train()
    sizes, rates = _steps_and_rates(model.seen)
    _check(sizes, rates, cb.changes, cb.noise.values()["noise_scale/examples"])
    # the measuring callback measured the new steps with their sizes
    hist = cb.noise.collector.estimator.history()
    assert hist["b_big"][-1] == 2 * K0 * MICRO and hist["b_small"][-1] == MICRO
    logged = [h["noise_scale/batch_size"] for h in trainer.state.log_history
              if "noise_scale/batch_size" in h]
    assert logged[0] == MICRO * K0 and logged[-1] == 2 * MICRO * K0


def test_lightning_adaptive_batch_grows_and_the_rate_follows():
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
            return {"optimizer": opt,
                    "lr_scheduler": torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)}

    module = Module()
    noise = NoiseScaleCallback(beta=0.95, level=0.5)
    cb = AdaptiveBatchCallback(noise, AdaptiveBatchRule("doubling", min_steps=4))
    loader = torch.utils.data.DataLoader(_data(), batch_size=MICRO)
    trainer = L.Trainer(max_epochs=1, accumulate_grad_batches=K0, accelerator="cpu",
                        devices=1, callbacks=[noise, cb], logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(module, loader)
    sizes, rates = _steps_and_rates(module.net.seen)
    _check(sizes, rates, cb.changes, noise.values()["noise_scale/examples"])
    assert trainer.lr_scheduler_configs[0].scheduler.base_lrs == [pytest.approx(2 * LR)]


def test_adaptive_rule_refuses_bad_settings():
    with pytest.raises(ValueError, match="exchange_rate"):
        AdaptiveBatchRule("app_d")
    with pytest.raises(ValueError, match="policy"):
        AdaptiveBatchRule("triple")
    with pytest.raises(ValueError, match="app_d' only"):
        AdaptiveBatchRule("doubling", exchange_rate=10.0)
    rule = AdaptiveBatchRule("b_noise", max_batch=32)
    assert rule.next_batch(8, 1000.0) == 32  # capped
    assert rule.next_batch(8, -50.0) == 8  # unresolved gradient: no change
    assert rule.next_batch(8, 11.0) == 8 and rule.next_batch(8, 12.0) == 16  # nearest in log


def test_hf_adaptive_batch_with_token_normalised_padded_batches(tmp_path):
    """Padded sequences under num_items_in_batch: the batch (in sequences) doubles, the
    change records the examples and loss tokens seen before it, the steps after it hold
    4 micro-batches weighted n_j/N and apply twice the rate."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from empirical_batch.integrations.hf import install_adaptive
    from tests.test_integrations import TokenRecorder

    rng = np.random.default_rng(0)
    rows = []
    for _ in range(N):
        labels = np.full(6, -100)
        labels[:int(rng.integers(1, 7))] = 0
        rows.append({"x": torch.tensor(rng.normal(size=(6, 3)), dtype=torch.float32),
                     "y": torch.tensor(0.5 + 4.0 * rng.normal(size=6), dtype=torch.float32),
                     "labels": torch.tensor(labels)})
    model = TokenRecorder()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=MICRO,
        gradient_accumulation_steps=K0, num_train_epochs=1, learning_rate=LR, optim="sgd",
        lr_scheduler_type="constant", max_grad_norm=0.0, logging_steps=1, report_to=[],
        save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=rows)
    cb = install_adaptive(trainer, AdaptiveBatchRule("doubling", min_steps=4), beta=0.95,
                          level=0.5)
    trainer.train()
    assert cb.changes and cb.changes[0]["new_batch"] == 2 * MICRO * K0
    for r in model.seen:
        r["theta"] = np.r_[r["w"], r["c"]]
    steps = _group_steps(model.seen)
    sizes = [len(s) for s in steps]
    n_before = sizes.index(2 * K0)
    assert set(sizes[:n_before]) == {K0} and set(sizes[n_before:-1]) == {2 * K0}
    before = [r for s in steps[:n_before] for r in s]
    assert cb.changes[0]["examples"] == sum(r["examples"] for r in before)
    assert cb.changes[0]["tokens"] == sum(r["n"] for r in before)
    rates = []
    for a, b in itertools.pairwise(steps):
        grad = sum(r["n"] / r["N"] * r["g"] for r in a)  # Σ_j (n_j/N) g_j
        rates.append(float(-(b[0]["theta"] - a[0]["theta"]) @ grad / (grad @ grad)))
    np.testing.assert_allclose(rates[:n_before], LR, rtol=1e-4)
    np.testing.assert_allclose(rates[n_before:], 2 * LR, rtol=1e-4)
    hist = cb.noise.collector.estimator.history()
    np.testing.assert_allclose(hist["b_big"], [s[0]["N"] for s in steps])  # per token
    values = cb.noise.values()
    assert values["noise_scale/tokens"] == sum(r["n"] for r in model.seen)
    assert values["noise_scale/examples"] == N


class _Noise:
    """What BatchGrowth reads of a measuring callback: values() under a prefix."""

    prefix = "noise_scale/"
    collector = None

    def values(self):
        return {"noise_scale/b_simple": 20.0, "noise_scale/examples": 64.0}


def test_adaptive_loop_reads_the_optimizer_and_says_an_out_of_regime_rule_once():
    """AdamW read from the run: the square-root rule (√2 a doubling); the rule is
    outside its regime (B > 0.1 B_noise) at both changes and said once, in words."""
    import warnings

    from empirical_batch.integrations.adaptive import BatchGrowth
    from empirical_batch.transfer import RegimeWarning

    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    growth = BatchGrowth(_Noise(), AdaptiveBatchRule("doubling"), lr_rule=None,
                         optimizer=None)
    growth.check_optimizers([opt])
    assert (growth.optimizer, growth.lr_rule) == ("adamw", "sqrt")
    growth.start(4, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step, k in ((3, 4), (6, 8)):
            growth.pending, growth._trigger = k, {"b_simple": 20.0}
            growth.apply(step, [opt], [])
    said = [str(w.message) for w in caught if issubclass(w.category, RegimeWarning)]
    assert len(said) == 1 and "lr_rule='sqrt'" in said[0] and "said once" in said[0]
    assert opt.param_groups[0]["lr"] == pytest.approx(2e-3)  # √2 twice
    assert [c["lr_in_regime"] for c in growth.changes] == [False, False]


def test_adaptive_loop_refuses_an_optimizer_that_is_not_the_runs():
    from empirical_batch.errors import InputError
    from empirical_batch.integrations.adaptive import BatchGrowth

    adamw = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    growth = BatchGrowth(_Noise(), AdaptiveBatchRule("doubling"), lr_rule="linear",
                         optimizer="sgd")
    with pytest.raises(InputError, match=r"optimizer='sgd' but the run trains with AdamW"):
        growth.check_optimizers([adamw])
    other = torch.optim.Adagrad([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    growth = BatchGrowth(_Noise(), AdaptiveBatchRule("doubling"), lr_rule=None,
                         optimizer=None)
    with pytest.raises(InputError, match="Adagrad: pass optimizer="):
        growth.check_optimizers([other])
    growth = BatchGrowth(_Noise(), AdaptiveBatchRule("doubling"), lr_rule=None,
                         optimizer="adam")  # declared: trusted for a type it cannot read
    growth.check_optimizers([other])
    assert (growth.optimizer, growth.lr_rule) == ("adam", "sqrt")


def test_hf_adaptive_refuses_sgd_declared_on_an_adamw_run(tmp_path):
    """The Trainer's AdamW (wrapped by Accelerate) is read before the first step."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from empirical_batch.integrations.hf import install_adaptive

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=MICRO,
        gradient_accumulation_steps=K0, num_train_epochs=1, learning_rate=LR,
        optim="adamw_torch", lr_scheduler_type="constant", report_to=[],
        save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=Recorder(), args=args, train_dataset=_data())
    install_adaptive(trainer, AdaptiveBatchRule("doubling", min_steps=4), optimizer="sgd",
                     beta=0.95, level=0.5)
    with pytest.raises(ValueError, match=r"optimizer='sgd' but the run trains with AdamW"):
        trainer.train()


def test_adaptive_rule_takes_numbers_of_every_kind_and_refuses_text():
    """next_batch's estimates: numpy scalars welcome, NaN (not resolved) changes nothing,
    text or a boolean is refused naming the argument (not read as a number)."""
    rule = AdaptiveBatchRule("doubling")
    assert rule.next_batch(np.int64(8), np.float32(30.0), np.float64(16.0)) == 16
    assert rule.next_batch(8, np.nan) == 8 and rule.next_batch(8, 30.0, np.nan) == 8
    with pytest.raises(ValueError, match="b_noise must be a real number"):
        rule.next_batch(8, "30")
    with pytest.raises(ValueError, match="lower must be a real number"):
        rule.next_batch(8, 30.0, True)
