"""scikit-learn's handwritten digits (8×8 images, 10 classes), offline.

The 1,797 images of `sklearn.datasets.load_digits` are standardised and split
once (``eval_fraction`` held out, stratified, fixed ``split_seed``). Training batches
are drawn uniformly *with replacement* from the training split, so a batch of B has
exactly the covariance Σ/B the model assumes; the training objective is the mean
loss over the training split. The model is a one-hidden-layer ReLU MLP trained on
cross-entropy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..._optional import optional_import
from ...params import INTEGER
from .base import FRACTION, MLP, POSITIVE_INT, Task


@dataclass(frozen=True)
class DigitsOptions:
    hidden: int = 64
    eval_fraction: float = 0.2
    split_seed: int = 0


class Digits(Task):
    """Digits classification; options: `DigitsOptions`."""

    name = "digits"
    Options = DigitsOptions
    requires = ("sklearn",)

    option_constraints: ClassVar[Mapping[str, Any]] = {
        "hidden": POSITIVE_INT, "eval_fraction": FRACTION, "split_seed": INTEGER}

    def _build(self) -> None:
        with optional_import("sklearn", by="the digits task", extra="harness"):
            from sklearn.datasets import load_digits
            from sklearn.model_selection import train_test_split

        data = load_digits()
        x_tr, x_ev, y_tr, y_ev = train_test_split(
            data.data, data.target, test_size=self.options.eval_fraction,
            random_state=self.options.split_seed, stratify=data.target,
        )
        mean, std = x_tr.mean(axis=0), x_tr.std(axis=0)
        std = np.where(std > 0, std, 1.0)  # constant pixels (always 0) stay 0

        def tensors(x, y):
            xt = torch.as_tensor((x - mean) / std, dtype=self.dtype, device=self.device)
            return xt, torch.as_tensor(y, dtype=torch.long, device=self.device)

        self._train = tensors(x_tr, y_tr)
        self._eval = tensors(x_ev, y_ev)

    @property
    def train_size(self) -> int:
        self._require_ready()
        return int(self._train[0].shape[0])

    @property
    def population_size(self) -> float:
        """The training split: batches are drawn from it with replacement and it is the
        objective (`Task.population_size`)."""
        return float(self.train_size)

    def make_model(self) -> nn.Module:
        return MLP(64, self.options.hidden, 10, F.relu)

    def loss_fn(self, outputs, targets):
        return F.cross_entropy(outputs, targets)

    def _sample(self, generator, batch_size):
        x, y = self._train
        idx = torch.randint(x.shape[0], (batch_size,), generator=generator, device=self.device)
        return x[idx], y[idx]

    def _eval_data(self):
        return self._eval

    def _objective_data(self):
        return self._train
