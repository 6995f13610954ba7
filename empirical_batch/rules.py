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

A move of $\beta_2$ (``half_life``, ``sqrt``) is in its regime only while Adam's
convergence condition $\beta_1 < \sqrt{\beta_2'}$ holds (Zhang, Chen, Shi, Sun &
Luo 2022, Adam Can Converge Without Any Modification On Update Rules, NeurIPS 2022,
arXiv:2208.09632): AdamW's β2 = 0.95 moved 8-fold by its half-life is 0.66, below
$0.9^2$.

Each rule also holds how it moves a value (`Rule.apply`, given the `Move` from B to
B′: the batch sizes, the optimizer, the noise scale, the fitted tradeoff), what it
needs (``needs``: ``b_noise``, ``tradeoff``) and its regime check, which returns
whether the move stays inside the regime the rule was derived for (``None`` where it
cannot be checked) and a note. `empirical_batch.transfer.transfer` looks each
hyperparameter's rule up here (`default_rules` gives the defaults) and applies it;
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
from .result import Result
from .tradeoff import Tradeoff

__all__ = [
    "DEFAULT_BETA1",
    "HPARAMS",
    "NEEDS",
    "REGIME_FRACTION",
    "RULES",
    "Applied",
    "Move",
    "Rule",
    "default_lr_rule",
    "default_rules",
    "lr_rules",
    "ratio_rules",
    "rule",
]

HPARAMS = ("lr", "momentum", "beta1", "beta2", "eps", "weight_decay", "ema_decay",
           "warmup_steps", "total_steps")
_STEPS = ("warmup_steps", "total_steps")
#: ``linear``/``sqrt``/``constant_examples`` hold for ``max(B, B') <= REGIME_FRACTION * B_noise``
REGIME_FRACTION = 0.1

#: β1 of ``torch.optim.Adam``/``AdamW`` by default: the β1 a β2 move is checked against
#: when ``beta1`` is not given
DEFAULT_BETA1 = 0.9

Applied = tuple[float, bool | None, str]
"""What a rule returns for one hyperparameter: the new value, whether the move stays in
the rule's regime (``None``: not checked) and a note."""


@dataclass(frozen=True)
class Move:
    """A move from batch ``from_batch`` (B) to ``to_batch`` (B′ = κB) and what the rules
    may need to know about it.

    ``tradeoff`` is the fitted S(B) (``fitted_range`` the batch sizes it was fitted
    on, where known). ``lr``, ``lr_factor``, ``lr_in_regime`` and ``lr_note`` are the
    old learning rate (``None`` if not given) and the learning-rate rule's outcome;
    ``data_ratio`` is D′/D, the examples of the moved run over the old run's;
    ``beta1`` the moved run's β1 (``None``: not given, PyTorch's default
    `DEFAULT_BETA1` is assumed). The rules of β, ε, weight decay and EMA read them."""

    from_batch: float
    to_batch: float
    optimizer: str
    b_noise: float | None = None
    tradeoff: Tradeoff | None = None
    fitted_range: tuple[float, float] | None = None
    lr: float | None = None
    lr_factor: float = 1.0
    lr_in_regime: bool | None = None
    lr_note: str = ""
    data_ratio: float = 1.0
    beta1: float | None = None

    @property
    def kappa(self) -> float:
        """κ = B′/B."""
        return self.to_batch / self.from_batch


@dataclass(frozen=True)
class Rule(Result):
    """A published rule for moving a hyperparameter from batch B to B′ = κB.

    ``optimizers`` names the optimizers its learning-rate part was derived for (empty:
    any); ``lr_factor(κ)``, where given, is its learning-rate factor as a function of
    κ alone (see `factor`); ``move(move, name, value)`` moves one hyperparameter and
    checks the regime (see `apply`); ``needs`` names what a `Move` must carry for it
    (``"b_noise"``, ``"tradeoff"``)."""

    name: str
    applies_to: tuple[str, ...]
    formula: str
    citation: str
    regime: str
    optimizers: tuple[str, ...] = ()
    lr_factor: Callable[[Any], Any] | None = field(default=None, repr=False, compare=False)
    move: Callable[[Move, str, float], Applied] | None = field(
        default=None, repr=False, compare=False)
    needs: tuple[str, ...] = ()

    def apply(self, name: str, value: float, move: Move) -> Applied:
        """Move hyperparameter ``name`` of value ``value`` from B to B′: ``(new value,
        in_regime, note)``; ``in_regime`` is ``None`` where the regime cannot be checked
        with what ``move`` carries."""
        if name not in self.applies_to:
            raise InputError(f"rule {self.name!r} does not apply to {name}; it applies to "
                             f"{list(self.applies_to)}")
        missing = [n for n in self.needs if getattr(move, n) is None]
        if missing:
            raise InputError(f"rule {self.name!r} for {name} needs {NEEDS[missing[0]]}, "
                             "which was not given")
        if self.move is None:  # pragma: no cover - every registered rule has one
            raise InputError(f"rule {self.name!r} cannot move a value")
        return self.move(move, name, value)

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
        d.pop("move")
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Rule:
        """The registered rule (`RULES`) whose `to_dict` is ``d``: a rule's functions are
        no JSON, so only the rules of the registry are read back."""
        from .errors import DataError
        from .result import RESULT_KEY, json_safe

        name = d.get("name") if isinstance(d, dict) else None
        rule = RULES.get(name) if isinstance(name, str) else None
        if rule is None:
            raise DataError(f"Rule.from_dict: {name!r} is no registered rule (a rule's "
                            f"lr_factor and move are functions, which JSON does not hold; "
                            f"registered: {sorted(RULES)})")
        if json_safe(rule.to_dict()) != json_safe({k: v for k, v in d.items()
                                                   if k != RESULT_KEY}):
            raise DataError(f"Rule.from_dict: the dict differs from the registered rule "
                            f"{name!r}")
        return rule


