"""The ``--device`` option, checked before any work starts."""

from __future__ import annotations

from .._optional import optional_import
from ..errors import InputError, UsageError

__all__ = ["check_device"]


def check_device(device: str) -> None:
    """Refuse ``cuda`` without a CUDA device (and unknown names) in one clear line."""
    if device not in ("auto", "cpu") and not device.startswith("cuda"):
        raise InputError(f"--device must be auto, cpu or cuda[:i], got {device!r}")
    if device.startswith("cuda"):
        with optional_import("torch", by=f"--device {device}"):
            import torch
        if not torch.cuda.is_available():
            raise UsageError(f"--device {device}: no CUDA device is available here (use "
                               "--device cpu)")
