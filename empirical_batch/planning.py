r"""Choose batch size and device count: wall time against cost (McCandlish et al. 2018).

A `empirical_batch.tradeoff.Tradeoff` says how many steps $S(B)$ and
examples $E(B) = BS(B)$ a target needs at batch size B. A `Hardware`
description turns a (batch size B, devices n) pair into time and money:

$$
t_{step}(B, n) = \frac{B/n}{\text{throughput}} + t_{fixed} +
\mathbb{1}[n>1]\left(t_{allreduce}\frac{n-1}{n} + t_{latency}\lceil\log_2 n\rceil\right),
$$

$$
\text{wall} = S(B)\,t_{step}, \qquad \text{device-hours} = n\cdot\text{wall},
\qquad \text{cost} = \text{price}\cdot\text{device-hours}.
$$

The first term is compute (examples processed per device per second, assumed
constant up to the memory limit ``max_device_batch``); $t_{fixed}$ is the
per-step time that does not shrink with the batch (optimizer update, kernel launches,
input pipeline); the communication term is a ring all-reduce of the gradient, whose
bandwidth part approaches $t_{allreduce}$ as n grows and whose latency part
grows like $\log_2 n$ (tree/ring hybrid). With no overheads, wall time is
$E/(n\cdot\text{throughput})$ and cost is $\text{price}\cdot E/\text{throughput}$:
at a fixed per-device batch, time ∝ S and cost ∝ E, and the time/cost frontier bends
where $d\log E/d\log S = -1$, i.e. at $B = B_{crit}$ exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ._validate import as_array, as_float, check_broadcast, scalar_or_array
from .errors import InputError
from .params import INTEGER, Domain, check, check_fields, instance_of, validate_params
from .result import Result, TableResult, unwrap_table
from .tradeoff import Tradeoff

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Hardware", "Plan", "frontier", "frontier_bend", "pareto_mask", "plan"]

_COLUMNS = [
    "batch_size", "devices", "device_batch", "steps", "examples", "step_seconds",
    "wall_hours", "device_hours", "cost", "pareto",
]


@dataclass(frozen=True)
class Hardware(Result):
    """One kind of accelerator and how a data-parallel step on n of them takes time.

    Parameters
    ----------
    throughput : float
        Examples per second one device processes (forward + backward) at the
        per-device batch sizes you plan for. Default 1000 (illustrative).
    max_device_batch : int
        Largest per-device batch that fits in memory; larger global batches need
        more devices (gradient accumulation is not modelled). Default 256.
    step_overhead_s : float
        Seconds per step that do not scale with the batch (optimizer update, kernel
        launches, data loading). Default 0.
    allreduce_s : float
        Bandwidth time of the gradient all-reduce in the many-device limit; a ring
        all-reduce over n devices takes ``allreduce_s * (n - 1) / n``. Default 0.
    latency_s : float
        Per-hop latency of the all-reduce, times ``ceil(log2 n)``. Default 0.
    price_per_device_hour : float
        Price of one device for one hour (any currency). Default 1.
    max_devices : int
        Most devices available. Default 1024.

    Examples
    --------
    >>> hw = Hardware(throughput=2000.0, max_device_batch=64, allreduce_s=0.02)
    >>> round(hw.step_seconds(batch_size=512, devices=8), 6)   # 64/2000 + 0.02*7/8
    0.0495
    """

    throughput: float = 1000.0
    max_device_batch: int = 256
    step_overhead_s: float = 0.0
    allreduce_s: float = 0.0
    latency_s: float = 0.0
    price_per_device_hour: float = 1.0
    max_devices: int = 1024

    def __post_init__(self) -> None:
        check_fields(self, {name: INTEGER.within(domain) if domain.integer else domain
                            for name, domain in _HARDWARE.items()})
        for name, domain in _HARDWARE.items():
            v = getattr(self, name)
            x = as_float(v, name)
            if not domain.integer:
                object.__setattr__(self, name, x)
                continue
            if v > _EXACT:
                raise InputError(f"{name} must be at most 2^53 (larger integers are not "
                                 f"exact as floats), got {v!r}")
            object.__setattr__(self, name, int(v))

    def comm_seconds(self, devices: ArrayLike) -> float | np.ndarray:
        """Communication time per step on ``devices`` devices (0 for one device)."""
        n = check("devices", devices)
        comm = self.allreduce_s * (n - 1.0) / n + self.latency_s * np.ceil(np.log2(n))
        out: float | np.ndarray = scalar_or_array(np.where(n > 1, comm, 0.0))
        return out

    def step_seconds(self, batch_size: ArrayLike, devices: ArrayLike) -> float | np.ndarray:
        """Seconds per optimizer step for global batch ``batch_size`` on ``devices``."""
        b = check("batch_size", batch_size)
        n = check("devices", devices)
        check_broadcast(("batch_size", b), ("devices", n))
        out: float | np.ndarray = scalar_or_array(b / n / self.throughput + self.step_overhead_s
                                                  + self.comm_seconds(n))
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_SECONDS = Domain(0.0, low_open=False, meaning="seconds")
_COUNT = Domain(1.0, low_open=False, integer=True, meaning="a count")
_HARDWARE = {
    "throughput": Domain(0.0, meaning="examples per second one device processes"),
    "max_device_batch": _COUNT,
    "step_overhead_s": _SECONDS,
    "allreduce_s": _SECONDS,
    "latency_s": _SECONDS,
    "price_per_device_hour": Domain(0.0, meaning="price of one device for one hour"),
    "max_devices": _COUNT,
}
"""The domain of each `Hardware` field."""


def _powers_of_two(lo: float, hi: float) -> np.ndarray:
    k0 = int(np.floor(np.log2(max(lo, 1.0))))
    k1 = int(np.ceil(np.log2(max(hi, 1.0))))
    return 2.0 ** np.arange(k0, k1 + 1)


_EXACT = 2**53
"""Largest count planned: integers above it are not exact as floats (nor int64-safe in
products)."""


def _int_list(values: object, name: str) -> np.ndarray:
    arr = as_array(values, name, ndim=1)
    if arr.size == 0:
        raise InputError(f"{name} must not be empty")
    if np.any(arr > _EXACT):
        raise InputError(f"{name} must be at most 2^53 = {_EXACT} (larger integers are "
                         f"not exact as floats), got {arr.max()!r}")
    return np.unique(arr.astype(np.int64))


def pareto_mask(time: ArrayLike, cost: ArrayLike) -> np.ndarray:
    """True where no other point is at least as fast and as cheap and better in one.

    Ties (identical time and cost) are all kept. O(k log k).

    >>> pareto_mask([1.0, 2.0, 3.0, 2.0], [3.0, 2.0, 1.0, 3.0]).tolist()
    [True, True, True, False]
    """
    t = as_array(time, "time", ndim=1)
    c = as_array(cost, "cost", ndim=1)
    if t.shape != c.shape:
        raise InputError(f"time and cost must have the same shape, got {t.shape}, {c.shape}")
    order = np.lexsort((c, t))  # by time, then cost
    mask = np.zeros(t.shape, dtype=bool)
    best_cost = np.inf
    best_time = np.nan
    for i in order:
        if c[i] < best_cost:
            mask[i] = True
            best_cost, best_time = c[i], t[i]
        elif c[i] == best_cost and t[i] == best_time:
            mask[i] = True  # exact tie with a frontier point
    return mask


@dataclass(frozen=True, repr=False, eq=False)
class Plan(TableResult):
    """Every feasible (batch size, devices) pair of a target (the result of `plan`).

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per pair (columns documented in `plan`).
    b_crit : float
        The critical batch size of the tradeoff planned for.
    throughput_model : bool
        Whether step times came from a fitted throughput model.
    n_pairs : int
        Rows of ``frame`` (read from it).
    n_pareto : int
        Rows on the time/cost frontier (read from ``frame``).
    """

    b_crit: float
    throughput_model: bool
    derived = ("n_pairs", "n_pareto")

    @property
    def n_pairs(self) -> int:
        return len(self.frame)

    @property
    def n_pareto(self) -> int:
        return int(self.frame["pareto"].sum())

    def frontier(self) -> Any:
        """`frontier` of this plan: its Pareto rows, fastest first."""
        return frontier(self)

    def frontier_bend(self) -> Any:
        """`frontier_bend` of this plan: the frontier row where time × cost is least."""
        return frontier_bend(self)


def _whole_split(share: int, cap: int) -> int:
    """The fewest micro-batches ``k`` that split ``share`` examples into equal whole
    micro-batches of at most ``cap``."""
    k = max(1, -(-share // cap))
    while share % k:
        k += 1
    return k


@validate_params(tradeoff=instance_of(Tradeoff), hardware=instance_of(Hardware),
                 batch_sizes=_COUNT, devices="devices")
def plan(
    tradeoff: Tradeoff,
    hardware: Hardware | None = None,
    *,
    batch_sizes: Sequence[int] | None = None,
    devices: Sequence[int] | None = None,
    throughput_model: Any = None,
) -> Plan:
    """Every feasible (batch size, devices) pair with its steps, time and cost.

    Parameters
    ----------
    tradeoff : Tradeoff
        $S(B)$ and $E(B)$ of the target.
    hardware : Hardware, optional
        Default ``Hardware()``.
    batch_sizes : sequence of int, optional
        Global batch sizes to consider. Default: powers of two from
        $B_{crit}/1024$ (at least 1) to $1024\\,B_{crit}$, capped at
        ``max_device_batch * max_devices``.
    devices : sequence of int, optional
        Device counts to consider. Default: powers of two up to ``max_devices``.
    throughput_model : ThroughputModel, optional
        Step times from a model fitted to measured timings
        (`empirical_batch.throughput.fit_throughput`) instead of ``hardware``'s
        fixed throughput and communication terms. A per-device share above
        ``max_device_batch`` is then reached by gradient accumulation
        (the fewest micro-batches ``k >= ceil(B / (n * max_device_batch))`` that split
        the share into equal whole ones), and the table gains
        the columns ``accumulation`` and ``saturated`` (the micro-batch reaches 90 % of
        the device's compute throughput, `ThroughputModel.saturating_micro_batch`).

    Returns
    -------
    Plan
        Its ``frame`` has one row per feasible pair, sorted by batch size then devices,
        with columns
        ``batch_size, devices, device_batch, steps, examples, step_seconds,
        wall_hours, device_hours, cost, pareto``. A pair is feasible when
        ``devices <= max_devices``, ``devices <= batch_size`` (each device holds at
        least one example), ``batch_size`` a multiple of ``devices`` (a whole
        per-device batch) and ``batch_size / devices <= max_device_batch``; the
        others are not listed. ``pareto`` marks the rows no other row beats on
        both wall time and cost.

    Raises
    ------
    ValueError
        If no pair is feasible.

    Examples
    --------
    >>> p = plan(Tradeoff(s_min=1000, e_min=64000), Hardware(max_device_batch=64))
    >>> bool(p.frame.pareto.any()), list(p.frame.columns[:3])
    (True, ['batch_size', 'devices', 'device_batch'])
    """
    import pandas as pd

    hw = Hardware() if hardware is None else hardware
    capacity = hw.max_device_batch * hw.max_devices
    if batch_sizes is None:
        bs = _powers_of_two(tradeoff.b_crit / 1024, min(tradeoff.b_crit * 1024, capacity))
        bs = bs[bs <= capacity].astype(np.int64)
    else:
        bs = _int_list(batch_sizes, "batch_sizes")
    if devices is None:
        ns = _powers_of_two(1, hw.max_devices)
        ns = ns[ns <= hw.max_devices].astype(np.int64)
    else:
        ns = _int_list(devices, "devices")
    b_grid, n_grid = (x.ravel() for x in np.meshgrid(bs, ns, indexing="ij"))
    # every device holds a whole, equal share of the batch
    ok = (n_grid <= hw.max_devices) & (n_grid <= b_grid) & (b_grid % n_grid == 0)
    if throughput_model is None:
        ok &= b_grid <= hw.max_device_batch * n_grid
    if not np.any(ok):
        raise InputError(
            "no feasible (batch_size, devices) pair: need batch_size a multiple of devices "
            f"(a whole per-device batch), devices <= max_devices={hw.max_devices} and "
            f"batch_size/devices <= max_device_batch={hw.max_device_batch}"
        )
    b = b_grid[ok].astype(float)
    n = n_grid[ok].astype(float)
    steps = np.asarray(tradeoff.steps(b), dtype=float)
    if throughput_model is None:
        step_s = np.asarray(hw.step_seconds(b, n), dtype=float)
    else:
        # the fewest micro-batches of a whole size that fit: a divisor of the share
        k = np.array([_whole_split(int(share), hw.max_device_batch)
                      for share in b / n], dtype=float)
        micro = b / (n * k)
        step_s = np.asarray(throughput_model.step_seconds(micro, n, k), dtype=float)
    wall = steps * step_s / 3600.0
    dev_h = wall * n
    cost = dev_h * hw.price_per_device_hour
    df = pd.DataFrame(
        {
            "batch_size": b_grid[ok],
            "devices": n_grid[ok],
            "device_batch": b / n,
            "steps": steps,
            "examples": b * steps,
            "step_seconds": step_s,
            "wall_hours": wall,
            "device_hours": dev_h,
            "cost": cost,
        }
    )
    bad = ~np.isfinite(df[["steps", "examples", "step_seconds", "wall_hours", "cost"]]
                       .to_numpy())
    if bad.any():
        row = df.loc[bad.any(axis=1)].iloc[0]
        raise InputError(
            f"the plan's times or costs exceed the largest float at batch_size="
            f"{row['batch_size']:g}, devices={row['devices']:g}: the tradeoff, batch_sizes "
            "or hardware values are too large")
    df["pareto"] = pareto_mask(df["wall_hours"].to_numpy(), df["cost"].to_numpy())
    cols = list(_COLUMNS)
    if throughput_model is not None:
        df["accumulation"] = k.astype(np.int64)
        df["saturated"] = micro >= throughput_model.saturating_micro_batch()
        cols += ["accumulation", "saturated"]
    table = df[cols].reset_index(drop=True)
    return Plan(frame=table, b_crit=float(tradeoff.b_crit),
                throughput_model=throughput_model is not None)


def frontier(df: Plan | pd.DataFrame) -> pd.DataFrame:
    """The Pareto rows of a `plan` result (or its table), fastest first."""
    frame: pd.DataFrame = unwrap_table(df)
    _check_plan(frame)
    rows: pd.DataFrame = frame[frame["pareto"]]
    return rows.sort_values(["wall_hours", "cost"]).reset_index(drop=True)


def frontier_bend(df: Plan | pd.DataFrame) -> pd.Series:
    r"""The frontier row where time × cost is smallest: the bend of the frontier.

    On the frontier $\log\text{cost}$ against $\log\text{time}$ falls with
    slope steeper than −1 on the slow side and flatter on the fast side; the
    product time × cost is smallest where the slope is −1. Without overheads this
    is $B = B_{crit}$ (since $d\log E/d\log S = -B/B_{crit}$); overheads
    move it. Returns a ``pandas.Series`` (one row of `frontier`).
    """
    f = frontier(unwrap_table(df))
    return f.iloc[int(np.argmin(f["wall_hours"].to_numpy() * f["cost"].to_numpy()))]


def _check_plan(df: object) -> None:
    missing = [c for c in _COLUMNS if c not in getattr(df, "columns", [])]
    if missing:
        raise InputError(f"df is not a plan() table: missing columns {missing}")
