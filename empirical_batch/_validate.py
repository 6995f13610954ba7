"""Input checks shared by the whole library.

Every public function validates its arguments here, so that bad input raises a
``ValueError``/``TypeError`` naming the argument and what is wrong with it.
Nothing is clipped or guessed.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .errors import InputError

__all__ = [
    "as_array",
    "as_float",
    "check_finite",
    "check_nonnegative",
    "check_positive",
    "check_psd",
    "check_symmetric",
    "check_unit_interval",
    "positive_float",
    "scalar_or_array",
]


def as_array(value, name: str, *, ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Return ``value`` as a finite float array, or raise naming ``name``."""
    try:
        arr = np.asarray(value, dtype=float)
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


def as_float(value, name: str) -> float:
    """Return ``value`` as a finite Python float, or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.ndarray):
        raise InputError(f"{name} must be a real number, got {type(value).__name__}")
    arr = np.asarray(value, dtype=float)
    if arr.ndim != 0:
        raise InputError(f"{name} must be a scalar, got shape {arr.shape}")
    check_finite(arr, name)
    return float(arr)


def positive_float(value, name: str, *, allow_zero: bool = False) -> float:
    """A finite scalar > 0 (>= 0 with ``allow_zero``) as a Python float."""
    x = as_float(value, name)
    if x < 0 or (x == 0 and not allow_zero):
        raise InputError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {x!r}")
    return x


def scalar_or_array(arr: Any) -> Any:
    """A 0-d result as a Python float, anything else as the array (scalars stay scalars)."""
    arr = np.asarray(arr)
    return float(arr) if arr.ndim == 0 else arr


def check_unit_interval(value, name: str) -> float:
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
        raise InputError(f"{name} must be finite, got {arr[tuple(first)]!r}{where}")


def check_positive(arr, name: str) -> np.ndarray:
    """Finite and strictly positive, element-wise."""
    arr = as_array(arr, name)
    if np.any(arr <= 0):
        raise InputError(f"{name} must be > 0, got {_first(arr, arr <= 0)}")
    return arr


def check_nonnegative(arr, name: str) -> np.ndarray:
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


def check_level(level, ci, default: float = 0.95) -> float:
    """The interval level from ``level`` (the name used across the package) or ``ci``
    (the v0.1 name in the fit functions, kept working); in (0, 1)."""
    if level is not None and ci is not None and float(level) != float(ci):
        raise InputError(f"give level= or its old name ci=, not both ({level!r} and {ci!r})")
    value = default if level is None and ci is None else (level if level is not None else ci)
    name = "level" if level is not None or ci is None else "ci"
    v = as_float(value, name)
    if not 0 < v < 1:
        raise InputError(f"{name} must be in (0, 1), got {value!r}")
    return v


def resolve_count(new, old, default: int):
    """A count given by its new name (``n_seeds``) or its v0.1 name (``seeds``)."""
    if new is not None and old is not None and new != old:
        raise InputError(f"give n_seeds= or its old name seeds=, not both ({new!r}, {old!r})")
    return default if new is None and old is None else (new if new is not None else old)

