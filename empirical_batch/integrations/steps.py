r"""What the framework callbacks know about each optimizer step: the micro-batches the
framework passed, the run's example and token counters, and the values they log.

**Sizes.** Every training forward records its micro-batch: the examples (the leading
dimension of the inputs), the loss tokens when the batch has integer ``labels``
(positions not equal to -100) and Hugging Face's ``num_items_in_batch`` when the
Trainer passed it. A step is then fed with its real sizes
(`empirical_batch.measure.GradientNoiseScale.step`): a ragged step of 4 and 1
sequences as 4 and 1, not 4 + 4. A step whose sizes cannot be read is skipped and
counted (``skipped["unknown_sizes"]``).

**Token-normalised losses.** When the loss of micro-batch $j$ is the sum over its $n_j$
loss tokens divided by the $N$ the framework passed (``transformers`` >= 4.46 passes
the loss tokens of the accumulated batch as ``num_items_in_batch``), micro-batch $j$'s
token-mean gradient enters the step with weight $c_j = n_j/N$ and the estimate is per
token (the module notes of `empirical_batch.measure.tracker` give the unbiased
estimator). $n_j$ counts what the model's loss sums over: ``labels[..., 1:]`` for a
model whose loss function is ``ForCausalLMLoss``, all labels for another
``transformers`` model, and for any other model the count whose sum is $N$ (shifted
or not); when none applies, the step is skipped and counted. $N$ is taken as passed:
the weights need not add up to one (the Trainer counts unshifted labels for a causal
LM whose configuration does not name its loss type, while the loss sums over the
shifted ones).

**Per-micro-batch token means.** When the loss of micro-batch $j$ is the mean over its
own $n_j$ loss tokens and the framework scales it by a fixed $c_j$ (Lightning divides
every micro-batch loss by ``accumulate_grad_batches`` $K$, so $c_j = 1/K$, also in an
epoch-end step with fewer micro-batches), the step's loss is

$$L = \sum_j \frac{c_j}{n_j}\sum_{t \in j} \ell_t,$$

micro-batch $j$'s token-mean gradient $g_j$ has $E|g_j|^2 = |G|^2 +
\operatorname{tr}\Sigma_{token}/n_j$, and the step is measured per token with sizes
$n_j$ and weights $c_j$: equal weights give $b_{small} = K/\sum_j n_j^{-1}$ (the
harmonic mean of the token counts) and $b_{big} = K\,b_{small}$ for $K$ micro-batches.
$n_j$ counts the positions of ``labels`` not equal to -100 (``token_rule="all"``) or of
``labels[..., 1:]`` (``"shifted"``); ``loss_normalization`` says whether the loss is
such a mean (``"micro_batch_tokens"``), a mean over examples (``"examples"``) or
``"auto"``: per token when every micro-batch of the step has integer ``labels``.

**Units.** With $\bar L$ loss tokens per sequence (the ratio of the counters over the
measured steps), a per-token-mean loss has $\operatorname{tr}\Sigma_{token} = \bar L\,
\operatorname{tr}\Sigma_{sequence}$ for the same $|G|^2$, so

$$B_{simple}^{tokens} = \bar L\, B_{simple}^{sequences},$$

exact when every sequence has $\bar L$ loss tokens. ``{prefix}b_simple``,
``trace_sigma`` and the interval are in sequences (examples); ``b_simple_tokens`` in
tokens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._optional import optional_import

with optional_import("torch", by="empirical_batch.integrations.steps"):
    import torch

from ..errors import InputError
from .loggers import noise_scale_values

__all__ = ["LOSS_NORMALIZATIONS", "CallbackValues", "MicroBatch", "StepAccount",
           "batch_examples", "batch_tokens", "callback_values", "token_rule_of"]

LOSS_NORMALIZATIONS = ("auto", "micro_batch_tokens", "examples")

_FIRST_KEYS = ("input_ids", "inputs_embeds", "pixel_values", "x", "inputs", "input",
               "labels")


def batch_examples(batch) -> int | None:
    """Examples in a batch: the leading dimension of its input tensor (``input_ids``,
    … or the first tensor found in a mapping, list or tuple); ``None`` if there is none."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim >= 1 else None
    if isinstance(batch, Mapping):
        for key in _FIRST_KEYS:
            if isinstance(batch.get(key), torch.Tensor) and batch[key].ndim >= 1:
                return int(batch[key].shape[0])
        items = list(batch.values())
    elif isinstance(batch, Sequence) and not isinstance(batch, str | bytes):
        items = list(batch)
    else:
        return None
    for item in items:
        n = batch_examples(item)
        if n is not None:
            return n
    return None


