"""Input checks shared by the whole library.

Every public function validates its arguments here, so that bad input raises a
``ValueError``/``TypeError`` naming the argument and what is wrong with it.
Nothing is clipped or guessed.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .errors import InputError

__all__ = [
    "as_array",
    "as_float",
    "as_scalar",
    "check_broadcast",
    "check_count",
    "check_dataset_size",
    "check_finite",
    "check_nonnegative",
    "check_positive",
    "check_psd",
    "check_symmetric",
    "check_unit_interval",
    "positive_float",
    "scalar_or_array",
]


def _real_kind(value: object, name: str) -> None:
    """Refuse what ``np.asarray(value, dtype=float)`` would silently turn into a number:
    booleans (True -> 1.0), complex values (imaginary part dropped), strings ("3")."""
    if value is None or isinstance(value, bool | np.bool_ | complex | np.complexfloating
                                   | str | bytes):
        raise InputError(f"{name} must be numeric (a real number), got {type(value).__name__}: "
                         f"{value!r}")
    if isinstance(value, np.ndarray):
        kind = value.dtype.kind
    elif hasattr(value, "dtype") and getattr(value.dtype, "kind", None) is not None:
        kind = value.dtype.kind  # pandas Series / Index
    else:
        try:
            kind = np.asarray(value).dtype.kind
        except (TypeError, ValueError, OverflowError):
            return  # ragged or exotic: the float conversion reports it
    if kind in "bcUSV":
        what = {"b": "booleans", "c": "complex values", "U": "strings", "S": "bytes",
                "V": "structured values"}[kind]
        raise InputError(f"{name} must be numeric (real numbers), got {what}")
    if kind == "O" or isinstance(value, list | tuple):
        for v in np.asarray(value, dtype=object).reshape(-1):
            if v is None or isinstance(v, bool | np.bool_ | complex | np.complexfloating
                                       | str | bytes):
                raise InputError(f"{name} must be numeric (real numbers), got "
                                 f"{type(v).__name__} {v!r}")


def as_array(value: object, name: str, *,
             ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Return ``value`` as a finite float array, or raise naming ``name``.

    Booleans, complex numbers and strings are refused (not read as 1.0, their real
    part or a parsed number); integers too large for a float are refused as such."""
    _real_kind(value, name)
    try:
        arr = np.asarray(value, dtype=float)
    except OverflowError:
        raise InputError(f"{name} must be a finite real number; an integer in it is too "
                         "large for a float (> 1.8e308)") from None
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numeric, got {type(value).__name__}: {exc}") from None
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if arr.ndim not in allowed:
            raise InputError(
                f"{name} must have {' or '.join(map(str, allowed))} dimension(s), "
                f"got shape {arr.shape}"
            )
    check_finite(arr, name)
    return arr


def as_scalar(value: Any) -> Any:
    """A numpy scalar or 0-d array as the Python number it holds (``np.int64(5)`` -> 5,
    ``np.float32(0.5)`` -> 0.5, ``np.bool_`` -> bool, still refused where a number is
    meant); anything else unchanged. Every check of a scalar parameter starts here, so
    that numpy's numbers are welcome wherever Python's are."""
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    return value


def as_float(value: object, name: str) -> float:
    """Return ``value`` as a finite Python float, or raise naming ``name``."""
    value = as_scalar(value)
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real | np.ndarray):
        raise InputError(f"{name} must be a real number, got {type(value).__name__}")
    arr = as_array(value, name)
    if arr.ndim != 0:
        raise InputError(f"{name} must be a scalar, got shape {arr.shape}")
    check_finite(arr, name)
    return float(arr)


def positive_float(value: object, name: str, *, allow_zero: bool = False,
                   allow_inf: bool = False) -> float:
    """A finite scalar > 0 (>= 0 with ``allow_zero``; +inf too with ``allow_inf``) as a
    Python float."""
    v = as_scalar(value)
    if allow_inf and isinstance(v, float) and v == math.inf:
        return math.inf
    x = as_float(value, name)
    if x < 0 or (x == 0 and not allow_zero):
        raise InputError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {x!r}")
    return x


MAX_COUNT = 2**53
"""Largest count (steps, seeds, batch sizes as integers) accepted: above it integers are
not exact as floats."""


