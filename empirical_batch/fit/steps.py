r"""Steps and examples to a target per batch size, from a sweep (§3)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from .._validate import as_float
from ..errors import InputError, NotFoundError
from ..params import FINITE, POSITIVE, REAL, Options, instance_of, validate_params
from ..result import Result, TableResult, table_dict, unwrap_table
from ..sweeps import Sweep, load_sweep
from ..units import UnitMismatch, check_unit

__all__ = ["StepsTable", "steps_to_target"]

Combine = Literal["mean", "median", "min"]
"""How the seeds of one configuration are combined into its steps."""
_COMBINE = get_args(Combine)


def check_combine(combine: object) -> None:
    """Raise unless ``combine`` is one of ``"mean"``, ``"median"``, ``"min"``."""
    Options.of(Combine).check(combine, "combine")


class FrameView:
    """Read access to ``self.frame`` as if it were the DataFrame: ``obj["steps"]``,
    ``obj.iloc``, ``obj.loc``, ``len(obj)``, ``obj.columns`` and the notebook display.
    (The frame is the documented way; this keeps pandas habits working.)"""

    frame: pd.DataFrame

    def __getitem__(self, key: Any) -> Any:
        return self.frame[key]

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def iloc(self) -> Any:
        return self.frame.iloc

    @property
    def loc(self) -> Any:
        return self.frame.loc

    @property
    def columns(self) -> pd.Index:
        return self.frame.columns

    def _repr_html_(self) -> str | None:
        html: str | None = self.frame._repr_html_()  # type: ignore[operator]
        return html

    def to_frame(self) -> pd.DataFrame:
        """A copy of the table as a DataFrame."""
        return self.frame.copy()


@dataclass(frozen=True, repr=False, eq=False)
class StepsTable(FrameView, Result):
    """Steps and examples to a target per batch size (the result of `steps_to_target`).

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per batch size (columns documented in `steps_to_target`).
    target : float
        The metric value reached.
    metric_name : str
    higher_is_better : bool
    combine : str
        How seeds were combined.
    config : tuple of str
        The columns that identify a configuration at one batch size.
    best_metric : float
        The best value any non-diverged point of the sweep logged.
    unit : str
        The unit of ``batch_size`` and ``examples`` (`empirical_batch.units`).

    The seeds are the one truth: where a row has seeds, its ``steps`` and ``examples``
    are its ``seed_steps`` and ``seed_examples`` combined by ``combine``; a frame whose
    columns disagree is refused (`check_seeds`), here and by `fit_tradeoff`, which
    fits the seeds.
    """

    frame: pd.DataFrame
    target: float
    metric_name: str
    higher_is_better: bool
    combine: str
    config: tuple[str, ...]
    best_metric: float
    unit: str = "examples"

    def __post_init__(self) -> None:
        check_seeds(self.frame, self.combine)

    @property
    def direction(self) -> str:
        """``"higher"`` or ``"lower"`` (is better)."""
        return "higher" if self.higher_is_better else "lower"

    @property
    def batch_sizes(self) -> np.ndarray:
        return self.frame["batch_size"].to_numpy(dtype=float)

    @property
    def steps(self) -> np.ndarray:
        return self.frame["steps"].to_numpy(dtype=float)

    @property
    def examples(self) -> np.ndarray:
        return self.frame["examples"].to_numpy(dtype=float)

    @property
    def reached(self) -> np.ndarray:
        return self.frame["reached"].to_numpy(dtype=bool)

    @property
    def seed_steps(self) -> tuple[np.ndarray, ...]:
        """Per batch size, the steps of each seed of the best configuration."""
        return tuple(np.asarray(s, dtype=float) for s in self.frame["seed_steps"])

    @property
    def learning_rate(self) -> np.ndarray:
        """The best learning rate per batch size (NaN where none reached)."""
        return self.frame["learning_rate"].to_numpy(dtype=float)

    @property
    def lr_at_grid_edge(self) -> np.ndarray:
        """Whether the best learning rate is the smallest or largest one tried at that
        batch size (its steps are then an upper bound: a better rate may lie outside)."""
        return self.frame["lr_at_grid_edge"].to_numpy(dtype=bool)

    @property
    def unreached_batch_sizes(self) -> tuple[float, ...]:
        return tuple(float(b) for b in self.batch_sizes[~self.reached])

    def __repr__(self) -> str:
        n, ok = len(self.frame), int(self.reached.sum())
        return (
            f"StepsTable(target={self.target:.6g} ({self.metric_name}, {self.direction} is "
            f"better), {ok} of {n} batch sizes reached, combine={self.combine!r}, "
            f"batch in {self.unit})"
        )

    def summary(self) -> str:
        """The header line and the table as text."""
        cols = ["batch_size", "learning_rate", "steps", "examples", "reached", "n_runs",
                "lr_at_grid_edge"]
        return f"{self!r}\n{self.frame[cols].to_string(index=False)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "metric_name": self.metric_name,
            "higher_is_better": self.higher_is_better, "combine": self.combine,
            "config": list(self.config), "best_metric": self.best_metric, "unit": self.unit,
            **table_dict(self.frame),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepsTable:
        """The table of `to_dict`; the seeds' cells are tuples again (JSON has lists)."""
        table = super().from_dict(d)
        for _, col in SEED_COLUMNS:
            if col in table.frame.columns:
                table.frame[col] = [tuple(v) if isinstance(v, list) else v
                                    for v in table.frame[col]]
        return table