NEEDS = MappingProxyType({"b_noise": "b_noise (the gradient noise scale)",
                          "tradeoff": "tradeoff (a Tradeoff or TradeoffFit)"})
"""What each of a rule's ``needs`` is."""


def _linear(k: Any) -> Any:
    return k


def _sqrt(k: Any) -> Any:
    return k ** 0.5 if not isinstance(k, float | int) else math.sqrt(k)


def _constant(k: Any) -> Any:
    return k * 0 + 1.0


# ---------------------------------------------------------------- how each rule moves
def _noise_regime(m: Move, what: str) -> tuple[bool | None, str]:
    """(in_regime, note) for rules that need max(B, B') << B_noise."""
    if m.b_noise is None:
        return None, f"b_noise not given: {what} regime (B' << B_noise) not checked"
    top = max(m.from_batch, m.to_batch)
    ok = top <= REGIME_FRACTION * m.b_noise
    note = (f"max(B, B')/B_noise = {top / m.b_noise:.3g} "
            f"({'<=' if ok else '>'} {REGIME_FRACTION:g})")
    return ok, note


def _b_noise(m: Move) -> float:
    if m.b_noise is None:  # pragma: no cover - Rule.apply checks `needs` first
        raise InputError("b_noise was not given")
    return m.b_noise


def _move_linear(m: Move, name: str, x: float) -> Applied:
    ok, note = _noise_regime(m, "linear")
    if ok is False:
        bn = _b_noise(m)
        over = (m.to_batch + bn) / (m.from_batch + bn)
        note += (f"; in the 2018 model the optimal SGD rate changes by {1 / over:.3g}x "
                 "the linear factor")
    if m.optimizer != "sgd":
        ok, note = False, "linear scaling is an SGD rule; Adam follows the sqrt rule"
    return x * _linear(m.kappa), ok, note


def _one_minus_beta(name: str, beta: float, k: float) -> float:
    m = k * (1.0 - beta)
    if m >= 1.0:
        raise InputError(
            f"{name}: the square-root rule gives 1-{name}' = κ(1-{name}) = {m:.4g} >= 1 "
            f"(κ={k:g}), no valid {name}; use rule={{'{name}': 'half_life' or 'unchanged'}}"
        )
    return 1.0 - m


def _move_sqrt(m: Move, name: str, x: float) -> Applied:
    ok, note = _noise_regime(m, "square-root")
    k = m.kappa
    if name == "lr":
        if m.optimizer == "sgd":
            ok, note = False, "the square-root rule is derived for Adam/RMSprop, not SGD"
        return x * _sqrt(k), ok, note
    new = x / math.sqrt(k) if name == "eps" else _one_minus_beta(name, x, k)
    if name == "beta2":
        cond, why = _adam_condition(m, new)
        if not cond:
            ok, note = False, note + "; " + why
    return new, ok, note


def _sum_ratio(b: float, b2: float, n: float) -> float:
    r"""$(B + n)/(B' + n)$ without overflow or underflow on the way: each sum is its
    larger term times a factor in [1, 2], and the larger terms' ratio lies between
    $B/B'$ and 1 (a finite number when $\kappa$ is)."""
    a, c = max(b, n), max(b2, n)
    return (a / c) * (1.0 + min(b, n) / a) / (1.0 + min(b2, n) / c)