def check_count(value: object, name: str, low: int = 0) -> int:
    """An integer in [``low``, 2^53] as a Python int (integral floats accepted); booleans,
    fractions, NaN, inf, complex and strings are refused naming ``name``; numpy's
    integers (and integral floats) are welcome."""
    value = as_scalar(value)
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be an integer >= {low}, got {type(value).__name__} "
                         f"{value!r}")
    x = float(value) if not isinstance(value, numbers.Integral) else None
    if x is not None and not (math.isfinite(x) and x == math.floor(x)):
        raise InputError(f"{name} must be an integer in [{low}, 2^53], got {value!r}")
    n = int(value) if x is None else int(x)  # type: ignore[call-overload]
    if n < low or n > MAX_COUNT:
        raise InputError(f"{name} must be an integer in [{low}, 2^53], got {value!r}")
    return n


def check_dataset_size(value: Any, low: int = 2) -> int:
    """A finite pool's size: an integer >= ``low`` (an infinite pool is
    ``dataset_size=None``)."""
    v = as_scalar(value)
    if isinstance(v, float) and math.isinf(v):
        raise InputError(f"dataset_size must be a whole number of examples >= {low}, got "
                         "inf; an infinite pool is dataset_size=None")
    return check_count(v, "dataset_size", low)


def check_broadcast(*named: tuple[str, ArrayLike]) -> None:
    """Refuse arrays, given as ``(name, array)`` pairs, whose shapes do not broadcast
    together, naming them and their shapes."""
    try:
        np.broadcast_shapes(*(np.shape(v) for _, v in named))
    except ValueError:
        shapes = ", ".join(f"{n} {np.shape(v)}" for n, v in named)
        raise InputError(f"shapes do not broadcast together: {shapes}") from None


def scalar_or_array(arr: Any) -> Any:
    """A 0-d result as a Python float, anything else as the array (scalars stay scalars)."""
    arr = np.asarray(arr)
    return float(arr) if arr.ndim == 0 else arr


def check_unit_interval(value: object, name: str) -> float:
    """A finite scalar in [0, 1), e.g. an EMA decay or a momentum coefficient."""
    x = as_float(value, name)
    if not 0.0 <= x < 1.0:
        raise InputError(f"{name} must be in [0, 1), got {x!r}")
    return x


def check_finite(arr: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(arr)
    if np.any(bad):
        first = np.argwhere(bad)[0] if arr.ndim else ()
        where = f" at index {tuple(int(i) for i in first)}" if arr.ndim else ""
        raise InputError(f"{name} must be finite, got {float(arr[tuple(first)])!r}{where}")


def check_positive(arr: object, name: str) -> np.ndarray:
    """Finite and strictly positive, element-wise."""
    arr = as_array(arr, name)
    if np.any(arr <= 0):
        raise InputError(f"{name} must be > 0, got {_first(arr, arr <= 0)}")
    return arr


def check_nonnegative(arr: object, name: str) -> np.ndarray:
    """Finite and ≥ 0, element-wise."""
    arr = as_array(arr, name)
    if np.any(arr < 0):
        raise InputError(f"{name} must be >= 0, got {_first(arr, arr < 0)}")
    return arr


def check_symmetric(mat: np.ndarray, name: str, *, rtol: float = 1e-8) -> None:
    if mat.ndim != 2 or mat.shape[0] != mat.shape[1]:
        raise InputError(f"{name} must be a square matrix, got shape {mat.shape}")
    scale = max(float(np.max(np.abs(mat))), 1e-300)
    asym = float(np.max(np.abs(mat - mat.T)))
    if asym > rtol * scale:
        raise InputError(f"{name} must be symmetric; max |{name} - {name}ᵀ| = {asym:.3g}")


def check_psd(mat: np.ndarray, name: str, *, strict: bool = False, rtol: float = 1e-10) -> None:
    """Symmetric and positive semi-definite (definite when ``strict``)."""
    check_symmetric(mat, name)
    eig = np.linalg.eigvalsh(mat)
    scale = max(float(np.max(np.abs(eig))), 1e-300)
    if strict and eig[0] <= rtol * scale:
        raise InputError(
            f"{name} must be positive definite; smallest eigenvalue is {eig[0]:.3g}"
        )
    if eig[0] < -rtol * scale:
        raise InputError(
            f"{name} must be positive semi-definite; smallest eigenvalue is {eig[0]:.3g}"
        )


def _first(arr: np.ndarray, mask: np.ndarray) -> str:
    if arr.ndim == 0:
        return repr(float(arr))
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"{float(arr[idx])!r} at index {idx}"


def check_level(level: float | None, default: float = 0.95) -> float:
    """The interval level ``level`` (``default`` when None); in (0, 1)."""
    value = default if level is None else level
    v = as_float(value, "level")
    if not 0 < v < 1:  # params.DOMAINS["level"] (tests/test_state_and_domain.py: they agree)
        raise InputError(f"level must be in (0, 1), got {value!r}")
    return v

