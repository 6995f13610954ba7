"""What part of a model the per-example collector measures (`Coverage`), and the
warning when it measures less than asked for."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..errors import EmpiricalBatchWarning, InputError
from ._common import select_params
from .per_example import layer_kind

__all__ = ["Coverage", "CoverageWarning", "select_measured"]


class CoverageWarning(EmpiricalBatchWarning):
    """The per-example collector measures less of the model than asked for."""


@dataclass(frozen=True)
class Coverage:
    """What part of the model a `PerExampleNoiseScale` measures.

    ``parameters`` is the fraction of the model's trainable parameter elements whose
    per-example gradients are measured; ``uncovered`` names the trainable parameters
    that are not (outside the fast-path layers, or left out by ``params=``); ``tied``
    the shared parameters measured with their cross term.
    """

    parameters: float
    n_parameters: int
    covered: tuple[str, ...]
    uncovered: tuple[str, ...]
    tied: tuple[str, ...]

    def __str__(self) -> str:
        text = f"{100 * self.parameters:.1f}% of {self.n_parameters:,} parameters"
        if self.uncovered:
            more = f" (+{len(self.uncovered) - 3} more)" if len(self.uncovered) > 3 else ""
            text += f"; not measured: {', '.join(self.uncovered[:3])}{more}"
        return text


def select_measured(model: nn.Module, params: object) -> list:
    """The parameters a `PerExampleNoiseScale` is asked to measure: ``params``
    (parameters or names; `select_params`), or ``"layernorm"`` for those of every
    trainable ``nn.LayerNorm``."""
    if isinstance(params, str):
        if params != "layernorm":
            raise InputError(f"params must be None, 'layernorm' or parameters/names, got "
                             f"{params!r}")
        params = [p for m in model.modules() if layer_kind(m) == "layernorm"
                  for p in m.parameters(recurse=False) if p.requires_grad]
        if not params:
            raise InputError("params='layernorm': the model has no trainable nn.LayerNorm")
    return select_params(model, params)
