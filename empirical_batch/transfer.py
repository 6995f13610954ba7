r"""Move a training configuration from batch $B$ to batch $B'$.

`transfer` rescales each hyperparameter with a published rule and says, per
hyperparameter, which rule it used, where the rule comes from and whether the move
stays inside the regime the rule was derived for. The rules, their formulas, regime
checks and citations are the registry of `empirical_batch.rules`; `transfer` looks
each one up there and applies it (`Rule.apply`). With $\kappa = B'/B$:

* ``linear`` (lr, SGD): $\eta' = \kappa\eta$ (Goyal et al. 2017); regime
  $\max(B, B') \le 0.1\,B_{noise}$;
* ``sgd_optimal`` (lr, SGD): $\eta' = \eta\,(1 + B_{noise}/B)/(1 + B_{noise}/B')$
  (McCandlish et al. 2018, eq. 2.6); regime $\max(B, B') \le B_{noise}$ (beyond, the
  rate nears $\epsilon_{max}$, extrapolated from the old rate);
* ``sqrt`` (lr, β1, β2, ε; Adam): $\eta' = \sqrt\kappa\,\eta$,
  $1-\beta' = \kappa(1-\beta)$, $\epsilon' = \epsilon/\sqrt\kappa$ (Malladi et al.
  2022); regime as ``linear``;
* ``surge`` (lr, Adam): $\eta' = \eta\,\epsilon_{opt}(B')/\epsilon_{opt}(B)$ with Li
  et al.'s (2024) surge law (`empirical_batch.theory.surge_eps_opt`);
* ``half_life`` (β2): $\beta_2' = \beta_2^{\kappa}$, half-life fixed in tokens
  (Marek et al. 2025); regime $\beta_2' \ge 1/2$ (half-life of at least one step);
* ``ema`` (ema_decay): $\rho' = \rho^{\kappa}$ (Busbridge et al. 2023); holds where
  the lr rule holds;
* ``timescale`` (weight_decay): $\tau = B/(\eta\lambda D)$ fixed (Bergsma et al.
  2025), $\lambda' = \lambda\,\kappa\,(\eta/\eta')(D/D')$;
* ``tradeoff_steps`` (warmup/total steps): $S' = S\cdot S(B')/S(B)$ with the fitted
  $S(B) = S_{min}(1 + B_{crit}/B)$;
* ``constant_examples`` (warmup/total steps): $S' = S/\kappa$; regime
  $\max(B, B') \le 0.1\,B_{noise}$;
* ``unchanged`` (any): kept as is.

A rule applied outside its regime still returns its value, flags it
(``in_regime=False``), issues a `RegimeWarning` and lists the message in the
result's ``warnings``. ``in_regime`` is ``None`` where the regime cannot be checked
(e.g. ``b_noise`` not given).

References
----------
* Goyal, P., Dollár, P., Girshick, R., Noordhuis, P., Wesolowski, L., Kyrola,
  A., Tulloch, A., Jia, Y., & He, K. (2017). Accurate, Large Minibatch SGD:
  Training ImageNet in 1 Hour. arXiv:1706.02677.
* McCandlish, S., Kaplan, J., Amodei, D., & OpenAI Dota Team (2018). An
  Empirical Model of Large-Batch Training. arXiv:1812.06162.
* Malladi, S., Lyu, K., Panigrahi, A., & Arora, S. (2022). On the SDEs and
  Scaling Rules for Adaptive Gradient Algorithms. NeurIPS 2022, arXiv:2205.10287.
* Li, S., Zhao, P., Zhang, H., Sun, X., Wu, H., Jiao, D., Wang, W., Liu, C.,
  Fang, Z., Xue, J., Tao, Y., Cui, B., & Wang, D. (2024). Surge Phenomenon in
  Optimal Learning Rate and Batch Size Scaling. NeurIPS 2024, arXiv:2405.14578.
* Marek, M., Lotfi, S., Somasundaram, A., Wilson, A. G., & Goldblum, M.
  (2025). Small Batch Size Training for Language Models: When Vanilla SGD Works,
  and Why Gradient Accumulation Is Wasteful. NeurIPS 2025, arXiv:2507.07101.
* Busbridge, D., Ramapuram, J., Ablin, P., Likhomanenko, T., Dhekane, E. G.,
  Suau, X., & Webb, R. (2023). How to Scale Your EMA. NeurIPS 2023,
  arXiv:2307.13813.
* Bergsma, S., Dey, N., Gosal, G., Gray, G., Soboleva, D., & Hestness, J.
  (2025). Power Lines: Scaling Laws for Weight Decay and Batch Size in LLM
  Pre-training. NeurIPS 2025, arXiv:2505.13738.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, get_args

from ._validate import as_float, positive_float
from .errors import EmpiricalBatchWarning, InputError, NotFoundError, warn
from .params import Kind, instance_of, validate_params
from .result import Result
from .rules import (
    HPARAMS,
    NEEDS,
    REGIME_FRACTION,
    RULES,
    Applied,
    Move,
    Rule,
    default_lr_rule,
    default_rules,
    lr_rules,
)
from .tradeoff import Tradeoff

if TYPE_CHECKING:
    import pandas as pd

    from .fit import TradeoffFit

__all__ = [
    "HPARAMS",
    "OPTIMIZERS",
    "REGIME_FRACTION",
    "RegimeWarning",
    "TransferResult",
    "TransferredValue",
    "transfer",
]

Optimizer = Literal["sgd", "adam", "adamw"]
"""The optimizers whose hyperparameters `transfer` moves to another batch size."""
OPTIMIZERS = get_args(Optimizer)
_KEYS = MappingProxyType({
    "sgd": frozenset({"lr", "momentum", "weight_decay", "ema_decay", "warmup_steps",
                      "total_steps"}),
    "adam": frozenset(set(HPARAMS) - {"momentum"}),
    "adamw": frozenset(set(HPARAMS) - {"momentum"}),
})
_STEPS = ("warmup_steps", "total_steps")


class RegimeWarning(EmpiricalBatchWarning):
    """A transfer rule was applied outside the regime it was derived for."""


_LR_RULES = lr_rules()


@dataclass(frozen=True)
class TransferredValue(Result):
    """One hyperparameter moved from batch B to B′.

    ``in_regime`` is ``None`` where the rule's regime cannot be checked with the
    information given (e.g. no ``b_noise``).
    """

    name: str
    old: float
    new: float
    rule: str
    citation: str
    in_regime: bool | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TransferResult(Result):
    """The configuration moved from ``from_batch`` to ``to_batch`` (see `transfer`).

    Attributes
    ----------
    values : tuple of TransferredValue
        One per hyperparameter given, in the order of `HPARAMS`.
    warnings : tuple of str
        Every regime warning issued (also raised as `RegimeWarning`).
    """

    from_batch: float
    to_batch: float
    optimizer: str
    b_noise: float | None
    values: tuple[TransferredValue, ...]
    warnings: tuple[str, ...]

    def __getitem__(self, name: str) -> TransferredValue:
        for v in self.values:
            if v.name == name:
                return v
        raise NotFoundError(f"{name!r} was not transferred; have {[v.name for v in self.values]}")

    @property
    def new(self) -> dict[str, float]:
        """The new hyperparameters, ``{name: value}``, ready for the optimizer."""
        return {v.name: v.new for v in self.values}

    @property
    def kappa(self) -> float:
        return self.to_batch / self.from_batch

    def to_dict(self) -> dict[str, Any]:
        return {"from_batch": self.from_batch, "to_batch": self.to_batch,
                "optimizer": self.optimizer, "b_noise": self.b_noise,
                "values": [v.to_dict() for v in self.values],
                "warnings": list(self.warnings)}

    def to_frame(self) -> pd.DataFrame:
        """One row per hyperparameter: old, new, new/old, rule, in_regime, citation, note."""
        import pandas as pd

        rows = [{**v.to_dict(), "ratio": v.new / v.old if v.old else float("nan")}
                for v in self.values]
        cols = ["name", "old", "new", "ratio", "rule", "in_regime", "citation", "note"]
        return pd.DataFrame(rows, columns=cols)

    def __repr__(self) -> str:
        body = ", ".join(f"{v.name} {v.old:.4g}→{v.new:.4g} [{v.rule}]" for v in self.values)
        w = f"; {len(self.warnings)} warning(s)" if self.warnings else ""
        return (f"TransferResult({self.from_batch:g}→{self.to_batch:g}, {self.optimizer}: "
                f"{body}{w})")


# ---------------------------------------------------------------- validation
def _check_hparams(hparams: Mapping[str, Any], optimizer: str) -> dict[str, float]:
    if not hparams:
        raise InputError(f"hparams is empty; give some of {sorted(_KEYS[optimizer])}")
    unknown = set(hparams) - set(HPARAMS)
    if unknown:
        raise InputError(f"hparams has unknown key(s) {sorted(unknown)}; known: {list(HPARAMS)}")
    wrong = set(hparams) - _KEYS[optimizer]
    if wrong:
        raise InputError(f"hparams key(s) {sorted(wrong)} do not apply to optimizer="
                         f"{optimizer!r}; it takes {sorted(_KEYS[optimizer])}")
    out = {}
    for k in HPARAMS:
        if k not in hparams:
            continue
        x = as_float(hparams[k], k)
        if k in ("beta1", "beta2", "ema_decay", "momentum"):
            lo_ok = x >= 0 if k == "momentum" else x > 0
            if not (lo_ok and x < 1):
                interval = "[0, 1)" if k == "momentum" else "(0, 1)"
                raise InputError(f"{k} must be in {interval}, got {x!r}")
        elif k == "weight_decay":
            x = positive_float(x, k, allow_zero=True)
        elif k in _STEPS:
            x = positive_float(x, k, allow_zero=k == "warmup_steps")
            if x != int(x):
                raise InputError(f"{k} must be a whole number of steps, got {x!r}")
        else:
            x = positive_float(x, k)
        out[k] = x
    return out


def _apply(r: Rule, name: str, value: float, move: Move) -> Applied:
    """``r.apply``; an arithmetic failure of the rule's formula (a logarithm of 0, a
    division by 0, an overflow) is refused naming the hyperparameter, the rule and the
    move."""
    try:
        return r.apply(name, value, move)
    except InputError:
        raise
    except (ArithmeticError, ValueError) as exc:
        raise InputError(f"{name}: rule {r.name!r} cannot move {value:g} from batch "
                         f"{move.from_batch:g} to batch {move.to_batch:g} in floating point "
                         f"({exc}); choose batch sizes closer together or another rule"
                         ) from None


def _whole_steps(exact: float) -> float:
    """``exact`` steps rounded up to a whole number (not up from float noise: 3.0000000001
    is 3), at least 1 for a positive count."""
    new = float(math.ceil(exact - 1e-9 * max(1.0, exact)))
    return new if new > 0 or exact <= 0 else 1.0


def _check_moved(name: str, old: float, new: float, rule: str, b: float, b2: float,
                 optimizer: str, *, rounded: bool = False) -> None:
    """A moved value outside its hyperparameter's domain (an overflow to inf, an
    underflow to 0, NaN) is refused, naming the hyperparameter, the rule and the move
    (``rounded``: a step count, checked before it is rounded to whole steps)."""
    if rounded and math.isfinite(new) and new > 0:
        new = _whole_steps(new)
    try:
        _check_hparams({name: new}, optimizer)
    except InputError as exc:
        raise InputError(f"{name}: rule {rule!r} moves {old:g} at batch {b:g} to {new!r} at "
                         f"batch {b2:g}, which is no valid {name} ({exc}); choose batch "
                         "sizes closer together or another rule") from None


def _check_rules(rule: object, optimizer: str, hp: Mapping[str, float], b_noise: float | None,
                 tradeoff: Tradeoff | None) -> dict[str, Rule]:
    if rule is None or isinstance(rule, str):
        lr_rule = rule
        overrides: dict[str, str] = {}
    else:  # a mapping (declared by `transfer`)
        overrides = dict(rule)  # type: ignore[call-overload]
        bad = set(overrides) - set(HPARAMS)
        if bad:
            raise InputError(f"rule has unknown hyperparameter key(s) {sorted(bad)}; "
                             f"known: {list(HPARAMS)}")
        lr_rule = overrides.get("lr")
    if lr_rule is None:
        lr_rule = default_lr_rule(optimizer, b_noise_known=b_noise is not None)
    if lr_rule not in (*_LR_RULES, "unchanged"):
        raise InputError(f"rule must be one of {list(_LR_RULES)} for the learning rate, "
                         f"got {lr_rule!r}")
    chosen = default_rules(lr_rule, tradeoff_known=tradeoff is not None)
    for k, r in overrides.items():
        if k != "lr" and k not in hp:
            raise InputError(f"rule[{k!r}] is given but hparams has no {k!r}")
        if r not in RULES:
            raise InputError(f"rule[{k!r}] must be one of {sorted(RULES)}, got {r!r}")
        if k not in RULES[r].applies_to:
            raise InputError(f"rule[{k!r}]={r!r} does not apply to {k}; it applies to "
                             f"{list(RULES[r].applies_to)}")
        chosen[k] = r
    given = {"b_noise": b_noise, "tradeoff": tradeoff}
    for k in HPARAMS:
        for need in RULES[chosen[k]].needs:
            if (k in hp or k == "lr") and given[need] is None:
                raise InputError(f"rule {chosen[k]!r} for {k} needs {NEEDS[need]}, "
                                 "which was not given")
    return {k: RULES[chosen[k]] for k in HPARAMS if k in hp or k == "lr"}


def _is_tradeoff_fit(value: object) -> bool:
    """Whether ``value`` is a `TradeoffFit` (the fits are imported only when a tradeoff is
    given: the command line's start-up does without them)."""
    from .fit import TradeoffFit

    return isinstance(value, TradeoffFit)


def _check_tradeoff(tradeoff: object) -> tuple[Tradeoff | None, tuple[float, float] | None]:
    if tradeoff is None:
        return None, None
    from .fit import TradeoffFit

    if isinstance(tradeoff, TradeoffFit):
        if tradeoff.status not in ("identified", "unknown"):
            raise InputError(f"tradeoff: the fit gives {tradeoff.b_crit_text()} (status "
                             f"{tradeoff.status}), not S_min and E_min to scale steps "
                             "along; pass an identified fit or a Tradeoff")
        return tradeoff.tradeoff, (min(tradeoff.batch_sizes), max(tradeoff.batch_sizes))
    assert isinstance(tradeoff, Tradeoff)  # declared by `transfer`
    return tradeoff, None


@validate_params(hparams=instance_of(Mapping, what="a mapping (dict)"), optimizer=Optimizer,
                 rule=instance_of(str, Mapping, what="None, a rule name or a mapping "
                                                    "hyperparameter -> rule name"),
                 tradeoff=Kind("a Tradeoff or a TradeoffFit", lambda v: isinstance(v, Tradeoff)
                               or _is_tradeoff_fit(v)))
def transfer(
    hparams: Mapping[str, float],
    from_batch: float,
    to_batch: float,
    *,
    optimizer: Optimizer,
    rule: str | Mapping[str, str] | None = None,
    b_noise: float | None = None,
    tradeoff: Tradeoff | TradeoffFit | None = None,
) -> TransferResult:
    r"""Move optimizer hyperparameters from batch ``from_batch`` to ``to_batch``.

    With $\kappa = B'/B$ each hyperparameter is rescaled by its rule (module
    docstring for the table): the learning rate by ``rule`` (``"linear"``,
    ``"sgd_optimal"``, ``"sqrt"`` or ``"surge"``); β1, β2, ε by the square-root
    rule when ``rule="sqrt"``, otherwise β2 at a fixed token half-life
    $\beta_2' = \beta_2^\kappa$ and β1, ε unchanged; ``ema_decay``
    $\rho' = \rho^\kappa$; ``weight_decay`` at a fixed AdamW timescale
    $\tau = B/(\eta\lambda D)$; steps from the tradeoff $S(B')/S(B)$ when
    ``tradeoff`` is given, else at constant examples $S/\kappa$ (rounded up to whole
    steps).

    Parameters
    ----------
    hparams : mapping
        Some of `HPARAMS`: ``lr``, ``momentum`` (SGD), ``beta1``, ``beta2``, ``eps``
        (Adam), ``weight_decay``, ``ema_decay``, ``warmup_steps``, ``total_steps``.
    from_batch, to_batch : float
        The old and new global batch sizes (same unit as ``b_noise``).
    optimizer : {"sgd", "adam", "adamw"}
        ``"adam"`` means coupled L2 decay, ``"adamw"`` decoupled decay.
    rule : str or mapping, optional
        The learning-rate rule, or ``{hyperparameter: rule name}`` to choose per
        hyperparameter from `empirical_batch.rules.RULES`. Default: ``"sgd_optimal"`` (SGD) or
        ``"surge"`` (Adam) with ``b_noise``, else ``"linear"`` (SGD) or ``"sqrt"``.
    b_noise : float, optional
        The gradient noise scale $B_{noise}$ at the point of training moved; needed by
        ``sgd_optimal`` and ``surge`` and to check the regimes.
    tradeoff : Tradeoff or TradeoffFit, optional
        Fitted steps/examples tradeoff; steps then follow $S(B')/S(B)$.

    Returns
    -------
    TransferResult
        Per hyperparameter old, new, rule, citation, ``in_regime`` and a note.

    Warns
    -----
    RegimeWarning
        For each hyperparameter moved outside its rule's regime.

    Examples
    --------
    >>> r = transfer({"lr": 0.1, "momentum": 0.9}, 256, 1024, optimizer="sgd", rule="linear")
    >>> r.new
    {'lr': 0.4, 'momentum': 0.9}

    References
    ----------
    * Goyal, P., et al. (2017). Accurate, Large Minibatch SGD: Training ImageNet
      in 1 Hour. arXiv:1706.02677.
    * McCandlish, S., Kaplan, J., Amodei, D., & OpenAI Dota Team (2018). An
      Empirical Model of Large-Batch Training. arXiv:1812.06162.
    * Malladi, S., Lyu, K., Panigrahi, A., & Arora, S. (2022). On the SDEs and
      Scaling Rules for Adaptive Gradient Algorithms. NeurIPS 2022, arXiv:2205.10287.
    * Li, S., et al. (2024). Surge Phenomenon in Optimal Learning Rate and Batch
      Size Scaling. NeurIPS 2024, arXiv:2405.14578.
    * Marek, M., Lotfi, S., Somasundaram, A., Wilson, A. G., & Goldblum, M.
      (2025). Small Batch Size Training for Language Models. arXiv:2507.07101.
    * Busbridge, D., et al. (2023). How to Scale Your EMA. NeurIPS 2023,
      arXiv:2307.13813.
    * Bergsma, S., et al. (2025). Power Lines: Scaling Laws for Weight Decay and
      Batch Size in LLM Pre-training. arXiv:2505.13738.
    """
    b = positive_float(from_batch, "from_batch")
    b2 = positive_float(to_batch, "to_batch")
    bn = None if b_noise is None else positive_float(b_noise, "b_noise")
    hp = _check_hparams(hparams, optimizer)
    if not (math.isfinite(b2 / b) and b2 / b > 0):
        raise InputError(f"to_batch/from_batch = {b2:g}/{b:g} is not a finite ratio > 0; "
                         "give batch sizes whose ratio a float holds")
    curve, fitted_range = _check_tradeoff(tradeoff)
    rules = _check_rules(rule, optimizer, hp, bn, curve)
    # steps first: the weight-decay timescale needs D'/D; the learning rate next: the
    # rules of weight decay and the EMA read its outcome (the lr rule's move of a unit
    # rate is its factor)
    move = Move(b, b2, optimizer, bn, curve, fitted_range, lr=hp.get("lr"))
    out: dict[str, Applied] = {}
    for name in _STEPS:
        if name in hp:
            exact, ok, note = _apply(rules[name], name, hp[name], move)
            _check_moved(name, hp[name], exact, rules[name].name, b, b2, optimizer,
                         rounded=True)
            out[name] = (_whole_steps(exact), ok, note + "; rounded up to whole steps")
    if "total_steps" in hp:
        move = replace(move, data_ratio=out["total_steps"][0] * b2 / (hp["total_steps"] * b))
    lr_f, lr_ok, lr_note = _apply(rules["lr"], "lr", 1.0, move)
    move = replace(move, lr_factor=lr_f, lr_in_regime=lr_ok, lr_note=lr_note)
    for name in HPARAMS:
        if name in hp and name not in _STEPS:
            out[name] = ((hp[name] * lr_f, lr_ok, lr_note) if name == "lr"
                         else _apply(rules[name], name, hp[name], move))
            if name == "beta1":  # β2's rules check Adam's condition against the new β1
                move = replace(move, beta1=out[name][0])

    values, messages = [], []
    for name in HPARAMS:
        if name not in hp:
            continue
        new, ok, note = out[name]
        r = rules[name]
        _check_moved(name, hp[name], new, r.name, b, b2, optimizer)
        values.append(TransferredValue(name, hp[name], float(new), r.name, r.citation, ok,
                                       note))
        if ok is False:
            messages.append(f"{name}: rule {r.name!r} outside its regime ({r.regime}): {note}")
    for m in messages:
        warn(m, RegimeWarning)
    return TransferResult(b, b2, optimizer, bn, tuple(values), tuple(messages))

