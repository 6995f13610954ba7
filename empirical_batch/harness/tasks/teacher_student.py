"""Teacher–student regression with fresh data every step and adjustable label noise.

Inputs $x \\sim N(0, I_d)$; targets $y = f_T(x) + \\sigma \\xi$ with a fixed
random one-hidden-layer tanh teacher $f_T$ (output scaled to unit variance) and
label noise $\\sigma$ = ``label_noise``. The student is a one-hidden-layer tanh
MLP trained on the mean squared error. Every training batch is new data, so there
is no overfitting and the gradient noise is the population's: the loss floor is
$\\sigma^2$ plus whatever the student cannot represent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from ...params import INTEGER
from .base import MLP, NONNEGATIVE, POSITIVE_INT, Task


@dataclass(frozen=True)
class TeacherStudentOptions:
    dim: int = 16
    teacher_hidden: int = 32
    hidden: int = 32
    label_noise: float = 0.3
    eval_size: int = 4096
    objective_size: int = 4096
    teacher_seed: int = 0


class TeacherStudent(Task):
    """Synthetic regression; see the module docstring. Options: `TeacherStudentOptions`."""

    name = "teacher_student"
    Options = TeacherStudentOptions

    option_constraints: ClassVar[Mapping[str, Any]] = {
        **dict.fromkeys(("dim", "teacher_hidden", "hidden", "eval_size", "objective_size"),
                        POSITIVE_INT),
        "label_noise": NONNEGATIVE, "teacher_seed": INTEGER}

    def _build(self) -> None:
        o = self.options
        gen = torch.Generator().manual_seed(o.teacher_seed)
        w1 = torch.randn(o.dim, o.teacher_hidden, generator=gen, dtype=torch.float64)
        w1 /= o.dim**0.5
        b1 = 0.5 * torch.randn(o.teacher_hidden, generator=gen, dtype=torch.float64)
        w2 = torch.randn(o.teacher_hidden, 1, generator=gen, dtype=torch.float64)
        probe = torch.randn(8192, o.dim, generator=gen, dtype=torch.float64)
        scale = (torch.tanh(probe @ w1 + b1) @ w2).std()
        dev, dt = self.device, self.dtype
        self._w1, self._b1 = w1.to(device=dev, dtype=dt), b1.to(device=dev, dtype=dt)
        self._w2 = (w2 / scale).to(device=dev, dtype=dt)
        fixed = torch.Generator(device=self.device).manual_seed(o.teacher_seed + 1)
        self._eval = self._draw(fixed, o.eval_size)
        self._objective = self._draw(fixed, o.objective_size)

    def _teacher(self, x):
        return torch.tanh(x @ self._w1 + self._b1) @ self._w2

    def _draw(self, gen, n):
        x = torch.randn(n, self.options.dim, generator=gen, device=self.device, dtype=self.dtype)
        noise = torch.randn(n, 1, generator=gen, device=self.device, dtype=self.dtype)
        return x, self._teacher(x) + self.options.label_noise * noise

    def make_model(self) -> nn.Module:
        o = self.options
        return MLP(o.dim, o.hidden, 1, torch.tanh)

    def loss_fn(self, outputs, targets):
        return ((outputs - targets) ** 2).mean()

    def _sample(self, generator, batch_size):
        return self._draw(generator, batch_size)

    def _eval_data(self):
        return self._eval

    def _objective_data(self):
        return self._objective
