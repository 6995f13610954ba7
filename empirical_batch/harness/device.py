"""The harness's device: which one a run uses, and waiting for its queued work.

Shared by the pipeline (one process) and the distributed shards (each worker), so
neither imports the other.
"""

from __future__ import annotations

import torch

from ..errors import InputError

__all__ = ["resolve_device", "sync_device"]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda`` without CUDA is an error.

    Accepts the strings ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or a ``torch.device``
    of type cpu or cuda.
    """
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise InputError(f"device must be a string or torch.device, got {type(device).__name__}")
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise InputError(f"--device must be auto, cpu or cuda[:N], got {device!r}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but torch.cuda.is_available() is False")
    return torch.device(device)


def sync_device(dev: torch.device) -> None:
    """Wait for the device's queued work (CUDA), so that a wall time is the work's."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
