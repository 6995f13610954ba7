"""Each public parameter's domain, declared once.

`DOMAINS` maps a parameter name to its `Domain` (a real or integer interval, open or
closed at each end). The core functions check their arguments with `check`, so the
error names the parameter and its domain, and the same table can be listed in the
docs (`domain_table`). A keyword argument removed in 0.4 is refused with its
replacement's name (`removed_keywords`).

A public function declares its parameters' constraints once, with `validate_params`
(as scikit-learn's ``validate_params`` and ``_parameter_constraints``): a parameter's
name in `DOMAINS`, a `Domain`, or a ``Literal[...]`` type of its options, which is also
the parameter's annotation, so that a type checker and the runtime check read the same
declaration. The constraints are on the function as ``parameter_constraints``.

>>> float(check("momentum", 0.9))
0.9
>>> str(DOMAINS["level"])
'real in (0, 1)'
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, get_args, get_origin

import numpy as np

from ._validate import as_array
from .errors import InputError, NotFoundError

__all__ = [
    "DOMAINS", "Domain", "Options", "check", "domain_table", "markdown_table",
    "removed_keywords", "validate_params",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Domain:
    """An interval of the reals (or of the integers, ``integer=True``).

    ``low``/``high`` may be infinite; ``low_open``/``high_open`` say whether the end
    itself is excluded. Values are always finite (NaN and ±inf are refused)."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = True
    high_open: bool = True
    integer: bool = False
    meaning: str = ""

    def __str__(self) -> str:
        kind = "integer" if self.integer else "real"
        if self.low == 0 and self.low_open and math.isinf(self.high):
            return f"positive {kind}"
        if self.low == 0 and math.isinf(self.high):
            return f"non-negative {kind}"
        lo = "(" if self.low_open else "["
        hi = ")" if self.high_open else "]"
        return f"{kind} in {lo}{_num(self.low)}, {_num(self.high)}{hi}"

    def requirement(self) -> str:
        """The condition as the error messages state it: ``> 0``, ``>= 0``, ``in [0, 1)``."""
        kind = "an integer " if self.integer else ""
        if math.isinf(self.high) and not math.isinf(self.low):
            return f"{kind}{'>' if self.low_open else '>='} {_num(self.low)}"
        if math.isinf(self.low) and not math.isinf(self.high):
            return f"{kind}{'<' if self.high_open else '<='} {_num(self.high)}"
        if math.isinf(self.low) and math.isinf(self.high):
            return f"{kind}finite".strip()
        lo = "(" if self.low_open else "["
        hi = ")" if self.high_open else "]"
        return f"{kind}in {lo}{_num(self.low)}, {_num(self.high)}{hi}"

    def contains(self, x: np.ndarray) -> np.ndarray:
        """Element-wise membership (``x`` already finite floats)."""
        ok = (x > self.low) if self.low_open else (x >= self.low)
        ok &= (x < self.high) if self.high_open else (x <= self.high)
        if self.integer:
            ok &= x == np.round(x)
        return ok

    def check(self, value: Any, name: str) -> np.ndarray:
        """``value`` as a float array (0-d for a scalar), or `InputError` naming ``name``."""
        arr = as_array(value, name)
        ok = self.contains(arr)
        if not np.all(ok):
            bad = arr if arr.ndim == 0 else arr[tuple(np.argwhere(~ok)[0])]
            where = "" if arr.ndim == 0 else f" at index {tuple(np.argwhere(~ok)[0].tolist())}"
            raise InputError(f"{name} must be {self.requirement()}, got {float(bad)!r}{where}")
        return arr


def _num(x: float) -> str:
    return "inf" if math.isinf(x) and x > 0 else "-inf" if math.isinf(x) else f"{x:g}"


def _pos(meaning: str) -> Domain:
    return Domain(0.0, math.inf, True, True, meaning=meaning)


def _nonneg(meaning: str) -> Domain:
    return Domain(0.0, math.inf, False, True, meaning=meaning)


DOMAINS: dict[str, Domain] = {
    # batch sizes and sizes of data
    "batch_size": _pos("examples per optimizer step"),
    "batch_sizes": _pos("examples per optimizer step"),
    "b_small": _pos("the smaller of two batch sizes"),
    "b_big": _pos("the larger of two batch sizes"),
    "dataset_size": Domain(2.0, math.inf, False, True, integer=True,
                           meaning="examples batches are drawn from without replacement"),
    # the model's scales (§2)
    "b_noise": _nonneg("noise scale B_noise"),
    "b_simple": _nonneg("simple noise scale: tr(Σ) over the squared gradient norm"),
    "b_crit": _pos("critical batch size E_min/S_min"),
    "s_min": _pos("minimal number of steps"),
    "e_min": _pos("minimal number of examples"),
    "steps": _pos("optimizer steps"),
    "examples": _pos("training examples"),
    "eps": _nonneg("learning rate"),
    "eps_max": _pos("learning rate at infinite batch size"),
    "dl_max": _pos("loss improvement per step at infinite batch size"),
    "noise_std": _pos("per-example gradient standard deviation"),
    "sq_norm_small": _nonneg("squared norm of the small batch's mean gradient"),
    "sq_norm_big": _nonneg("squared norm of the big batch's mean gradient"),
    "sigma": _nonneg("log-normal scatter"),
    # optimizer and averaging coefficients
    "momentum": Domain(0.0, 1.0, False, True, meaning="heavy-ball momentum coefficient"),
    "beta": Domain(0.0, 1.0, False, True, meaning="EMA decay"),
    # statistics
    "level": Domain(0.0, 1.0, True, True, meaning="confidence level of an interval"),
    "n_boot": Domain(0.0, math.inf, False, True, integer=True, meaning="bootstrap draws"),
    # definitions of the critical batch size
    "base_batch": _pos("the batch size linear scaling starts from (B_0)"),
    "overhead": _pos("steps over linear scaling, as a fraction (Zhang et al.'s o)"),
    # planning
    "devices": Domain(1.0, math.inf, False, True, integer=True, meaning="data-parallel devices"),
}
"""Domain of each public parameter, by name."""


