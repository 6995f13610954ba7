"""Objects that cannot go stale: attributes fixed once built, arrays read-only.

A model that derives quantities from its inputs when it is built (the quadratic
model's four scalars, the simulator's preconditioned spectrum) would silently go
stale if an input were edited afterwards. `Frozen` classes refuse the edit instead:
build a new object.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Frozen"]


class Frozen:
    """Mixin: after `_freeze()`, setting or deleting an attribute raises
    ``AttributeError`` and every numpy array attribute is read-only."""

    _frozen: bool = False

    def _freeze(self) -> None:
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(
                f"{type(self).__name__} is immutable: build a new one instead of setting "
                f"{name!r}"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self._frozen:
            raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")
        object.__delattr__(self, name)