def _token_counts(batch) -> torch.Tensor | None:
    """The two counts of `batch_tokens` as a tensor on the labels' device (no sync)."""
    if not isinstance(batch, Mapping):
        return None
    shifted = batch.get("shift_labels")
    if isinstance(shifted, torch.Tensor) and not shifted.is_floating_point():
        return shifted.ne(-100).sum().expand(2)
    labels = batch.get("labels")
    if not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.ndim < 2:
        return None
    return torch.stack([labels.ne(-100).sum(), labels[:, 1:].ne(-100).sum()])


def batch_tokens(batch) -> tuple[int, int] | None:
    """Loss tokens of a batch with integer ``labels`` of shape ``(B, T, ...)``: the
    positions not equal to -100, counted over all positions and over ``labels[..., 1:]``
    (a causal LM's shifted targets); ``shift_labels`` when given count as both.
    ``None`` without such labels."""
    counts = _token_counts(batch)
    if counts is None:
        return None
    a, b = counts.tolist()
    return int(a), int(b)


def token_rule_of(model) -> str | None:
    """Which labels a ``transformers`` model's loss sums over: ``"shifted"`` for
    ``ForCausalLMLoss``, ``"all"`` for its other losses, ``None`` for another model."""
    if not hasattr(type(model), "loss_function"):
        return None
    try:
        fn = model.loss_function
    except (AttributeError, KeyError, ValueError):  # no usable loss mapping
        return None
    return "shifted" if getattr(fn, "__name__", "") == "ForCausalLMLoss" else "all"


def _as_count(value) -> int | None:
    if value is None:
        return None
    v = float(value.detach().sum()) if isinstance(value, torch.Tensor) else float(value)
    return int(v) if math.isfinite(v) and v == int(v) and v > 0 else None


@dataclass
class MicroBatch:
    """One training forward: examples, loss tokens (all positions, shifted) and the
    ``num_items_in_batch`` the framework passed (``None`` when it passed none)."""

    examples: int | None
    tokens: Any = None  # (all, shifted): a tensor until the step is planned, then ints
    num_items: Any = None  # a tensor or number until planned, then int or None


def _resolve(micro: list[MicroBatch]) -> None:
    """Turn the counts of a step's micro-batches into numbers (one device transfer)."""
    tensors = [m.tokens for m in micro if isinstance(m.tokens, torch.Tensor)]
    tensors += [m.num_items.detach().sum().reshape(1).to(torch.float64)
                for m in micro if isinstance(m.num_items, torch.Tensor)]
    flat: list[float] = []
    if tensors:
        dev = tensors[0].device
        flat = torch.cat([t.reshape(-1).to(device=dev, dtype=torch.float64)
                          for t in tensors]).tolist()
    i = 0
    for m in micro:
        if isinstance(m.tokens, torch.Tensor):
            m.tokens = (int(flat[i]), int(flat[i + 1]))
            i += 2
    for m in micro:
        if isinstance(m.num_items, torch.Tensor):
            m.num_items = flat[i]
            i += 1
        m.num_items = _as_count(m.num_items)


_UNIT_TEXT = {"tokens": "token-normalised (num_items_in_batch, or a mean over each "
                        "micro-batch's tokens)",
              "examples": "a mean per micro-batch (over its examples)"}


