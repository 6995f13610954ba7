"""Synthetic grids for the laws tests: a loss surface whose optimum moves as known power
laws in N and D, written in StepLaw's CSV layout or the plain schema."""

from __future__ import annotations

import numpy as np
import pandas as pd

TRUE = {"a": 0.58, "k_d": 0.571, "k_n": 0.0, "lr_a": 1.79, "lr_n": -0.713, "lr_d": 0.307}
SEQ = 2048


def loss_grid(rng: np.random.Generator, *, k_d: float = TRUE["k_d"], k_n: float = 0.0,
              a: float = TRUE["a"], noise: float = 0.002,
              ns=(1e8, 3e8, 1e9), ds=(2e9, 8e9, 3.2e10, 1.28e11),
              bs=None, lr_steps=None) -> pd.DataFrame:
    """StepLaw-layout rows: ``N``, ``D``, ``bs`` (sequences of 2048 tokens), ``lr``,
    ``smooth loss``; the optimum in tokens is ``a N^k_n D^k_d``."""
    bs = 2.0 ** np.arange(4, 14) if bs is None else bs
    lr_steps = np.arange(-3, 3.5, 0.5) if lr_steps is None else lr_steps
    rows = []
    for n in ns:
        for d in ds:
            b_opt = a * d**k_d * n**k_n / SEQ
            lr_opt = TRUE["lr_a"] * n ** TRUE["lr_n"] * d ** TRUE["lr_d"]
            for b in bs:
                for lr in lr_opt * 2.0**lr_steps:
                    loss = (2.5 + 0.02 * np.log(b / b_opt) ** 2 + 0.03 * np.log(lr / lr_opt) ** 2
                            + noise * rng.standard_normal())
                    rows.append({"N": n, "D": d, "bs": b, "lr": lr, "smooth loss": loss})
    return pd.DataFrame(rows)
