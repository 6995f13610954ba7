"""Torch's CPU thread count, set for one call and restored after it.

``torch.set_num_threads`` changes the whole process. The harness runs its tiny models
with 1 thread on the CPU (they lose more to intra-op threading than they gain) or with
the count asked for; a library call must not leave that setting behind for the program
that called it, so the calls that set it restore it when they return or raise
(`restores_torch_threads`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["restores_torch_threads"]

P = ParamSpec("P")
R = TypeVar("R")


def restores_torch_threads(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn``, with ``torch.get_num_threads()`` as it was before the call restored after it."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        import torch

        before = torch.get_num_threads()
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return wrapper
