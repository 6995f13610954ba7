r"""Units of batch sizes, noise scales and critical batches.

A batch size counts *something* per optimizer step, and so do the quantities
measured against it: the noise scale $B_{simple} = \operatorname{tr}\Sigma/|G|^2$
is in the units in which the per-example covariance $\Sigma$ was taken, and a
critical batch $B_{crit} = E_{min}/S_{min}$ fitted on a sweep is in the units of
the sweep's batch column. Three units are known:

==============  =================================================================
unit            what one unit of batch is
==============  =================================================================
``examples``    one training example (an image, a game frame; the default)
``sequences``   one sequence of a language model (an example that holds tokens)
``tokens``      one token
==============  =================================================================

``examples`` and ``sequences`` count the same thing for a language model (one
sequence is one example) and convert 1:1; to or from ``tokens`` the number of
tokens per example (per sequence) is needed:
$B_{tokens} = B_{sequences} \times T$. A value in one unit is never compared with
or added to a value in another: `same_unit` raises `UnitMismatch` naming both.

>>> convert(2048.0, "sequences", "tokens", tokens_per_example=512)
1048576.0
>>> same_unit("tokens", "sequences", "the fit and the noise log")
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
empirical_batch.units.UnitMismatch: the fit and the noise log are in different units: ...
"""

from __future__ import annotations

import numbers
from typing import TypeVar

import numpy as np

from .errors import InputError
from .params import POSITIVE, REAL, Kind, validate_params

__all__ = ["UNITS", "UnitMismatch", "check_unit", "convert", "same_unit"]

UNITS = ("examples", "sequences", "tokens")

# what `convert` takes and gives back: a number, or an array of them
_Value = TypeVar("_Value", float, "np.ndarray")

# units that count the same thing (one sequence is one example)
_PER_EXAMPLE = ("examples", "sequences")


class UnitMismatch(InputError):
    """Two values in different units met where one unit is needed."""


def check_unit(unit: object, name: str = "unit") -> str:
    """``unit`` if it is one of `UNITS` (case-insensitive, singular accepted), else an
    `InputError` naming ``name`` and the allowed units."""
    if isinstance(unit, str):
        u = unit.strip().lower()
        u = u if u.endswith("s") else u + "s"
        if u in UNITS:
            return u
    raise InputError(f"{name} must be one of {UNITS}, got {unit!r}")


def _factor(src: str, dst: str, tokens_per_example: float | None) -> float:
    if src == dst or (src in _PER_EXAMPLE and dst in _PER_EXAMPLE):
        return 1.0
    if tokens_per_example is None:
        raise UnitMismatch(f"converting {src} to {dst} needs tokens_per_example (tokens in "
                           "one example or sequence)")
    t = float(tokens_per_example)  # declared by `convert`
    return t if dst == "tokens" else 1.0 / t


def _numbers(v: object) -> bool:
    """A number, or what numpy reads as an array of numbers (its elements are numpy's)."""
    return (isinstance(v, numbers.Real | list | tuple) and not isinstance(v, bool)) or \
        hasattr(v, "__array__")


@validate_params(value=Kind("a number or an array of numbers", _numbers),
                 tokens_per_example=REAL.within(POSITIVE, "a finite number > 0"))
def convert(value: _Value, src: str, dst: str, *,
            tokens_per_example: float | None = None) -> _Value:
    r"""``value`` (a number or a numpy array) in unit ``src`` expressed in ``dst``:
    multiplied by ``tokens_per_example`` $T$ from examples/sequences to tokens,
    divided by it from tokens; examples and sequences convert 1:1. Raises
    `UnitMismatch` when tokens are involved and $T$ is not given."""
    f = _factor(check_unit(src, "source unit"), check_unit(dst, "target unit"),
                tokens_per_example)
    if f == 1.0:
        return value
    with np.errstate(over="ignore"):
        out = value * f
    if np.any(np.isinf(out) & np.isfinite(value)):  # a finite value moved past the range
        raise InputError(f"{value!r:.40} {src} is past the float range in {dst} "
                         f"(x {f:g}); check tokens_per_example")
    return out


def same_unit(a: str, b: str, what: str) -> str:
    """The common unit of ``a`` and ``b`` (examples and sequences are the same), else
    `UnitMismatch` naming ``what`` and both units."""
    a, b = check_unit(a, "unit"), check_unit(b, "unit")
    if a == b or (a in _PER_EXAMPLE and b in _PER_EXAMPLE):
        return a
    raise UnitMismatch(f"{what} are in different units: {a} and {b}; convert one (tokens "
                       "per example are needed)")