@dataclass
class StepAccount:
    """The micro-batches of the current optimizer step and the run's counters.

    ``examples``/``tokens``: every training example and loss token seen (skipped steps
    included); ``measured_examples``/``measured_tokens``: those of the steps fed to the
    estimator (their ratio converts between sequences and tokens).
    """

    micro: list[MicroBatch] = field(default_factory=list)
    examples: int = 0
    tokens: int = 0
    tokens_known: bool = True
    measured_examples: int = 0
    measured_tokens: int = 0
    measured_tokens_known: bool = True
    steps: int = 0
    unit: str = "examples"  # the estimator's unit: "examples" or "tokens"
    token_rule: str | None = None  # "shifted", "all" or None (match the framework's N)
    # without num_items: is each micro-batch loss a mean over its own tokens?
    loss_normalization: str = "examples"  # one of LOSS_NORMALIZATIONS
    unit_fixed: bool = False  # a step was measured: the unit may not change

    def record(self, batch, num_items=None, *, examples: int | None = None) -> None:
        """One training forward's batch; ``examples`` stands in when its size cannot be
        read from it."""
        found = batch_examples(batch)
        # counts stay on the device until `plan` reads them all in one transfer
        mb = MicroBatch(found if found is not None else examples, _token_counts(batch),
                        num_items)
        self.micro.append(mb)
        if mb.examples is not None:
            self.examples += mb.examples
        if mb.tokens is None:
            self.tokens_known = False

    def _loss_tokens(self, micro: list[MicroBatch]) -> list[int] | None:
        """n_j: the tokens each micro-batch's loss sums over. ``token_rule`` says which
        (``"shifted"``: a causal LM's ``labels[..., 1:]``, ``"all"``); without one, the
        count whose sum is the framework's N (all labels when it passed none)."""
        if any(m.tokens is None for m in micro):
            return None
        total = micro[0].num_items
        rule = self.token_rule or ("all" if total is None else None)
        if rule is not None:
            return [m.tokens[1 if rule == "shifted" else 0] for m in micro]
        for index in (1, 0):  # shifted first: causal LMs
            counts = [m.tokens[index] for m in micro]
            if sum(counts) == total:
                return counts
        return None

    def plan(self, default_weight, *, weighted: bool = True
             ) -> tuple[str | None, list, list | None]:
        """``(skip reason or None, sizes, weights)`` of the step just finished; clears
        the step. ``default_weight(n)`` is the weight of each of ``n`` micro-batches of
        a loss that is a mean over its micro-batch (``None``: the collector's
        convention). ``weighted=False`` (per-example norms): sizes in examples always."""
        micro, self.micro = self.micro, []
        self.steps += 1
        _resolve(micro)
        normalised = bool(micro) and micro[0].num_items is not None  # Σ_j-tokens / N
        token_mean = (weighted and bool(micro) and not normalised and
                      (self.loss_normalization == "micro_batch_tokens" or
                       (self.loss_normalization == "auto" and
                        all(m.tokens is not None for m in micro))))
        tokens = self._loss_tokens(micro) if normalised or token_mean else None
        counts = [m.tokens[0] for m in micro if m.tokens is not None]
        if self.tokens_known and micro and len(counts) == len(micro):
            self.tokens += sum(tokens) if tokens is not None else sum(counts)
        if not micro or any(m.examples is None for m in micro):
            return "unknown_sizes", [], None
        examples = [m.examples for m in micro]
        if weighted and len(micro) == 1:  # one batch size only: nothing to measure
            return "single_backward", [], None
        unit = "tokens" if weighted and (normalised or token_mean) else "examples"
        if self.unit_fixed and unit != self.unit:
            raise InputError(f"the loss switched from {_UNIT_TEXT[self.unit]} to "
                             f"{_UNIT_TEXT[unit]} during the run: one estimate cannot mix "
                             "both (Lightning: state loss_normalization=)")
        if unit == "tokens":
            if tokens is None or any(n == 0 for n in tokens):  # an empty micro-batch
                return "unknown_sizes", [], None
            self.unit, self.unit_fixed = unit, True
            self._measured(examples, tokens)
            if normalised:  # loss: Σ over the tokens of micro-batch j / N
                total = float(micro[0].num_items)
                return None, tokens, [n / total for n in tokens]
            return None, tokens, default_weight(len(micro))  # mean over its tokens × c_j
        self.unit, self.unit_fixed = unit, True
        self._measured(examples, counts if len(counts) == len(micro) else None)
        return None, examples, default_weight(len(micro))

    def _measured(self, examples, tokens) -> None:
        self.measured_examples += sum(examples)
        if tokens is None:
            self.measured_tokens_known = False
        else:
            self.measured_tokens += sum(tokens)

    @property
    def tokens_per_example(self) -> float | None:
        r"""$\bar L$: loss tokens per example over the measured steps (``None`` when
        tokens are unknown)."""
        if not (self.measured_tokens_known and self.measured_examples and
                self.measured_tokens):
            return None
        return self.measured_tokens / self.measured_examples

    def state_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("examples", "tokens", "tokens_known",
                                              "measured_examples", "measured_tokens",
                                              "measured_tokens_known", "steps", "unit",
                                              "token_rule", "unit_fixed")}

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict`; every entry is checked first (nothing changes on an
        error)."""
        counts = ("examples", "tokens", "measured_examples", "measured_tokens", "steps")
        flags = ("tokens_known", "measured_tokens_known", "unit_fixed")
        if not isinstance(state, dict):
            raise InputError(f"counters state must be a dict, got {type(state).__name__}")
        unknown = sorted(set(state) - {*counts, *flags, "unit", "token_rule"})
        if unknown:
            raise InputError(f"counters state has unknown entries {unknown}")
        for k in counts:
            v = state.get(k, 0)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"counters state[{k!r}] must be an integer >= 0, got {v!r}")
        for k in flags:
            if k in state and not isinstance(state[k], bool):
                raise InputError(f"counters state[{k!r}] must be a bool, got {state[k]!r}")
        if state.get("unit", "examples") not in ("examples", "tokens"):
            raise InputError(f"counters state['unit'] must be 'examples' or 'tokens', got "
                             f"{state['unit']!r}")
        if state.get("token_rule") not in (None, "shifted", "all"):
            raise InputError(f"counters state['token_rule'] must be None, 'shifted' or "
                             f"'all', got {state['token_rule']!r}")
        for k, v in state.items():
            setattr(self, k, v)


def check_resumed_beta(estimator_state, beta: float, chosen: bool = True) -> float:
    """The EMA decay a resumed callback continues with: the checkpoint's when the
    callback was built without ``beta`` (``chosen=False``); refused when it was built
    with another one (the estimator would keep the checkpoint's ``beta`` while
    ``ema_examples`` is logged for the new one)."""
    saved = estimator_state.get("beta") if isinstance(estimator_state, Mapping) else None
    if saved is None or saved == beta:
        return beta
    if not chosen:
        return float(saved)
    raise InputError(
        f"the checkpoint's noise-scale estimator averages with beta={saved!r}, this "
        f"NoiseScaleCallback has beta={beta!r}: pass beta={saved!r} (or no beta) to "
        "continue the checkpoint's average, or start the measurement afresh without the "
        "checkpoint's callback state")


def callback_values(collector, account: StepAccount, prefix: str, *, beta: float,
                    level: float = 0.95) -> dict[str, float]:
    r"""The callbacks' log values (empty before the first measured step).

    The four keys of `noise_scale_values` (``b_simple``, ``g2``, ``trace_sigma``,
    ``skipped``) in sequences (examples), and ``b_simple_se``, ``b_simple_low``/
    ``b_simple_high`` (Fieller interval at ``level``), ``b_simple_tokens`` (when tokens
    are known), ``examples``, ``tokens`` (counters), ``ema_examples`` (the EMA time
    constant $\bar b/(1-\beta)$ in examples, $\bar b$ the mean examples per measured
    step, steps with a single backward pass left out) and, with per-layer estimators,
    ``layer/{name}/b_simple``.
    """
    values = noise_scale_values(collector, prefix)
    if not values:
        return {}
    est = collector.estimator.estimate(level)
    (lo, hi), se = est.b_simple_interval, est.b_simple_se
    tpe = account.tokens_per_example
    b_tokens = None
    if account.unit == "tokens":  # the estimator counted tokens: convert to sequences
        assert tpe is not None
        b_tokens = values[f"{prefix}b_simple"]
        values[f"{prefix}b_simple"] = b_tokens / tpe
        values[f"{prefix}trace_sigma"] /= tpe
        lo, hi, se = lo / tpe, hi / tpe, se / tpe
    elif tpe is not None:
        b_tokens = values[f"{prefix}b_simple"] * tpe
    values.update({f"{prefix}b_simple_se": se, f"{prefix}b_simple_low": lo,
                   f"{prefix}b_simple_high": hi, f"{prefix}examples": float(account.examples)})
    if b_tokens is not None:
        values[f"{prefix}b_simple_tokens"] = float(b_tokens)
    if account.tokens_known and account.tokens:
        values[f"{prefix}tokens"] = float(account.tokens)
    if account.steps and account.measured_examples:
        per_step = account.measured_examples / max(collector.estimator.steps, 1)
        values[f"{prefix}ema_examples"] = per_step / (1.0 - beta) if beta < 1 else math.inf
    for name, m in getattr(collector, "module_estimators", {}).items():
        if m.steps:
            values[f"{prefix}layer/{name}/b_simple"] = float(m.b_simple)
    return values


class CallbackValues:
    """`values` and `ema_examples` of the framework callbacks, from their ``collector``,
    ``account``, ``prefix``, ``beta`` and ``level`` (`callback_values`)."""

    collector: Any
    account: StepAccount
    prefix: str
    beta: float
    level: float

    def values(self) -> dict[str, float]:
        """The current estimates under their log keys (empty before the first step)."""
        if self.collector is None:
            return {}
        return callback_values(self.collector, self.account, self.prefix, beta=self.beta,
                               level=self.level)

    @property
    def ema_examples(self) -> float | None:
        r"""The EMA time constant in examples, $\bar b/(1-\beta)$ (``None`` before the
        first measured step)."""
        return self.values().get(f"{self.prefix}ema_examples")
