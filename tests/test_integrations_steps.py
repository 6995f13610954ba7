"""What the framework callbacks read from the batches (`integrations.steps`): sizes,
loss tokens, the token weights n_j/N and the steps they cannot measure."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from empirical_batch.integrations.steps import (  # noqa: E402
    StepAccount,
    batch_examples,
    batch_tokens,
)


def _labels(*lengths, t=5):
    out = torch.full((len(lengths), t), -100)
    for i, n in enumerate(lengths):
        out[i, :n] = 1
    return out


def test_batch_examples_reads_the_leading_dimension():
    x = torch.zeros(3, 7)
    assert batch_examples(x) == 3
    assert batch_examples({"attention_mask": torch.ones(2, 4), "input_ids": x}) == 3
    assert batch_examples([x, torch.zeros(3)]) == 3
    assert batch_examples(({"a": [1, 2]}, x)) == 3
    assert batch_examples({"ids": [1, 2, 3]}) is None and batch_examples("text") is None
    assert batch_examples(torch.tensor(1.0)) is None


def test_batch_tokens_counts_loss_positions():
    labels = _labels(5, 2, 1)
    assert batch_tokens({"labels": labels}) == (8, 5)  # all positions, labels[:, 1:]
    assert batch_tokens({"labels": labels, "shift_labels": _labels(1, 1)}) == (2, 2)
    assert batch_tokens({"labels": torch.zeros(3, 5)}) is None  # float targets
    assert batch_tokens({"labels": torch.zeros(3, dtype=torch.long)}) is None  # one per example
    assert batch_tokens([labels]) is None


def test_token_weights_follow_the_count_that_matches_n():
    acc = StepAccount()
    a, b = {"input_ids": torch.zeros(2, 5), "labels": _labels(5, 3)}, \
        {"input_ids": torch.zeros(1, 5), "labels": _labels(2)}
    acc.record(a, torch.tensor(7))  # shifted counts: 4 + 2 = 6 and 1 → 7
    acc.record(b, torch.tensor(7))
    skip, sizes, weights = acc.plan(lambda n: [1 / n] * n)
    assert skip is None and sizes == [6, 1] and weights == pytest.approx([6 / 7, 1 / 7])
    assert acc.unit == "tokens" and acc.tokens == 7 and acc.examples == 3
    acc.record(a, 10)  # unshifted counts: 8 + 2 = 10
    acc.record(b, 10)
    assert acc.plan(lambda n: None)[1] == [8, 2]


def test_steps_that_cannot_be_measured_are_skipped_with_a_reason():
    acc = StepAccount()
    acc.record({"ids": [1, 2]})  # no tensor: size unknown
    acc.record({"ids": [3]})
    assert acc.plan(lambda n: [1 / n] * n)[0] == "unknown_sizes"
    assert not acc.tokens_known
    acc.record({"input_ids": torch.zeros(2, 5), "labels": _labels(5, 3)}, 99)
    acc.record({"input_ids": torch.zeros(2, 5), "labels": _labels(5, 3)}, 99)
    assert acc.plan(lambda n: None)[0] == "unknown_sizes"  # no count gives N = 99
    acc.record({"input_ids": torch.zeros(2, 5)}, examples=None)
    acc.record({"input_ids": torch.zeros(1, 5)})
    skip, sizes, weights = acc.plan(lambda n: [0.5] * n)  # a mean loss: examples
    assert skip is None and sizes == [2, 1] and weights == [0.5, 0.5]


def test_a_mean_loss_after_token_normalised_steps_is_refused():
    acc = StepAccount()
    for _ in range(2):
        acc.record({"input_ids": torch.zeros(1, 5), "labels": _labels(4)}, 8)
    acc.plan(lambda n: None)
    for _ in range(2):
        acc.record({"input_ids": torch.zeros(1, 5), "labels": _labels(4)})
    with pytest.raises(ValueError, match="switched from token-normalised"):
        acc.plan(lambda n: [0.5, 0.5])


def test_token_normalised_steps_after_mean_loss_steps_are_refused():
    acc = StepAccount()
    for _ in range(2):
        acc.record({"input_ids": torch.zeros(1, 5), "labels": _labels(4)})
    acc.plan(lambda n: [0.5, 0.5])
    for _ in range(2):
        acc.record({"input_ids": torch.zeros(1, 5), "labels": _labels(4)}, 8)
    with pytest.raises(ValueError, match="switched from a mean per micro-batch"):
        acc.plan(lambda n: None)


def test_a_single_backward_step_is_not_measured():
    acc = StepAccount()
    acc.record(torch.zeros(4, 2))
    assert acc.plan(lambda n: [1.0]) == ("single_backward", [], None)
    assert acc.examples == 4 and acc.measured_examples == 0


def test_counters_round_trip():
    acc = StepAccount()
    acc.record({"input_ids": torch.zeros(3, 5), "labels": _labels(5, 3, 1)})
    acc.record({"input_ids": torch.zeros(3, 5), "labels": _labels(5, 3, 1)})
    acc.plan(lambda n: [0.5] * n)
    again = StepAccount()
    again.load_state_dict(acc.state_dict())
    assert again.state_dict() == acc.state_dict()
    assert again.tokens_per_example == pytest.approx(9 / 3)


def test_callback_values_carry_per_layer_and_layernorm_proxy():
    from empirical_batch.integrations.steps import callback_values
    from empirical_batch.measure import PerExampleNoiseScale

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.LayerNorm(6),
                                torch.nn.Linear(6, 1))
    for params, per_module in ((None, True), ("layernorm", False)):
        pe = PerExampleNoiseScale(model, beta=0.5, per_module=per_module, params=params)
        acc = StepAccount()
        for _ in range(3):
            x = torch.randn(8, 4)
            acc.record(x)
            model(x).square().mean().backward()
            acc.plan(lambda n: None, weighted=False)
            pe.step()
            model.zero_grad()
        values = callback_values(pe, acc, "ns/", beta=0.5)
        layers = {k for k in values if k.startswith("ns/layer/")}
        assert layers == ({"ns/layer/0/b_simple", "ns/layer/1/b_simple",
                           "ns/layer/2/b_simple"} if per_module else set())
        assert values["ns/examples"] == 24 and values["ns/ema_examples"] == 16
        pe.remove()