def _move_sgd_optimal(m: Move, name: str, x: float) -> Applied:
    bn = _b_noise(m)
    # ε_opt(B')/ε_opt(B) = (1 + Bn/B)/(1 + Bn/B') = κ (B + Bn)/(B' + Bn)   (eq. 2.6)
    f = m.kappa * _sum_ratio(m.from_batch, m.to_batch, bn)
    if m.optimizer != "sgd":
        return x * f, False, "the 2018 closed form is an SGD result; use 'surge' for Adam"
    note = "assumes the old lr was optimal at B and B_noise is unchanged"
    ok = max(m.from_batch, m.to_batch) <= bn
    if not ok:
        note += ("; beyond B_noise the rate nears eps_max = lr·(1 + B_noise/B), "
                 "extrapolated from the old lr: check stability with a short run")
    return x * f, ok, note


def _move_surge(m: Move, name: str, x: float) -> Applied:
    bn = _b_noise(m)
    # ε_opt(B) = 2 ε_max √(B Bn)/(B + Bn), so ε_opt(B')/ε_opt(B) = √κ (B + Bn)/(B' + Bn)
    f = math.sqrt(m.kappa) * _sum_ratio(m.from_batch, m.to_batch, bn)
    if m.optimizer == "sgd":
        return x * f, False, "the surge law is for Adam-like (sign) updates; use 'sgd_optimal'"
    return x * f, True, (f"assumes the old lr was optimal at B; peak at B_noise={bn:g}"
                         + ("; B' is past the peak: the lr falls" if m.to_batch > bn else ""))


def _adam_condition(m: Move, beta2: float) -> tuple[bool, str]:
    r"""Whether β2' keeps Adam's convergence condition $\beta_1 < \sqrt{\beta_2}$
    (Zhang et al. 2022: with β2 large and β1 < √β2 Adam converges; with β2 small it
    can diverge), with β1 the moved run's (`DEFAULT_BETA1` when not given)."""
    b1 = DEFAULT_BETA1 if m.beta1 is None else m.beta1
    given = "" if m.beta1 is not None else " (PyTorch's default; beta1 not given)"
    root = math.sqrt(beta2)
    if b1 < root:
        return True, ""
    return False, (f"beta2' = {beta2:.4g} leaves beta1 = {b1:g}{given} >= sqrt(beta2') = "
                   f"{root:.4g}: Adam's convergence condition beta1 < sqrt(beta2) fails "
                   "(Zhang et al. 2022); keep beta2 (rule 'unchanged') or lower beta1")


def _move_half_life(m: Move, name: str, x: float) -> Applied:
    log_new = m.kappa * math.log(x)  # log β2' = κ log β2: no 0.0 ** κ, no log(0)
    new = math.exp(log_new)
    half = math.log(0.5) / log_new if log_new < 0 else math.inf  # steps
    note = f"half-life {half:.3g} steps = {half * m.to_batch:.4g} examples (unchanged)"
    if not 0.0 < new < 1.0:
        return new, False, note  # refused by the caller, naming beta2
    ok, why = _adam_condition(m, new)
    if new < 0.5:
        ok, why = False, f"half-life {half:.3g} steps: less than one step; " + why
    return new, ok, note + ("; " + why if why else "")


def _move_ema(m: Move, name: str, x: float) -> Applied:
    return x ** m.kappa, m.lr_in_regime, "holds where the lr rule does: " + m.lr_note


def _move_timescale(m: Move, name: str, x: float) -> Applied:
    new = x * m.kappa / m.lr_factor / m.data_ratio
    notes = [f"τ = B/(lr·λ·D) kept; D'/D = {m.data_ratio:.4g}"]
    ok = True
    if m.optimizer == "adam":
        ok = False
        notes.append("coupled L2 decay in Adam is not the AdamW timescale")
    if abs(m.data_ratio - 1.0) > 0.1:
        ok = False
        notes.append("D changes: the optimal τ itself moves with D/N (Bergsma et al.)")
    if m.lr is not None and m.lr * m.lr_factor * new >= 1.0:
        ok = False
        notes.append("lr'·λ' >= 1: not an EMA any more")
    return new, ok, "; ".join(notes)


def _move_tradeoff_steps(m: Move, name: str, x: float) -> Applied:
    curve = m.tradeoff
    if curve is None:  # pragma: no cover - Rule.apply checks `needs` first
        raise InputError("tradeoff was not given")
    f = float(curve.steps(m.to_batch) / curve.steps(m.from_batch))
    note = f"B_crit={curve.b_crit:.4g}; S(B')/S(B)={f:.4g}"
    ok = True
    if m.fitted_range is not None:
        lo, hi = m.fitted_range
        ok = lo <= m.to_batch <= hi
        if not ok:
            note += f"; B' outside the fitted batch sizes [{lo:g}, {hi:g}] (extrapolated)"
    return x * f, ok, note


