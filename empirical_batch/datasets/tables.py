"""The result types of the published tables: a table with its provenance, and Zhang et
al. (2024)'s steps to target per model with one tradeoff fit per model."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..fit import TradeoffFit, fit_tradeoff
from ..provenance import Provenance
from ..result import TableResult

__all__ = ["ModelFits", "PublishedTable", "Zhang2024"]


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class PublishedTable(TableResult):
    """A published table (``frame``) with its `Provenance`."""

    provenance: Provenance

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.provenance.name}: {len(self.frame)} rows; "
                f"{self.provenance.title})")[:300]


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class Zhang2024(PublishedTable):
    r"""Steps to the Chinchilla loss at 9 batch sizes for 5 model sizes (Zhang et al. 2024),
    one row per (model, batch size); batch sizes in sequences of 512 tokens.

    `fit` fits $S(B) = S_{min}(1 + B_{crit}/B)$ (eq. 2.11) to each model's steps;
    `steps` gives one model's table in the form `~empirical_batch.fit.fit_tradeoff` takes.
    """

    @property
    def models(self) -> tuple[str, ...]:
        """The model sizes, smallest first (``"85M"`` … ``"1.2B"``)."""
        return tuple(dict.fromkeys(self.frame["model"]))

    def steps(self, model: str, *, revised: bool = False) -> pd.DataFrame:
        """``batch_size`` and ``steps`` of one model: ``steps_to_target`` (the sweep's
        minimum per batch size), or with ``revised=True`` the list the paper's own fits
        use (``steps_to_target_revised``)."""
        if model not in self.models:
            from ..errors import NotFoundError

            raise NotFoundError(f"no model {model!r} in Zhang et al. 2024's table "
                                f"(models: {', '.join(self.models)})")
        rows = self.frame[self.frame["model"] == model]
        col = "steps_to_target_revised" if revised else "steps_to_target"
        return pd.DataFrame({"batch_size": rows["batch_size"].to_numpy(float),
                             "steps": rows[col].to_numpy(float)})

    def fit(self, *, revised: bool = False, **options: Any) -> ModelFits:
        """One `~empirical_batch.fit.fit_tradeoff` per model (``options`` are passed on:
        ``n_boot``, ``seed``, ``level``, ...); batch sizes in sequences."""
        options.setdefault("unit", "sequences")
        fits = {m: fit_tradeoff(self.steps(m, revised=revised), **options)
                for m in self.models}
        first = self.frame.drop_duplicates("model").set_index("model")
        n_params = first["n_params"].astype(int)
        target = first["target_loss"].astype(float)
        seq_len = int(first["seq_len"].iloc[0])
        rows = []
        for m, f in fits.items():
            rows.append({
                "model": m, "n_params": int(n_params[m]),
                "target_loss": float(target[m]),
                "b_crit": f.b_crit, "b_crit_low": f.b_crit_interval.low,
                "b_crit_high": f.b_crit_interval.high, "b_crit_tokens": f.b_crit * seq_len,
                "s_min": f.s_min, "e_min": f.e_min, "log_rmse": f.log_rmse,
                "n_below": f.n_below, "n_above": f.n_above, "status": f.status,
            })
        level = next(iter(fits.values())).b_crit_interval.level
        return ModelFits(frame=pd.DataFrame(rows), unit="sequences",
                         tokens_per_sequence=seq_len, level=level, revised=revised,
                         fits=fits)


def _g(x: float) -> str:
    """Three significant figures, thousands separated."""
    if not math.isfinite(x):
        return str(x)
    v = float(f"{x:.3g}")
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class ModelFits(TableResult):
    """The critical batch of each model (`Zhang2024.fit`): ``frame`` has one row per model
    (``b_crit`` with ``b_crit_low``/``b_crit_high`` in ``unit``, ``b_crit_tokens``,
    ``s_min``, ``e_min``, ``log_rmse``, ``status``), ``fits`` each model's
    `~empirical_batch.fit.TradeoffFit`."""

    unit: str
    tokens_per_sequence: int
    level: float
    revised: bool
    fits: Mapping[str, TradeoffFit] = dataclasses.field(repr=False, compare=False)

    def __repr__(self) -> str:
        b = ", ".join(f"{m}: {_g(f.b_crit)}" for m, f in self.fits.items())
        return f"ModelFits(B_crit in {self.unit}: {b})"[:300]

    def __str__(self) -> str:
        head = (f"B_crit per model ({self.unit} of {self.tokens_per_sequence} tokens; "
                f"{self.level:.0%} intervals)")
        lines = [head, f"{'model':>6} {'B_crit':>8} {'interval':>17} {'tokens':>9} "
                       f"{'S_min':>7} {'log-RMSE':>8}"]
        for _, r in self.frame.iterrows():
            lines.append(f"{r['model']:>6} {_g(r['b_crit']):>8} "
                         f"{_g(r['b_crit_low']) + '–' + _g(r['b_crit_high']):>17} "
                         f"{r['b_crit_tokens']:>9.3g} {_g(r['s_min']):>7} "
                         f"{r['log_rmse']:>8.3f}")
        return "\n".join(lines)
