"""A real causal LM (a one-layer GPT-2) in the Hugging Face Trainer with padded batches:
the Trainer passes ``num_items_in_batch`` (the shifted loss tokens of the accumulated
batch) and GPT-2's loss is the token sum over it, so micro-batch j carries weight n_j/N.
Every measured step is recomputed from the recorded batches and parameters (a copy of
the model, one backward per micro-batch of its token-mean loss): the squared norms, the
sizes Σn_j²/N and N, and no step skipped."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from tests.test_integrations import _group_steps, _weighted_expected  # noqa: E402

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                         "ignore::FutureWarning", "ignore::UserWarning")]

T, N_SEQ = 10, 29


def _data():
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(N_SEQ):
        n = int(rng.integers(2, T + 1))
        ids = np.zeros(T, dtype=np.int64)
        ids[:n] = rng.integers(1, 32, n)
        labels = np.where(np.arange(T) < n, ids, -100)
        rows.append({"input_ids": torch.tensor(ids), "labels": torch.tensor(labels),
                     "attention_mask": torch.tensor((np.arange(T) < n).astype(np.int64))})
    return rows


def test_gpt2_padded_token_weighted_steps_are_exact(tmp_path):
    from empirical_batch.integrations.hf import install

    cfg = transformers.GPT2Config(vocab_size=32, n_positions=T, n_embd=16, n_layer=1,
                                  n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
                                  attn_pdrop=0.0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    seen = []

    def record(module, args, kwargs):
        if torch.is_grad_enabled() and module.training:
            seen.append({"batch": {k: kwargs[k].clone() for k in
                                   ("input_ids", "labels", "attention_mask")},
                         "N": float(kwargs["num_items_in_batch"]),
                         "state": copy.deepcopy(module.state_dict())})

    model.register_forward_pre_hook(record, with_kwargs=True)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4,
        gradient_accumulation_steps=2, num_train_epochs=1, learning_rate=0.05,
        optim="sgd", lr_scheduler_type="constant", logging_steps=1, report_to=[],
        save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_data())
    cb = install(trainer, beta=0.9)
    trainer.train()

    ref = transformers.GPT2LMHeadModel(cfg)
    recs = []
    for r in seen:
        ref.load_state_dict(r["state"])
        ref.zero_grad()
        labels = r["batch"]["labels"]
        n = int(labels[:, 1:].ne(-100).sum())
        loss = ref(**r["batch"], num_items_in_batch=n).loss  # its token mean
        loss.backward()
        g = np.concatenate([p.grad.detach().double().numpy().ravel()
                            for p in ref.parameters() if p.grad is not None])
        w = r["state"]["transformer.h.0.mlp.c_fc.weight"].numpy().ravel()
        recs.append({"w": w, "c": 0.0, "g": g, "n": n, "cw": n / r["N"], "N": r["N"],
                     "n_all": int(labels.ne(-100).sum())})
    steps = _group_steps(recs)
    assert [len(s) for s in steps] == [2, 2, 2, 2]  # 8 micro-batches: 4 + 4 ... 4 + 1
    for s in steps:
        # the Trainer counted all labels (the configuration names no loss type), the
        # loss sums over the shifted ones: the weights n_j/N add up to less than one
        assert sum(r["n_all"] for r in s) == s[0]["N"] > sum(r["n"] for r in s)
    small, big, b_small = _weighted_expected(steps)
    hist = cb.collector.estimator.history()
    assert cb.collector.skipped_steps == 0
    np.testing.assert_allclose(hist["sq_norm_small"], small, rtol=1e-4)
    np.testing.assert_allclose(hist["sq_norm_big"], big, rtol=1e-4)
    np.testing.assert_allclose(hist["b_small"], b_small)
    c = [np.array([r["cw"] for r in s]) for s in steps]
    n = [np.array([r["n"] for r in s], float) for s in steps]
    np.testing.assert_allclose(hist["b_big"], [cj.sum() ** 2 / np.sum(cj**2 / nj)
                                               for cj, nj in zip(c, n, strict=True)])
    values = cb.values()
    tokens = sum(r["n"] for r in recs)
    assert values["noise_scale/tokens"] == tokens and values["noise_scale/examples"] == N_SEQ
    assert values["noise_scale/b_simple"] == pytest.approx(
        values["noise_scale/b_simple_tokens"] * N_SEQ / tokens)
    assert any("noise_scale/b_simple_tokens" in h for h in trainer.state.log_history)