@dataclass(frozen=True, eq=False)
class Prepared:
    """Sorted numpy views of a sweep, reused across targets."""

    run_code: np.ndarray  # int per row, rows sorted by (run, step)
    step: np.ndarray
    examples: np.ndarray
    value: np.ndarray  # metric oriented so that lower is better
    run_start: np.ndarray  # first row of each run
    diverged: np.ndarray  # bool per run code
    cfg_code: np.ndarray  # configuration (batch size × config columns) of each run
    cfg_info: pd.DataFrame  # one row per configuration: batch_size, learning_rate, config
    cfg_order: np.ndarray  # run codes sorted by configuration
    cfg_start: np.ndarray  # slice bounds into cfg_order, length n_cfg + 1
    config: tuple[str, ...]
    higher_is_better: bool
    metric_name: str
    max_stable_lr: float = math.nan  # given to steps_to_target: rates at or above diverge


SWEEP = instance_of(Sweep, pd.DataFrame, TableResult, what="a Sweep or a DataFrame")
"""The constraint of a ``sweep`` parameter: a Sweep, a DataFrame in the sweep schema or
a result holding one (`empirical_batch.simulate.SimulatedSweep`)."""


def as_sweep(sweep: object) -> Sweep:
    """A `Sweep` from a Sweep, a DataFrame in the sweep schema or a result holding one
    (the callers declare `SWEEP`)."""
    sweep = unwrap_table(SWEEP.check(sweep, "sweep"))
    return sweep if isinstance(sweep, Sweep) else load_sweep(sweep)


LIMIT = "max_stable_lr"  # optional sweep column: the rate at and above which runs diverge


def prepare(sweep: Sweep, config: str | Sequence[str],
            max_stable_lr: float = math.nan) -> Prepared:
    """Sorted numpy views of ``sweep`` grouped by configuration ``config`` (reused
    across targets by `steps_table`)."""
    config = (config,) if isinstance(config, str) else tuple(config)
    d = sweep.data
    if LIMIT in d.columns:
        lim = pd.to_numeric(d[LIMIT], errors="coerce").to_numpy(dtype=float)
        if np.any((d[LIMIT].notna().to_numpy() & np.isnan(lim)) | (lim <= 0)):
            raise InputError(f"column {LIMIT!r} must hold learning rates > 0 (or be empty "
                             "where unknown)")
        d[LIMIT] = lim
    for c in config:
        if c not in d.columns:
            raise NotFoundError(
                f"config column {c!r} not in the sweep; columns are {list(d.columns)}"
            )
    codes, uniques = pd.factorize(d["run"], sort=False)
    order = np.lexsort((d["step"].to_numpy(), codes))
    codes = codes[order]
    value = d["metric"].to_numpy(dtype=float)[order]
    if sweep.higher_is_better:
        value = -value
    start = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    bad = ~np.isfinite(value)
    diverged = np.zeros(len(uniques), dtype=bool)  # codes[start] is 0, 1, ... in order
    diverged[np.unique(codes[bad])] = True
    info_cols = list(dict.fromkeys(["batch_size", "learning_rate", *config]))
    if LIMIT in d.columns:
        info_cols.append(LIMIT)
    runs = d.iloc[order[start]][info_cols].reset_index(drop=True)  # one row per run code
    keys = list(dict.fromkeys(["batch_size", *config]))
    cfg_code = runs.groupby(keys, sort=True, dropna=False).ngroup().to_numpy()
    n_cfg = int(cfg_code.max()) + 1
    cfg_order = np.argsort(cfg_code, kind="stable")
    counts = np.bincount(cfg_code, minlength=n_cfg)
    first = cfg_order[np.r_[0, np.cumsum(counts)[:-1]]]
    cfg_info = runs.iloc[first].reset_index(drop=True)
    cfg_info["n_runs"] = counts
    return Prepared(
        diverged=diverged,
        cfg_code=cfg_code,
        cfg_info=cfg_info,
        cfg_order=cfg_order,
        cfg_start=np.r_[0, np.cumsum(counts)],
        run_code=codes,
        step=d["step"].to_numpy(dtype=float)[order],
        examples=d["examples"].to_numpy(dtype=float)[order],
        value=value,
        run_start=start,
        config=config,
        higher_is_better=sweep.higher_is_better,
        metric_name=sweep.metric_name,
        max_stable_lr=float(max_stable_lr),
    )


