"""The ``--device`` option, checked before any work starts."""

from __future__ import annotations

from .._optional import torch_device
from ..errors import InputError

__all__ = ["check_device"]


def check_device(device: str) -> None:
    """Refuse an unknown name, and ``cuda`` without a CUDA device, in one clear line:
    the library's one device check (`empirical_batch._optional.torch_device`) under the
    option's name."""
    if device not in ("auto", "cpu") and not device.startswith("cuda"):
        raise InputError(f"--device must be auto, cpu or cuda[:i], got {device!r}")
    if device.startswith("cuda"):
        torch_device(device, "--device")
