r"""The hyperparameter rules, as data: one registry of named rules.

A rule moves a hyperparameter from batch size $B$ to $B' = \kappa B$. Each `Rule`
holds what it applies to, its formula, its citation and the regime it was derived for;
rules whose learning-rate factor depends on $\kappa$ alone also hold that factor
(`Rule.factor`):

- ``linear``: $\epsilon' = \kappa\epsilon$ (SGD; Goyal et al. 2017), valid while
  $B, B' \ll B_{noise}$;
- ``sqrt``: $\epsilon' = \sqrt\kappa\,\epsilon$, $1-\beta' = \kappa(1-\beta)$ (Adam;
  Malladi et al. 2022);
- ``sgd_optimal``: the optimal SGD rate of the paper's eq. 2.6,
  $\epsilon_{opt}(B) = \epsilon_{max}/(1 + B_{noise}/B)$, so
  $\epsilon' = \epsilon\,(1 + B_{noise}/B)/(1 + B_{noise}/B')$ (McCandlish et al. 2018);
- ``surge``: the Adam-like optimum peaking at $B_{noise}$ (Li et al. 2024);
- ``half_life`` ($\beta_2$), ``ema`` (model EMA), ``timescale`` (weight decay),
  ``tradeoff_steps`` and ``constant_examples`` (step counts), ``unchanged``.

`empirical_batch.transfer.transfer` applies them by name and checks their regimes;
batch-size schedules and branched training take the learning-rate rules whose factor
depends on $\kappa$ alone (`ratio_rules`); the command line lists `lr_rules`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import InputError, NotFoundError

__all__ = [
    "HPARAMS",
    "RULES",
    "Rule",
    "default_lr_rule",
    "lr_rules",
    "ratio_rules",
    "rule",
]

HPARAMS = ("lr", "momentum", "beta1", "beta2", "eps", "weight_decay", "ema_decay",
           "warmup_steps", "total_steps")
_STEPS = ("warmup_steps", "total_steps")


@dataclass(frozen=True)
class Rule:
    """A published rule for moving a hyperparameter from batch B to B′ = κB.

    ``optimizers`` names the optimizers its learning-rate part was derived for (empty:
    any); ``lr_factor(κ)``, where given, is its learning-rate factor as a function of
    κ alone (see `factor`)."""

    name: str
    applies_to: tuple[str, ...]
    formula: str
    citation: str
    regime: str
    optimizers: tuple[str, ...] = ()
    lr_factor: Callable[[Any], Any] | None = field(default=None, repr=False, compare=False)

    def factor(self, kappa: Any) -> Any:
        """The learning-rate factor ε′/ε at batch ratio ``kappa`` (a number or an array),
        for the rules whose factor depends on κ alone."""
        if self.lr_factor is None:
            raise InputError(f"rule {self.name!r} has no learning-rate factor of the batch "
                             f"ratio alone; rules that have one: {list(ratio_rules())}")
        return self.lr_factor(kappa)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("lr_factor")
        return d


def _linear(k: Any) -> Any:
    return k


def _sqrt(k: Any) -> Any:
    return k ** 0.5 if not isinstance(k, float | int) else math.sqrt(k)


def _constant(k: Any) -> Any:
    return k * 0 + 1.0


_GOYAL = "Goyal et al. (2017), Accurate, Large Minibatch SGD, arXiv:1706.02677"
_MCC = "McCandlish et al. (2018), An Empirical Model of Large-Batch Training, arXiv:1812.06162"
_MALLADI = ("Malladi, Lyu, Panigrahi & Arora (2022), On the SDEs and Scaling Rules for "
            "Adaptive Gradient Algorithms, arXiv:2205.10287")
_LI = ("Li et al. (2024), Surge Phenomenon in Optimal Learning Rate and Batch Size Scaling, "
       "arXiv:2405.14578")
_MAREK = ("Marek, Lotfi, Somasundaram, Wilson & Goldblum (2025), Small Batch Size Training "
          "for Language Models, arXiv:2507.07101")
_BUSBRIDGE = "Busbridge et al. (2023), How to Scale Your EMA, arXiv:2307.13813"
_BERGSMA = ("Bergsma et al. (2025), Power Lines: Scaling Laws for Weight Decay and Batch "
            "Size in LLM Pre-training, arXiv:2505.13738")

RULES: MappingProxyType[str, Rule] = MappingProxyType({
    "linear": Rule("linear", ("lr",), "lr' = κ·lr", _GOYAL,
                   "SGD, max(B, B') <= 0.1·B_noise (noise-dominated)",
                   optimizers=("sgd",), lr_factor=_linear),
    "sgd_optimal": Rule(
        "sgd_optimal", ("lr",), "lr' = lr·(1 + B_noise/B)/(1 + B_noise/B')", _MCC,
        "SGD with the old lr optimal at B; B_noise constant over the move; "
        "max(B, B') <= B_noise (beyond, eps_max is extrapolated)", optimizers=("sgd",)),
    "sqrt": Rule(
        "sqrt", ("lr", "beta1", "beta2", "eps"),
        "lr' = √κ·lr, 1-β' = κ(1-β), eps' = eps/√κ", _MALLADI,
        "Adam/RMSprop, max(B, B') <= 0.1·B_noise (SDE approximation); κ(1-β) < 1",
        optimizers=("adam", "adamw"), lr_factor=_sqrt),
    "surge": Rule(
        "surge", ("lr",), "lr' = lr·ε_opt(B')/ε_opt(B), ε_opt = ε_max/[(√(Bn/B)+√(B/Bn))/2]",
        _LI, "Adam-like optimizers with the old lr optimal at B; needs B_noise (= B_peak)",
        optimizers=("adam", "adamw")),
    "half_life": Rule("half_life", ("beta2",), "β2' = β2^κ", _MAREK,
                              "β2' >= 1/2 (second-moment half-life of at least one step)"),
    "ema": Rule("ema", ("ema_decay",), "ρ' = ρ^κ", _BUSBRIDGE,
                        "where the optimizer's own scaling rule holds"),
    "timescale": Rule(
        "timescale", ("weight_decay",), "τ = B/(lr·λ·D) fixed: λ' = λ·κ·(lr/lr')·(D/D')",
        _BERGSMA, "decoupled decay (AdamW) or SGD; D unchanged (τ_opt moves with D/N); lr'·λ' < 1"),
    "tradeoff_steps": Rule(
        "tradeoff_steps", _STEPS, "S' = S·S(B')/S(B), S(B) = S_min(1 + B_crit/B)", _MCC,
        "B' inside the batch sizes the tradeoff was fitted on"),
    "constant_examples": Rule(
        "constant_examples", _STEPS, "S' = S/κ (same examples)", _GOYAL,
        "max(B, B') <= 0.1·B_noise (perfect scaling)"),
    "unchanged": Rule("unchanged", HPARAMS, "kept as is", "-", "-", lr_factor=_constant),
})


def rule(name: str) -> Rule:
    """The rule called ``name``; `NotFoundError` lists the known names."""
    if name not in RULES:
        raise NotFoundError(f"no rule {name!r}; known: {sorted(RULES)}")
    return RULES[name]


def lr_rules() -> tuple[str, ...]:
    """The rules that set the learning rate (``unchanged`` left out), in registry order."""
    return tuple(n for n, r in RULES.items() if "lr" in r.applies_to and n != "unchanged")


def ratio_rules() -> tuple[str, ...]:
    """The learning-rate rules whose factor depends on the batch ratio alone."""
    return tuple(n for n in lr_rules() if RULES[n].lr_factor is not None)


def default_lr_rule(optimizer: str, *, b_noise_known: bool = False) -> str:
    """The learning-rate rule for ``optimizer`` (``"sgd"``, or Adam-like): with the noise
    scale known, the optimum's rule (``sgd_optimal``, ``surge``); without, the
    small-batch rule (``linear``, ``sqrt``)."""
    sgd = optimizer == "sgd"
    if b_noise_known:
        return "sgd_optimal" if sgd else "surge"
    return "linear" if sgd else "sqrt"