def _interp(lo: np.ndarray, hi: np.ndarray, frac: np.ndarray) -> np.ndarray:
    """Interpolate linearly in log space where both ends are > 0, else linearly."""
    out = lo + frac * (hi - lo)
    pos = (lo > 0) & (hi > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        logv = np.exp(np.log(np.where(pos, lo, 1.0)) + frac * (
            np.log(np.where(pos, hi, 1.0)) - np.log(np.where(pos, lo, 1.0))))
    res: np.ndarray = np.where(pos, logv, out)
    return res


def per_run(p: Prepared, target: float) -> dict[str, np.ndarray]:
    """Steps/examples at which each run first reaches ``target`` (NaN when never)."""
    t = -target if p.higher_is_better else target
    n_runs = len(p.diverged)
    hit = p.value <= t  # NaN compares False: a NaN point never reaches
    idx = np.flatnonzero(hit)
    steps = np.full(n_runs, np.nan)
    examples = np.full(n_runs, np.nan)
    at_first = np.zeros(n_runs, dtype=bool)
    if idx.size:
        codes = p.run_code[idx]
        keep = np.r_[True, codes[1:] != codes[:-1]]
        first = idx[keep]
        rc = codes[keep]
        is_start = first == p.run_start[rc]
        prev = np.where(is_start, first, first - 1)
        v0, v1 = p.value[prev], p.value[first]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(is_start | (v0 == v1), 1.0, (v0 - t) / (v0 - v1))
        frac = np.clip(frac, 0.0, 1.0)
        steps[rc] = _interp(p.step[prev], p.step[first], frac)
        examples[rc] = _interp(p.examples[prev], p.examples[first], frac)
        at_first[rc] = is_start
    steps[p.diverged] = np.nan
    examples[p.diverged] = np.nan
    reached = np.isfinite(steps)
    return {"steps": steps, "examples": examples, "reached": reached,
            "at_first_point": at_first & reached}


def combine_seeds(values: np.ndarray, how: str, axis: int = -1) -> Any:
    """Seeds combined by ``how`` (``"mean"``, ``"median"`` or ``"min"``) along ``axis``
    (an array, or a number where ``values`` is 1-D)."""
    if how == "mean":
        return np.mean(values, axis=axis)
    if how == "median":
        return np.median(values, axis=axis)
    return np.min(values, axis=axis)


SEED_COLUMNS = (("steps", "seed_steps"), ("examples", "seed_examples"))
"""The combined columns of a steps table and the seed columns they are combined from."""


def seed_values(cell: object) -> np.ndarray:
    """The seeds of one cell of ``seed_steps``/``seed_examples`` (empty for none)."""
    if isinstance(cell, tuple | list | np.ndarray) and len(cell):
        return np.asarray(cell, dtype=float)
    return np.empty(0)


def check_seeds(frame: pd.DataFrame, combine: str) -> None:
    """Raise `InputError` unless, in every row with seeds, ``steps`` and ``examples`` are
    ``seed_steps`` and ``seed_examples`` combined by ``combine`` (to a relative 1e-9):
    the seeds are the one truth of a steps table, the combined columns follow from them.
    Columns the frame lacks are not checked."""
    for col, seed_col in SEED_COLUMNS:
        if col not in frame.columns or seed_col not in frame.columns:
            continue
        values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
        b = frame["batch_size"].tolist() if "batch_size" in frame.columns else \
            list(range(len(frame)))
        bad = [b[i] for i, cell in enumerate(frame[seed_col])
               if (seeds := seed_values(cell)).size
               and not np.isclose(values[i], float(combine_seeds(seeds, combine)),
                                  rtol=1e-9, atol=0.0, equal_nan=True)]
        if bad:
            raise InputError(
                f"the table's {col!r} and {seed_col!r} disagree at batch sizes {bad}: "
                f"{col} must be the seeds combined by {combine!r} (the fit reads the "
                f"seeds); edit {seed_col!r} and {col!r} together, or drop the seed "
                f"columns to fit {col!r} alone")


def config_table(p: Prepared, pr: dict[str, np.ndarray], combine: str) -> pd.DataFrame:
    """One row per (batch size, configuration), seeds combined (vectorised)."""
    n_cfg = len(p.cfg_info)
    reached = pr["reached"]
    n_runs = p.cfg_info["n_runs"].to_numpy()
    n_reached = np.bincount(p.cfg_code, weights=reached, minlength=n_cfg).astype(int)
    n_div = np.bincount(p.cfg_code, weights=p.diverged, minlength=n_cfg).astype(int)
    ok = n_reached >= 1 if combine == "min" else n_reached == n_runs
    steps = np.full(n_cfg, np.nan)
    examples = np.full(n_cfg, np.nan)
    if reached.any():
        small = pd.DataFrame({"c": p.cfg_code[reached], "s": pr["steps"][reached],
                              "e": pr["examples"][reached]})
        agg = small.groupby("c")[["s", "e"]].agg(combine)
        steps[agg.index.to_numpy()] = agg["s"].to_numpy()
        examples[agg.index.to_numpy()] = agg["e"].to_numpy()
    steps[~ok] = np.nan
    examples[~ok] = np.nan
    out = p.cfg_info.copy()
    out["steps"] = steps
    out["examples"] = examples
    out["n_reached"] = n_reached
    out["n_diverged"] = n_div
    out["reached"] = ok
    return out


def _seeds_of(p: Prepared, pr: dict[str, np.ndarray],
              c: int) -> tuple[np.ndarray, np.ndarray, int]:
    runs = p.cfg_order[p.cfg_start[c]:p.cfg_start[c + 1]]
    runs = runs[pr["reached"][runs]]
    return pr["steps"][runs], pr["examples"][runs], int(pr["at_first_point"][runs].sum())


@validate_params(sweep=SWEEP, target=REAL.within(FINITE), combine=Combine,
                 max_stable_lr=REAL.within(POSITIVE))
def steps_to_target(
    sweep: object,
    target: float,
    *,
    combine: Combine = "mean",
    config: str | Sequence[str] = "learning_rate",
    max_stable_lr: float | None = None,
    unit: str | None = None,
) -> StepsTable:
    r"""Steps and examples to first reach ``target``, best configuration per batch size.

    For every run the first logged point at or beyond the target is found
    (``metric <= target``, or ``>=`` when higher is better) and the crossing is
    **interpolated between it and the previous logged point, with the metric
    linear in log(step)** (linear in step when the previous step is 0); examples
    are interpolated the same way. A run whose first point already meets the
    target is counted at that step (``n_at_first_point``). Diverged runs (any
    NaN/inf metric) never reach a target. Runs with the same batch size and
    configuration (by default the learning rate) are seeds: they are combined
    with ``combine`` — ``"mean"`` and ``"median"`` need every seed to reach
    the target (a censored mean would be biased), ``"min"`` needs one. The best
    configuration at each batch size is the one with the fewest combined steps.

    Parameters
    ----------
    sweep : Sweep or DataFrame
    target : float
        Metric value to reach.
    combine : {"mean", "median", "min"}
        How seeds are combined.
    config : str or sequence of str
        Column(s) that identify one hyper-parameter configuration at a batch size;
        e.g. ``["round", "org", "system"]`` for MLPerf submissions.
    max_stable_lr : float, optional
        The learning rate at and above which runs diverge (e.g. $2/h_{max}$ on a
        quadratic); default: the sweep's optional column ``max_stable_lr`` (per run;
        `empirical_batch.simulate.simulate_sweep` writes it), if any. A best rate at the top of its
        grid is not at the edge when the grid's next value would reach this limit, or
        when a run at that next value (or below it) diverged at this or a larger batch
        size: the divergence is the other side of the bracket.
    unit : {"examples", "sequences", "tokens"}, optional
        What the sweep's ``batch_size`` counts; default the sweep's
        ``metadata["unit"]``, else ``"examples"``. Carried by the table and by the fits
        made from it (a sweep whose batch is in tokens gives $B_{crit}$ in tokens).

    Returns
    -------
    StepsTable
        Its ``frame`` has one row per batch size, sorted: ``batch_size``,
        ``learning_rate`` (of the best configuration), ``steps``, ``examples``,
        ``reached`` (``False`` rows have NaN steps: no configuration reached the
        target), ``n_runs`` (seeds behind the best configuration), ``n_configs``,
        ``n_configs_reached``, ``n_diverged``, ``n_at_first_point``,
        ``seed_steps``/``seed_examples`` (tuples: the seeds, which ``steps`` and
        ``examples`` combine and `fit_tradeoff` fits), ``lr_at_grid_edge`` (the best
        learning rate is the smallest or largest tried at that batch size, and at the
        largest the next larger rate is not known to diverge: see ``max_stable_lr``)
        and the config columns. The table also carries the target, the metric's name
        and direction and the combine rule; ``table["steps"]``, ``table.iloc`` and
        ``len(table)`` read the frame.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"run": ["a"] * 3, "batch_size": 8, "learning_rate": 0.1,
    ...                    "step": [1, 10, 100], "metric": [3.0, 2.0, 1.0]})
    >>> steps_to_target(df, 1.5)[["batch_size", "steps", "examples", "reached"]]
       batch_size      steps    examples  reached
    0         8.0  31.622777  252.982213     True
    """
    sweep = as_sweep(sweep)
    target, limit = _check_target(target, combine, max_stable_lr)
    return steps_table(prepare(sweep, config, limit), target, combine,
                       sweep_unit(sweep, unit))


def _check_target(target: float, combine: str,
                  max_stable_lr: float | None) -> tuple[float, float]:
    """The options of `steps_to_target` as floats: the target and the limit on the
    learning rate (NaN when none is given); their domains are declared."""
    check_combine(combine)
    limit = math.nan if max_stable_lr is None else as_float(max_stable_lr, "max_stable_lr")
    return as_float(target, "target"), limit


def sweep_unit(sweep: Sweep, unit: str | None) -> str:
    """``unit`` checked, or the sweep's ``metadata["unit"]``, or ``"examples"``; a
    ``unit`` that contradicts the sweep's metadata raises `UnitMismatch`."""
    known = sweep.metadata.get("unit")
    if unit is None:
        return check_unit(known, "the sweep's unit") if known is not None else "examples"
    unit = check_unit(unit)
    if known is not None and check_unit(known, "the sweep's unit") != unit:
        raise UnitMismatch(f"unit={unit!r} but the sweep's batch_size is in {known}")
    return unit


def steps_table(p: Prepared, target: float, combine: str,
                unit: str = "examples") -> StepsTable:
    """`steps_to_target` on prepared data (one target; batch sizes in ``unit``)."""
    pr = per_run(p, target)
    return best_per_size(p, pr, config_table(p, pr, combine), target, combine, unit)


def _beyond_is_unstable(p: Prepared, ct: pd.DataFrame, batch: float,
                        grid: np.ndarray) -> bool:
    """Whether the grid's next larger rate, ``grid[-1]²/grid[-2]``, is known to diverge:
    it reaches the sweep's ``max_stable_lr``, or a run with a rate above ``grid[-1]``
    and not above it diverged at this or a larger batch size (a larger batch is no
    more stable). The best rate at the top of such a grid is bracketed, not at an
    edge."""
    nxt = grid[-1] * grid[-1] / grid[-2]
    at = ct["batch_size"].to_numpy(dtype=float) == batch
    limit = p.max_stable_lr
    if LIMIT in ct.columns:
        limit = float(np.fmin.reduce(np.r_[limit, ct[LIMIT].to_numpy(dtype=float)[at]]))
    if nxt >= limit:
        return True
    lr = ct["learning_rate"].to_numpy(dtype=float)
    hit = ((ct["batch_size"].to_numpy(dtype=float) >= batch) & (lr > grid[-1])
           & (lr <= nxt * (1 + 1e-12)) & (ct["n_diverged"].to_numpy() > 0))
    return bool(hit.any())


def best_per_size(p: Prepared, pr: dict[str, np.ndarray], ct: pd.DataFrame, target: float,
                  combine: str, unit: str = "examples") -> StepsTable:
    """The `steps_to_target` table from per-run results and the configuration table."""
    cfg_cols = [c for c in p.config if c not in ("learning_rate", "batch_size")]
    b_all = ct["batch_size"].to_numpy()
    sizes, b_idx = np.unique(b_all, return_inverse=True)
    n_configs = np.bincount(b_idx, minlength=len(sizes))
    n_ok = np.bincount(b_idx, weights=ct["reached"].to_numpy(), minlength=len(sizes))
    n_div = np.bincount(b_idx, weights=ct["n_diverged"].to_numpy(), minlength=len(sizes))
    st = ct["steps"].to_numpy()
    order = np.lexsort((np.where(np.isfinite(st), st, np.inf), b_idx))
    first = order[np.r_[True, b_idx[order][1:] != b_idx[order][:-1]]]  # best per size
    lrs = ct["learning_rate"].to_numpy(dtype=float)
    rows = []
    for j, c in enumerate(first):
        base = {"batch_size": float(sizes[j]), "n_configs": int(n_configs[j]),
                "n_configs_reached": int(n_ok[j]), "n_diverged": int(n_div[j])}
        grid = np.unique(lrs[(b_idx == j) & np.isfinite(lrs)])
        edge = bool(grid.size >= 2 and lrs[c] in (grid[0], grid[-1]))
        if edge and lrs[c] == grid[-1]:
            edge = not _beyond_is_unstable(p, ct, float(sizes[j]), grid)
        if ct["reached"].iat[c]:
            s_seeds, e_seeds, n_first = _seeds_of(p, pr, int(c))
            rows.append({
                **base,
                "learning_rate": ct["learning_rate"].iat[c],
                "steps": float(combine_seeds(s_seeds, combine)),
                "examples": float(combine_seeds(e_seeds, combine)),
                "reached": True,
                "n_runs": int(ct["n_runs"].to_numpy()[c]),
                "n_at_first_point": n_first,
                "seed_steps": tuple(s_seeds.tolist()),
                "seed_examples": tuple(e_seeds.tolist()),
                "lr_at_grid_edge": edge,
                **{k: ct[k].iat[c] for k in cfg_cols},
            })
        else:
            rows.append({
                **base, "learning_rate": np.nan, "steps": np.nan, "examples": np.nan,
                "reached": False, "n_runs": 0, "n_at_first_point": 0,
                "seed_steps": (), "seed_examples": (), "lr_at_grid_edge": False,
                **{k: None for k in cfg_cols},
            })
    cols = ["batch_size", "learning_rate", "steps", "examples", "reached", "n_runs",
            "n_configs", "n_configs_reached", "n_diverged", "n_at_first_point",
            "seed_steps", "seed_examples", "lr_at_grid_edge", *cfg_cols]
    out = pd.DataFrame(rows, columns=cols)
    finite = p.value[np.isfinite(p.value)]
    best = float(finite.min()) if finite.size else math.nan
    return StepsTable(
        frame=out, target=float(target), metric_name=p.metric_name,
        higher_is_better=p.higher_is_better, combine=combine, config=p.config,
        best_metric=-best if p.higher_is_better else best, unit=unit,
    )


def seed_groups(table: pd.DataFrame) -> tuple[np.ndarray, list[np.ndarray]]:
    """Batch sizes and per-batch-size arrays of steps (one value per seed/row)."""
    if "steps" in table.columns:
        steps = pd.to_numeric(table["steps"], errors="coerce").to_numpy(dtype=float)
    else:
        ex = pd.to_numeric(table["examples"], errors="coerce").to_numpy(dtype=float)
        steps = ex / table["batch_size"].to_numpy(dtype=float)
    b = table["batch_size"].to_numpy(dtype=float)
    use_seeds = "seed_steps" in table.columns
    groups: dict[float, list[float]] = {}
    for i in range(len(table)):
        if use_seeds:
            seeds = table["seed_steps"].iloc[i]
            vals = list(seeds) if isinstance(seeds, tuple | list | np.ndarray) and len(
                seeds) else [steps[i]]
        else:
            vals = [steps[i]]
        groups.setdefault(b[i], []).extend(vals)
    keys = np.array(sorted(groups))
    return keys, [np.asarray(groups[k], dtype=float) for k in keys]
