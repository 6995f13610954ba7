"""The harness's device: which one a run uses, its CPU threads, its name, and waiting
for its queued work.

`use_device` is the one place a run's ``device`` (and ``threads``) is checked and
applied: the pipeline (one process), each distributed shard (in its worker) and the
analysis stage call it, so none of them imports another and no two checks can differ.
The check itself, whether a device exists on this build and machine, is the library's
one, `empirical_batch._optional.torch_device`.
"""

from __future__ import annotations

import torch

from .._optional import torch_device
from ..errors import InputError

__all__ = ["device_name", "resolve_device", "sync_device", "use_device"]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda`` without CUDA is an error.

    Accepts the strings ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or a ``torch.device``
    of type cpu or cuda; whether it is there is `empirical_batch._optional.torch_device`'s
    check.
    """
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise InputError(f"device must be a string or torch.device, got {type(device).__name__}")
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise InputError(f"--device must be auto, cpu or cuda[:N], got {device!r}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev: torch.device = torch_device(device)
    return dev


def use_device(device: str | torch.device = "auto", threads: int | None = None) -> torch.device:
    """`resolve_device`, and torch's CPU threads for the work on it: ``threads`` (an
    integer >= 1) when given, else 1 on the CPU (the harness's tiny models lose more to
    intra-op threading than they gain) and unchanged on CUDA. Call it inside
    `empirical_batch.harness.threads.restores_torch_threads`, which gives the caller its
    setting back."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise InputError(f"--threads must be an integer >= 1, got {threads!r}")
    dev = resolve_device(device)
    if threads is not None:
        torch.set_num_threads(threads)
    elif dev.type == "cpu":
        torch.set_num_threads(1)
    return dev


def device_name(dev: str | torch.device, *, otherwise: str = "cpu") -> str:
    """The CUDA device's name, or ``otherwise`` for any other device."""
    dev = torch.device(dev)
    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else otherwise


def sync_device(dev: torch.device) -> None:
    """Wait for the device's queued work (CUDA), so that a wall time is the work's."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