def check(name: str, value: Any, *, label: str | None = None) -> np.ndarray:
    """Validate ``value`` against ``DOMAINS[name]``; the error names ``label or name``.

    Returns a float array (0-d for a scalar), like ``numpy.asarray``."""
    try:
        dom = DOMAINS[name]
    except KeyError:
        raise NotFoundError(f"no declared domain for {name!r}; declared: "
                            f"{sorted(DOMAINS)}") from None
    return dom.check(value, label or name)


def domain_table() -> list[tuple[str, str, str]]:
    """(parameter, domain, meaning) for every declared parameter, sorted by name."""
    return [(k, str(d), d.meaning) for k, d in sorted(DOMAINS.items())]


def markdown_table() -> str:
    """`domain_table` as a Markdown table (``python -m empirical_batch.params`` prints it;
    the API reference shows it)."""
    rows = ["| parameter | domain | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{name}` | {dom} | {meaning} |" for name, dom, meaning in domain_table()]
    return "\n".join(rows)


def removed_keywords(**old_to_new: str) -> Callable[[F], F]:
    """Decorator: refuse each keyword argument removed in 0.4 with an `InputError` (also
    a ``TypeError``, as Python's own refusal of an unknown keyword) that names the
    keyword to use instead.

    >>> @removed_keywords(ci="level")
    ... def f(*, level=0.95):
    ...     return level
    >>> f(ci=0.9)
    Traceback (most recent call last):
    ...
    empirical_batch.errors.InputError: f(): the keyword ci= was removed in 0.4; use level=
    """

    def deco(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_to_new.items():
                if old in kwargs:
                    raise InputError(f"{func.__name__}(): the keyword {old}= was removed in "
                                     f"0.4; use {new}=")
            return func(*args, **kwargs)

        return cast(F, wrapper)  # the same signature: the removed keywords are not in it

    return deco


@dataclass(frozen=True)
class Options:
    """A categorical parameter: one of ``choices`` (the arguments of its ``Literal``)."""

    choices: tuple[Any, ...]

    @classmethod
    def of(cls, literal: Any) -> Options:
        """The options of a ``Literal[...]`` type."""
        if get_origin(literal) is not Literal:
            raise InputError(f"Options.of() takes a Literal type, got {literal!r}")
        return cls(get_args(literal))

    def __str__(self) -> str:
        return "one of " + ", ".join(map(repr, self.choices))

    def check(self, value: Any, name: str) -> Any:
        """``value``, or `InputError` naming ``name`` and the options."""
        if not isinstance(value, str | int | bool | None) or value not in self.choices:
            raise InputError(f"{name} must be {self}, got {value!r}")
        return value


Constraint = Domain | Options


def _constraint(spec: str | Domain | Options | Any) -> Constraint:
    if isinstance(spec, Domain | Options):
        return spec
    if isinstance(spec, str):
        try:
            return DOMAINS[spec]
        except KeyError:
            raise NotFoundError(f"no declared domain for {spec!r}; declared: "
                                f"{sorted(DOMAINS)}") from None
    return Options.of(spec)


def validate_params(**constraints: str | Domain | Options | Any) -> Callable[[F], F]:
    """Decorator: check the named arguments of each call against their constraints,
    before the function runs; the error names the parameter and its domain or options.

    Each keyword names a parameter of the function; its value is a name in `DOMAINS`,
    a `Domain`, an `Options` or a ``Literal[...]`` type (its options). ``None`` passes
    where it is the parameter's default (the function then chooses the value). The
    constraints are kept on the function as ``parameter_constraints``.

    >>> from typing import Literal
    >>> @validate_params(level="level", how=Literal["mean", "min"])
    ... def f(x, *, level=0.95, how="mean"):
    ...     return how
    >>> f(1, how="max")
    Traceback (most recent call last):
    ...
    empirical_batch.errors.InputError: how must be one of 'mean', 'min', got 'max'
    >>> f(1, level=1.5)
    Traceback (most recent call last):
    ...
    empirical_batch.errors.InputError: level must be in (0, 1), got 1.5
    """
    checks = {name: _constraint(spec) for name, spec in constraints.items()}

    def deco(func: F) -> F:
        sig = inspect.signature(func)
        unknown = sorted(set(checks) - set(sig.parameters))
        if unknown:
            raise InputError(f"validate_params: {func.__qualname__} has no parameter(s) "
                            f"{unknown}")
        none_ok = {name for name in checks if sig.parameters[name].default is None}

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = sig.bind(*args, **kwargs).arguments
            for name, constraint in checks.items():
                if name in given and not (given[name] is None and name in none_ok):
                    constraint.check(given[name], name)
            return func(*args, **kwargs)

        wrapper.parameter_constraints = checks  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return deco


if __name__ == "__main__":
    print(markdown_table())