def _move_constant_examples(m: Move, name: str, x: float) -> Applied:
    ok, note = _noise_regime(m, "constant-examples")
    if ok is False:
        bn = _b_noise(m)
        more = 1.0 / _sum_ratio(m.from_batch, m.to_batch, bn)  # (Bn + B')/(Bn + B)
        note += (f"; with B_crit ≈ B_noise the hyperbola needs {more:.3g}x the "
                 "examples (pass tradeoff)")
    return x * (1.0 / m.kappa), ok, note


def _move_unchanged(m: Move, name: str, x: float) -> Applied:
    # steps are rounded by the caller, whose note says so
    return x * 1.0, None, "kept as is" if name in _STEPS else "kept as is (no rule applied)"


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
                   optimizers=("sgd",), lr_factor=_linear, move=_move_linear),
    "sgd_optimal": Rule(
        "sgd_optimal", ("lr",), "lr' = lr·(1 + B_noise/B)/(1 + B_noise/B')", _MCC,
        "SGD with the old lr optimal at B; B_noise constant over the move; "
        "max(B, B') <= B_noise (beyond, eps_max is extrapolated)", optimizers=("sgd",),
        move=_move_sgd_optimal, needs=("b_noise",)),
    "sqrt": Rule(
        "sqrt", ("lr", "beta1", "beta2", "eps"),
        "lr' = √κ·lr, 1-β' = κ(1-β), eps' = eps/√κ", _MALLADI,
        "Adam/RMSprop, max(B, B') <= 0.1·B_noise (SDE approximation); κ(1-β) < 1; "
        "β1' < √β2' (Adam's convergence condition, Zhang et al. 2022)",
        optimizers=("adam", "adamw"), lr_factor=_sqrt, move=_move_sqrt),
    "surge": Rule(
        "surge", ("lr",), "lr' = lr·ε_opt(B')/ε_opt(B), ε_opt = ε_max/[(√(Bn/B)+√(B/Bn))/2]",
        _LI, "Adam-like optimizers with the old lr optimal at B; needs B_noise (= B_peak)",
        optimizers=("adam", "adamw"), move=_move_surge, needs=("b_noise",)),
    "half_life": Rule("half_life", ("beta2",), "β2' = β2^κ", _MAREK,
                      "β2' >= 1/2 (second-moment half-life of at least one step) and "
                      "β1 < √β2' (Adam's convergence condition, Zhang et al. 2022; "
                      "β1 = 0.9 when not given)",
                      move=_move_half_life),
    "ema": Rule("ema", ("ema_decay",), "ρ' = ρ^κ", _BUSBRIDGE,
                "where the optimizer's own scaling rule holds", move=_move_ema),
    "timescale": Rule(
        "timescale", ("weight_decay",), "τ = B/(lr·λ·D) fixed: λ' = λ·κ·(lr/lr')·(D/D')",
        _BERGSMA, "decoupled decay (AdamW) or SGD; D unchanged (τ_opt moves with D/N); lr'·λ' < 1",
        move=_move_timescale),
    "tradeoff_steps": Rule(
        "tradeoff_steps", _STEPS, "S' = S·S(B')/S(B), S(B) = S_min(1 + B_crit/B)", _MCC,
        "B' inside the batch sizes the tradeoff was fitted on", move=_move_tradeoff_steps,
        needs=("tradeoff",)),
    "constant_examples": Rule(
        "constant_examples", _STEPS, "S' = S/κ (same examples)", _GOYAL,
        "max(B, B') <= 0.1·B_noise (perfect scaling)", move=_move_constant_examples),
    "unchanged": Rule("unchanged", HPARAMS, "kept as is", "-", "-", lr_factor=_constant,
                      move=_move_unchanged),
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


#: the rule of each hyperparameter the learning-rate rule does not also move
_DEFAULTS = MappingProxyType({
    "momentum": "unchanged", "beta1": "unchanged", "beta2": "half_life", "eps": "unchanged",
    "weight_decay": "timescale", "ema_decay": "ema",
})


def default_rules(lr_rule: str, *, tradeoff_known: bool = False) -> dict[str, str]:
    """The rule of every hyperparameter of `HPARAMS` when the learning rate follows
    ``lr_rule``: the hyperparameters that rule also moves follow it (``sqrt``: β1, β2,
    ε); β2 otherwise keeps its half-life, weight decay its timescale, the EMA its
    horizon, momentum, β1 and ε stay; step counts follow the fitted tradeoff when there
    is one (``tradeoff_known``), else constant examples."""
    moved = rule(lr_rule).applies_to if lr_rule != "unchanged" else ()
    steps = "tradeoff_steps" if tradeoff_known else "constant_examples"
    out: dict[str, str] = {}
    for k in HPARAMS:
        if k == "lr" or k in moved:
            out[k] = lr_rule
        else:
            out[k] = steps if k in _STEPS else _DEFAULTS[k]
    return out
