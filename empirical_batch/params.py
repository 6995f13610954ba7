"""Each public parameter's domain, declared once.

`DOMAINS` maps a parameter name to its `Domain` (a real or integer interval, open or
closed at each end). The core functions check their arguments with `check`, so the
error names the parameter and its domain, and the same table can be listed in the
docs (`domain_table`). A keyword argument removed in 0.4 is refused with its
replacement's name (`removed_keywords`).

A public function declares its parameters' constraints once, with `validate_params`
(as scikit-learn's ``validate_params`` and ``_parameter_constraints``): a parameter's
name in `DOMAINS`, a `Domain`, a ``Literal[...]`` type of its options, which is also
the parameter's annotation, so that a type checker and the runtime check read the same
declaration, or a type (`Kind`: `INTEGER`, an exact integer, not a bool; `REAL`;
`BOOLEAN`; `CALLABLE`; `PATH_LIKE`; `instance_of` a class), alone or within a domain
(``INTEGER.within("n_boot")``); a list of these allows any of them (``[INTEGER, None]``:
None too). The constraints are on the function as ``parameter_constraints``. The fields
of an options dataclass are declared the same way (`check_fields`). Relations between
parameters, the shapes of arrays and what a data file holds are checked in the function
bodies (as scikit-learn does).

>>> float(check("momentum", 0.9))
0.9
>>> str(DOMAINS["level"])
'real in (0, 1)'
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, get_args, get_origin

import numpy as np

from ._validate import as_array, as_scalar
from .errors import InputError, NotFoundError

__all__ = [
    "BOOLEAN", "CALLABLE", "DOMAINS", "FINITE", "INTEGER", "NON_NEGATIVE", "PATH_LIKE",
    "POSITIVE", "REAL", "AnyOf", "Domain",
    "Kind", "Options", "Within", "check", "check_fields", "domain_table", "instance_of",
    "markdown_table", "removed_keywords", "validate_params",
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


FINITE = Domain()
"""Any finite real number (for a type within a domain: ``REAL.within(FINITE)``)."""
POSITIVE = Domain(0.0, math.inf)
"""The finite reals > 0."""
NON_NEGATIVE = Domain(0.0, math.inf, low_open=False)
"""The finite reals >= 0."""

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


def _got(value: Any) -> str:
    """The value received, as the messages name it: its type and its repr."""
    return f"{type(value).__name__} {value!r}"


@dataclass(frozen=True)
class Kind:
    """A type constraint: what the value is (`INTEGER`, `REAL`, `BOOLEAN`, `CALLABLE`,
    `PATH_LIKE`, `instance_of`), as scikit-learn's ``[Integral]``, ``"boolean"``,
    ``callable``. numpy scalars (and 0-d arrays) count as the Python number they hold.
    ``within(domain)`` adds a numeric domain (`Within`)."""

    what: str  # as the message says it: "an integer"
    test: Callable[[Any], bool] = dataclasses.field(compare=False)
    #: the classes of `instance_of` (empty for the other kinds)
    classes: tuple[type, ...] = ()

    def __str__(self) -> str:
        return self.what

    def accepts(self, value: Any) -> bool:
        return bool(self.test(as_scalar(value)))

    def check(self, value: Any, name: str) -> Any:
        """``value``, or `InputError` naming ``name``, the type and what was received."""
        if not self.accepts(value):
            raise InputError(f"{name} must be {self}, got {_got(value)}")
        return value

    def within(self, domain: str | Domain, what: str | None = None) -> Within:
        """This type within ``domain`` (a name of `DOMAINS` or a `Domain`); ``what``
        says it in the message instead ("a positive integer")."""
        if self not in (INTEGER, REAL):
            raise InputError(f"only INTEGER and REAL take a domain, not {self}")
        if isinstance(domain, str):
            if domain not in DOMAINS:
                raise NotFoundError(f"no declared domain for {domain!r}; declared: "
                                    f"{sorted(DOMAINS)}")
            domain = DOMAINS[domain]
        return Within(self, domain, what)


def _is_integer(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


INTEGER = Kind("an integer", _is_integer)
"""An exact integer (Python's or numpy's), not a bool and not a float."""
REAL = Kind("a real number", _is_real)
"""A real number (an integer or a float, Python's or numpy's), not a bool."""
BOOLEAN = Kind("a bool", lambda v: isinstance(v, bool))
"""``True`` or ``False`` (numpy's bool too)."""
CALLABLE = Kind("callable", callable)
"""A function or any callable object."""
PATH_LIKE = Kind("a path (str or os.PathLike)", lambda v: isinstance(v, str | os.PathLike))
"""A file path: a string or an ``os.PathLike`` (``pathlib.Path``)."""


def instance_of(*classes: type, what: str | None = None) -> Kind:
    """A type constraint: an instance of one of ``classes``; ``what`` names them in the
    message (default: "a Sweep or a DataFrame")."""
    if not classes or not all(isinstance(c, type) for c in classes):
        raise InputError(f"instance_of() takes classes, got {classes!r}")
    names = [("an " if c.__name__[0].lower() in "aeiou" else "a ") + c.__name__
             for c in classes]
    text = what or (" or ".join(names) if len(names) < 3
                    else ", ".join(names[:-1]) + " or " + names[-1])
    return Kind(text, lambda v: isinstance(v, classes), classes)


@dataclass(frozen=True)
class Within:
    """A number of a type (`INTEGER` or `REAL`) in a `Domain`: ``INTEGER.within("n_boot")``
    is an exact integer >= 0 (scikit-learn's ``Interval(Integral, 0, None)``). A scalar:
    an array is refused."""

    kind: Kind
    domain: Domain
    #: the type and domain in words, for the message (default: "an integer >= 0")
    what: str | None = None

    def __str__(self) -> str:
        if self.what is not None:
            return self.what
        if self.domain.integer:  # "an integer >= 2" (of INTEGER, or of REAL: 2.0 too)
            return self.domain.requirement()
        req = self.domain.requirement()
        if req == "finite":
            return f"{self.kind} (finite)"
        return f"{self.kind} {req}"

    def accepts(self, value: Any) -> bool:
        v = as_scalar(value)
        if not self.kind.accepts(v):
            return False
        try:
            x = float(v)
        except OverflowError:  # an integer too large for a float
            return False
        return math.isfinite(x) and bool(self.domain.contains(np.asarray(x)))

    def check(self, value: Any, name: str) -> Any:
        """``value``, or `InputError` naming ``name``, the type and domain and what was
        received."""
        if not self.accepts(value):
            v = as_scalar(value)
            got = _got(value) if not self.kind.accepts(v) else repr(v)
            raise InputError(f"{name} must be {self}, got {got}")
        return value


@dataclass(frozen=True)
class AnyOf:
    """Any of several constraints (a list in `validate_params`, as scikit-learn's); None
    among them allows None."""

    constraints: tuple[Constraint, ...]
    none: bool = False

    def __str__(self) -> str:
        parts = [str(c) for c in self.constraints] + (["None"] if self.none else [])
        return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else parts[0]

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.none
        for c in self.constraints:
            try:
                c.check(value, "value")
            except InputError:
                continue
            return True
        return False

    def check(self, value: Any, name: str) -> Any:
        if not self.accepts(value):
            raise InputError(f"{name} must be {self}, got {_got(value)}")
        return value


Constraint = Domain | Options | Kind | Within | AnyOf


def _constraint(spec: Any) -> Constraint:
    if isinstance(spec, Domain | Options | Kind | Within | AnyOf):
        return spec
    if isinstance(spec, str):
        try:
            return DOMAINS[spec]
        except KeyError:
            raise NotFoundError(f"no declared domain for {spec!r}; declared: "
                                f"{sorted(DOMAINS)}") from None
    if isinstance(spec, list):
        if not spec or all(s is None for s in spec):
            raise InputError(f"a list of constraints needs one that is not None, got {spec!r}")
        return AnyOf(tuple(_constraint(s) for s in spec if s is not None),
                     none=any(s is None for s in spec))
    return Options.of(spec)


def validate_params(**constraints: Any) -> Callable[[F], F]:
    """Decorator: check the named arguments of each call against their constraints,
    before the function runs; the error names the parameter, its domain, options or
    type, and the value received.

    Each keyword names a parameter of the function; its value is a name in `DOMAINS`,
    a `Domain`, an `Options` or a ``Literal[...]`` type (its options), a type (`Kind`:
    `INTEGER`, `REAL`, `BOOLEAN`, `CALLABLE`, `PATH_LIKE`, `instance_of`), a type within a
    domain (`Within`: ``INTEGER.within("n_boot")``), or a list of these, any of which
    will do (None in it allows None). ``None`` also passes where it is the parameter's
    default (the function then chooses the value). The constraints are kept on the
    function as ``parameter_constraints``.

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


def check_fields(obj: Any, constraints: Mapping[str, Any], *,
                 error: Callable[[str, str], Exception] | None = None) -> None:
    """Check the fields of ``obj`` (an options dataclass) against their declared
    constraints, as `validate_params` checks a call's arguments (a field whose default
    is None may be None). ``error(field, message)`` makes the exception (default an
    `InputError` of the message, which starts with the field's name).

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Opts:
    ...     hidden: int = 64
    >>> check_fields(Opts(hidden=0), {"hidden": INTEGER.within(Domain(0, integer=True))})
    Traceback (most recent call last):
    ...
    empirical_batch.errors.InputError: hidden must be an integer > 0, got 0
    """
    defaults = {f.name: f.default for f in dataclasses.fields(obj)}
    for name, spec in constraints.items():
        if name not in defaults:
            raise InputError(f"check_fields: {type(obj).__name__} has no field {name!r}")
        value = getattr(obj, name)
        if value is None and defaults[name] is None:
            continue
        try:
            _constraint(spec).check(value, name)
        except InputError as exc:
            if error is None:
                raise
            raise error(name, str(exc)) from None


if __name__ == "__main__":
    print(markdown_table())
