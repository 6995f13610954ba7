r"""From sweep logs to the critical batch size (McCandlish et al. 2018, §2.3 and §3).

Pipeline: a :class:`~empirical_batch.sweeps.Sweep` →
:func:`steps_to_target` (steps/examples to first reach a target, best
hyper-parameters per batch size) → :func:`fit_tradeoff` (the hyperbola
:math:`S(B) = S_{min}(1 + B_{crit}/B)`, eq. 2.11–2.12, with a bootstrap
interval) → :func:`critical_batch_curve` (:math:`B_{crit}` as a function of the
target) → :func:`fit_power_law` (e.g. Kaplan et al. 2020,
:math:`B_{crit}(L) = B_*/L^{1/\alpha_B}`). :func:`fit_lr_scaling` fits the
learning-rate law :math:`\epsilon(B) = \epsilon_*/(1 + B_*/B)^\alpha` (App. C, E).

How the tradeoff is fitted
--------------------------
In log space: minimise :math:`\sum_i [\log S_i - \log S_{min} - \log(1 + B_{crit}/B_i)]^2`
(identical to fitting :math:`\log E_i` since :math:`E_i = B_i S_i`), subject to
:math:`S_{min} \le \min_i S_i` and :math:`E_{min} \le \min_i E_i`. For fixed
:math:`B_{crit}` the best :math:`\log S_{min}` is a mean (clipped to the bounds), so
the objective is profiled over a log-spaced grid of :math:`B_{crit}` (spacing
< 1 %) with one matrix product for *all* bootstrap draws at once, then refined
by parabolic interpolation (bootstrap draws) or a bounded scalar minimisation
(point estimate). No optimizer runs per bootstrap draw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy import optimize, stats

from ._validate import as_array, as_float, check_positive
from .sweeps import Sweep, load_sweep
from .tradeoff import Tradeoff

__all__ = [
    "LRRecommendation",
    "LRScalingFit",
    "PowerLaw",
    "TradeoffFit",
    "critical_batch_curve",
    "fit_lr_scaling",
    "fit_power_law",
    "fit_tradeoff",
    "steps_to_target",
]

_COMBINE = ("mean", "median", "min")
_GRID_PAD_DECADES = 3.0  # B_crit searched within [min B / 10^3, max B · 10^3]
_GRID_PER_DECADE = 250  # log10 spacing 0.004 (0.9 %) before refinement


# --------------------------------------------------------------------------- steps


@dataclass(frozen=True, eq=False)
class _Prepared:
    """Sorted numpy views of a sweep, reused across targets."""

    run_code: np.ndarray  # int per row, rows sorted by (run, step)
    step: np.ndarray
    examples: np.ndarray
    value: np.ndarray  # metric oriented so that lower is better
    run_start: np.ndarray  # first row of each run
    runs: pd.DataFrame  # one row per run code: run, batch_size, config columns, diverged
    diverged: np.ndarray  # bool per run code
    cfg_code: np.ndarray  # configuration (batch size × config columns) of each run
    cfg_info: pd.DataFrame  # one row per configuration: batch_size, learning_rate, config
    cfg_order: np.ndarray  # run codes sorted by configuration
    cfg_start: np.ndarray  # slice bounds into cfg_order, length n_cfg + 1
    config: tuple[str, ...]
    higher_is_better: bool
    metric_name: str


def _as_sweep(sweep) -> Sweep:
    if isinstance(sweep, Sweep):
        return sweep
    if isinstance(sweep, pd.DataFrame):
        return load_sweep(sweep)
    raise TypeError(f"sweep must be a Sweep or a DataFrame, got {type(sweep).__name__}")


def _prepare(sweep: Sweep, config) -> _Prepared:
    config = (config,) if isinstance(config, str) else tuple(config)
    d = sweep.data
    for c in config:
        if c not in d.columns:
            raise KeyError(f"config column {c!r} not in the sweep; columns are {list(d.columns)}")
    codes, uniques = pd.factorize(d["run"], sort=False)
    order = np.lexsort((d["step"].to_numpy(), codes))
    codes = codes[order]
    value = d["metric"].to_numpy(dtype=float)[order]
    if sweep.higher_is_better:
        value = -value
    start = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    bad = ~np.isfinite(value)
    diverged = np.zeros(len(uniques), dtype=bool)
    diverged[np.unique(codes[bad])] = True
    first_rows = order[start]
    cols = list(dict.fromkeys(["run", "batch_size", "learning_rate", *config]))
    runs = d.iloc[first_rows][cols].reset_index(drop=True)
    runs["diverged"] = diverged[codes[start]]
    keys = list(dict.fromkeys(["batch_size", *config]))
    cfg_code = runs.groupby(keys, sort=True, dropna=False).ngroup().to_numpy()
    n_cfg = int(cfg_code.max()) + 1
    cfg_order = np.argsort(cfg_code, kind="stable")
    counts = np.bincount(cfg_code, minlength=n_cfg)
    first = cfg_order[np.r_[0, np.cumsum(counts)[:-1]]]
    info_cols = list(dict.fromkeys(["batch_size", "learning_rate", *config]))
    cfg_info = runs.iloc[first][info_cols].reset_index(drop=True)
    cfg_info["n_runs"] = counts
    return _Prepared(
        diverged=runs["diverged"].to_numpy(),
        cfg_code=cfg_code,
        cfg_info=cfg_info,
        cfg_order=cfg_order,
        cfg_start=np.r_[0, np.cumsum(counts)],
        run_code=codes,
        step=d["step"].to_numpy(dtype=float)[order],
        examples=d["examples"].to_numpy(dtype=float)[order],
        value=value,
        run_start=start,
        runs=runs,
        config=config,
        higher_is_better=sweep.higher_is_better,
        metric_name=sweep.metric_name,
    )


def _interp(lo, hi, frac):
    """Interpolate linearly in log space where both ends are > 0, else linearly."""
    out = lo + frac * (hi - lo)
    pos = (lo > 0) & (hi > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        logv = np.exp(np.log(np.where(pos, lo, 1.0)) + frac * (
            np.log(np.where(pos, hi, 1.0)) - np.log(np.where(pos, lo, 1.0))))
    return np.where(pos, logv, out)


def _per_run(p: _Prepared, target: float) -> dict[str, np.ndarray]:
    """Steps/examples at which each run first reaches ``target`` (NaN when never)."""
    t = -target if p.higher_is_better else target
    n_runs = len(p.runs)
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


def _combine(values: np.ndarray, how: str, axis=-1):
    if how == "mean":
        return np.mean(values, axis=axis)
    if how == "median":
        return np.median(values, axis=axis)
    return np.min(values, axis=axis)


def _config_table(p: _Prepared, pr: dict, combine: str) -> pd.DataFrame:
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


def _seeds_of(p: _Prepared, pr: dict, c: int) -> tuple[np.ndarray, np.ndarray, int]:
    runs = p.cfg_order[p.cfg_start[c]:p.cfg_start[c + 1]]
    runs = runs[pr["reached"][runs]]
    return pr["steps"][runs], pr["examples"][runs], int(pr["at_first_point"][runs].sum())


def steps_to_target(
    sweep,
    target: float,
    *,
    combine: str = "mean",
    config: str | Sequence[str] = "learning_rate",
) -> pd.DataFrame:
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

    Returns
    -------
    pandas.DataFrame
        One row per batch size, sorted: ``batch_size``, ``learning_rate`` (of the best
        configuration), ``steps``, ``examples``, ``reached`` (``False`` rows have NaN
        steps: no configuration reached the target), ``n_runs`` (seeds behind the
        best configuration), ``n_configs``, ``n_configs_reached``, ``n_diverged``,
        ``n_at_first_point``, ``seed_steps``/``seed_examples`` (tuples, used for the
        bootstrap of :func:`fit_tradeoff`) and the config columns. ``attrs`` holds
        ``target``, ``metric_name``, ``higher_is_better``, ``combine``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"run": ["a"] * 3, "batch_size": 8, "learning_rate": 0.1,
    ...                    "step": [1, 10, 100], "metric": [3.0, 2.0, 1.0]})
    >>> steps_to_target(df, 1.5)[["batch_size", "steps", "examples", "reached"]]
       batch_size      steps    examples  reached
    0         8.0  31.622777  252.982213     True
    """
    sweep = _as_sweep(sweep)
    target = as_float(target, "target")
    if combine not in _COMBINE:
        raise ValueError(f"combine must be one of {_COMBINE}, got {combine!r}")
    return _steps_table(_prepare(sweep, config), target, combine)


def _steps_table(p: _Prepared, target: float, combine: str) -> pd.DataFrame:
    pr = _per_run(p, target)
    cfg_cols = [c for c in p.config if c not in ("learning_rate", "batch_size")]
    ct = _config_table(p, pr, combine)
    b_all = ct["batch_size"].to_numpy()
    sizes, b_idx = np.unique(b_all, return_inverse=True)
    n_configs = np.bincount(b_idx, minlength=len(sizes))
    n_ok = np.bincount(b_idx, weights=ct["reached"].to_numpy(), minlength=len(sizes))
    n_div = np.bincount(b_idx, weights=ct["n_diverged"].to_numpy(), minlength=len(sizes))
    st = ct["steps"].to_numpy()
    order = np.lexsort((np.where(np.isfinite(st), st, np.inf), b_idx))
    first = order[np.r_[True, b_idx[order][1:] != b_idx[order][:-1]]]  # best per size
    rows = []
    for j, c in enumerate(first):
        base = {"batch_size": float(sizes[j]), "n_configs": int(n_configs[j]),
                "n_configs_reached": int(n_ok[j]), "n_diverged": int(n_div[j])}
        if ct["reached"].iat[c]:
            s_seeds, e_seeds, n_first = _seeds_of(p, pr, int(c))
            rows.append({
                **base,
                "learning_rate": ct["learning_rate"].iat[c],
                "steps": st[c],
                "examples": ct["examples"].iat[c],
                "reached": True,
                "n_runs": int(ct["n_runs"].iat[c]),
                "n_at_first_point": n_first,
                "seed_steps": tuple(s_seeds.tolist()),
                "seed_examples": tuple(e_seeds.tolist()),
                **{k: ct[k].iat[c] for k in cfg_cols},
            })
        else:
            rows.append({
                **base, "learning_rate": np.nan, "steps": np.nan, "examples": np.nan,
                "reached": False, "n_runs": 0, "n_at_first_point": 0,
                "seed_steps": (), "seed_examples": (), **{k: None for k in cfg_cols},
            })
    cols = ["batch_size", "learning_rate", "steps", "examples", "reached", "n_runs",
            "n_configs", "n_configs_reached", "n_diverged", "n_at_first_point",
            "seed_steps", "seed_examples", *cfg_cols]
    out = pd.DataFrame(rows, columns=cols)
    finite = p.value[np.isfinite(p.value)]
    best = float(finite.min()) if finite.size else math.nan
    out.attrs.update(target=target, metric_name=p.metric_name,
                     higher_is_better=p.higher_is_better, combine=combine,
                     best_metric=-best if p.higher_is_better else best)
    return out


# --------------------------------------------------------------------------- tradeoff


def _profile_grid(log_b: np.ndarray, per_decade: int = _GRID_PER_DECADE) -> np.ndarray:
    lo = log_b.min() / math.log(10) - _GRID_PAD_DECADES
    hi = log_b.max() / math.log(10) + _GRID_PAD_DECADES
    n = math.ceil((hi - lo) * per_decade) + 1
    return np.linspace(lo, hi, n) * math.log(10)


def _rss_at(Y: np.ndarray, log_b: np.ndarray, log_c: np.ndarray, bounded: bool = True):
    """RSS and bounded log S_min of each row of Y (D, n) at its own log B_crit.

    ``log_c`` has shape (D,) or (D, K) (K candidate values per row)."""
    lc = np.asarray(log_c, dtype=float)
    squeeze = lc.ndim == 1
    if squeeze:
        lc = lc[:, None]
    F = np.logaddexp(0.0, lc[:, :, None] - log_b[None, None, :])  # (D, K, n)
    R = Y[:, None, :] - F
    lsm = R.mean(2)
    if bounded:
        lsm = np.minimum(lsm, Y.min(1)[:, None])
        lsm = np.minimum(lsm, (Y + log_b).min(1)[:, None] - lc)
    rss = np.sum((R - lsm[:, :, None]) ** 2, axis=2)
    return (rss[:, 0], lsm[:, 0]) if squeeze else (rss, lsm)


def _profile_rss(Y: np.ndarray, log_b: np.ndarray, log_c: np.ndarray, bounded: bool = True):
    """RSS and bounded log S_min for every (row of Y, grid point); Y is (D, n) log steps.

    One matrix product: RSS = Σy² − 2 y·f + Σf² − 2 lsm Σ(y − f) + n lsm²."""
    n = Y.shape[1]
    F = np.logaddexp(0.0, log_c[:, None] - log_b[None, :])  # log(1 + c/B), (G, n)
    sy = Y.sum(1)
    syy = np.einsum("ij,ij->i", Y, Y)
    yf = np.einsum("dn,gn->dg", Y, F)  # (D, G); einsum avoids BLAS threads on tiny products
    sf = F.sum(1)
    sff = np.einsum("ij,ij->i", F, F)
    lsm = (sy[:, None] - sf[None, :]) / n
    bound_s = Y.min(1)[:, None]
    bound_e = (Y + log_b).min(1)[:, None] - log_c[None, :]
    if bounded:
        lsm = np.minimum(lsm, np.minimum(bound_s, bound_e))
    rss = syy[:, None] - 2.0 * yf + sff[None, :] - 2.0 * lsm * (sy[:, None] - sf[None, :])
    rss += n * lsm * lsm
    return rss, lsm


_COARSE_PER_DECADE = 20
_FINE_POINTS = 17


def _fit_many(Y: np.ndarray, log_b: np.ndarray, bounded: bool = True) -> np.ndarray:
    """Best log B_crit per row of Y: coarse grid (20/decade), a local fine grid of 17
    points over ±1 coarse step, then parabolic interpolation; no optimizer per row."""
    coarse = _profile_grid(log_b, _COARSE_PER_DECADE)
    rss, _ = _profile_rss(Y, log_b, coarse, bounded)
    k = np.argmin(rss, axis=1)
    hc = coarse[1] - coarse[0]
    offs = np.linspace(-hc, hc, _FINE_POINTS)
    local = np.clip(coarse[k][:, None] + offs[None, :], coarse[0], coarse[-1])
    rl, _ = _rss_at(Y, log_b, local, bounded)
    j = np.argmin(rl, axis=1)
    h = offs[1] - offs[0]
    inner = (j > 0) & (j < _FINE_POINTS - 1)
    jj = np.clip(j, 1, _FINE_POINTS - 2)
    r = np.arange(len(j))
    y0, y1, y2 = rl[r, jj - 1], rl[r, jj], rl[r, jj + 1]
    denom = y0 - 2.0 * y1 + y2
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.where(denom > 0, 0.5 * (y0 - y2) / denom, 0.0)
    delta = np.clip(delta, -1.0, 1.0)
    best = np.where(inner, local[r, jj] + delta * h, local[r, j])
    return np.clip(best, coarse[0], coarse[-1])


def _lsm_at(y, log_b, log_c, bounded=True):
    f = np.logaddexp(0.0, log_c - log_b)
    if not bounded:
        return float(np.mean(y - f))
    return min(np.mean(y - f), y.min(), (y + log_b).min() - log_c)


def _fit_point(y: np.ndarray, log_b: np.ndarray, grid: np.ndarray, bounded: bool = True):
    """(log B_crit, log S_min, interior, profile RSS on grid) of the point fit."""
    rss, _ = _profile_rss(y[None, :], log_b, grid, bounded)
    k = int(np.argmin(rss[0]))
    interior = 0 < k < len(grid) - 1
    if interior:
        def obj(lc):
            f = np.logaddexp(0.0, lc - log_b)
            return float(np.sum((y - f - _lsm_at(y, log_b, lc, bounded)) ** 2))

        res = optimize.minimize_scalar(
            obj, bounds=(grid[k - 1], grid[k + 1]), method="bounded",
            options={"xatol": 1e-10})
        lc = float(res.x) if res.fun <= rss[0, k] else float(grid[k])
    else:
        lc = float(grid[k])
    return lc, float(_lsm_at(y, log_b, lc, bounded)), interior, rss[0]


def _profile_interval(grid, prof, rss_min, dof, crit):
    """{c : (RSS(c) − RSS_min) / (RSS_min/dof) ≤ crit} on the grid, as (lo, hi) in B_crit;
    0 or inf where the set reaches the end of the searched range (not identified)."""
    scale = max(rss_min / dof, 1e-300)
    stat = (prof - rss_min) / scale
    inside = np.flatnonzero(stat <= crit)
    if inside.size == 0:  # grid too coarse around a very sharp minimum
        k = int(np.argmin(prof))
        return math.exp(grid[k]), math.exp(grid[k])
    i0, i1 = inside[0], inside[-1]

    def cross(i_in, i_out):
        s_in, s_out = stat[i_in], stat[i_out]
        w = (crit - s_in) / (s_out - s_in) if s_out != s_in else 0.0
        return math.exp(grid[i_in] + w * (grid[i_out] - grid[i_in]))

    lo = 0.0 if i0 == 0 else cross(i0, i0 - 1)
    hi = math.inf if i1 == len(grid) - 1 else cross(i1, i1 + 1)
    return lo, hi


@dataclass(frozen=True)
class TradeoffFit:
    r"""A fitted tradeoff :math:`S(B) = S_{min}(1 + B_{crit}/B)` with bootstrap intervals.

    Attributes
    ----------
    s_min, e_min, b_crit : float
        Point estimates; ``b_crit = e_min / s_min``.
    b_crit_ci : tuple of float
        Interval at level ``ci_level`` (see ``interval`` in :func:`fit_tradeoff`).
    s_min_ci, e_min_ci : tuple of float
        Percentile bootstrap intervals at level ``ci_level``.
    bootstrap : str
        ``"seeds"`` (seeds resampled within each batch size) or ``"residuals"``
        (log-residuals resampled, used when a batch size has a single value).
    batch_sizes, steps, log_residuals : tuple of float
        The fitted points (seeds combined) and :math:`\log S_i - \log \hat S(B_i)`.
    n_below, n_above : int
        Batch sizes below / above :math:`B_{crit}`.
    extrapolation : bool
        ``True`` when :math:`B_{crit}` lies outside the measured batch-size range
        (it is then an extrapolation of the fitted curve, not a measurement).
    bound : str
        With ``bounded=True``, the constraint active at the optimum (``"none"``,
        ``"s_min <= min S"`` or ``"e_min <= min E"``); unbounded fits that exceed a
        bound say so (``"unbounded: s_min > min S"``).
    unreached_batch_sizes : tuple of float
        Batch sizes in the input table that did not reach the target (not fitted).
    """

    s_min: float
    e_min: float
    b_crit: float
    b_crit_ci: tuple[float, float]
    s_min_ci: tuple[float, float]
    e_min_ci: tuple[float, float]
    ci_level: float
    bootstrap: str
    n_boot: int
    batch_sizes: tuple[float, ...]
    steps: tuple[float, ...]
    log_residuals: tuple[float, ...]
    log_rmse: float
    n_batch_sizes: int
    n_below: int
    n_above: int
    extrapolation: bool
    bound: str
    unreached_batch_sizes: tuple[float, ...] = ()
    target: float | None = None

    @property
    def tradeoff(self) -> Tradeoff:
        """The fitted curve as a :class:`~empirical_batch.tradeoff.Tradeoff`."""
        return Tradeoff(self.s_min, self.e_min)

    @property
    def b_crit_lo(self) -> float:
        return self.b_crit_ci[0]

    @property
    def b_crit_hi(self) -> float:
        return self.b_crit_ci[1]

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        """Per batch size: measured steps/examples, fitted values, log-residual."""
        b = np.asarray(self.batch_sizes)
        s = np.asarray(self.steps)
        return pd.DataFrame({
            "batch_size": b, "steps": s, "examples": s * b,
            "steps_fit": self.tradeoff.steps(b), "examples_fit": self.tradeoff.examples(b),
            "log_residual": np.asarray(self.log_residuals),
        })

    def __str__(self) -> str:
        lo, hi = self.b_crit_ci
        flag = " (extrapolated)" if self.extrapolation else ""
        return (
            f"B_crit = {self.b_crit:.4g} [{lo:.4g}, {hi:.4g}] ({self.ci_level:.0%} {self.bootstrap}"
            f" bootstrap){flag}; S_min = {self.s_min:.4g}, E_min = {self.e_min:.4g}; "
            f"{self.n_batch_sizes} batch sizes ({self.n_below} below, {self.n_above} above "
            f"B_crit), log-RMSE {self.log_rmse:.3g}"
        )


def _seed_groups(table: pd.DataFrame) -> tuple[np.ndarray, list[np.ndarray]]:
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


def fit_tradeoff(
    table: pd.DataFrame,
    *,
    ci: float = 0.95,
    n_boot: int = 1000,
    seed=0,
    combine: str | None = None,
    bootstrap: str = "auto",
    interval: str = "profile",
    bounded: bool = False,
) -> TradeoffFit:
    r"""Fit :math:`S(B) = S_{min}(1 + B_{crit}/B)` (eq. 2.11) in log space, with a bootstrap.

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``batch_size`` and ``steps`` (or ``examples``, then
        ``steps = examples / batch_size``). Either one row per batch size (e.g. the
        output of :func:`steps_to_target`, whose ``seed_steps`` tuples give the
        seeds) or one row per seed (repeated batch sizes). Rows with
        ``reached == False`` are not fitted and are listed in
        ``unreached_batch_sizes``.
    ci : float
        Level of the percentile intervals.
    n_boot : int
        Bootstrap draws (all fitted at once, vectorised).
    seed : int or numpy.random.Generator
    combine : {"mean", "median", "min"}, optional
        How seeds are combined per batch size; default the table's
        ``attrs["combine"]`` or ``"mean"``.
    bootstrap : {"auto", "seeds", "residuals"}
        ``"seeds"`` resamples seeds within each batch size (needs ≥ 2 at every
        batch size); ``"residuals"`` resamples the point fit's log-residuals
        (scaled by :math:`\sqrt{n/(n-2)}` for the two fitted parameters);
        ``"auto"`` picks seeds when available.
    interval : {"profile", "f", "percentile"}
        How ``b_crit_ci`` is formed from the draws. ``"profile"`` (default): the
        profile-likelihood set :math:`\{B : F(B) \le c\}` with
        :math:`F(B) = [\mathrm{RSS}(B) - \mathrm{RSS}_{min}]/[\mathrm{RSS}_{min}/(n-2)]`
        and the critical value :math:`c` calibrated as the ``ci`` quantile of the same
        statistic over the bootstrap draws (evaluated at the point estimate) — a
        bootstrap-calibrated likelihood-ratio interval, nearly pivotal, so it keeps
        close to nominal coverage with few seeds or batch sizes, where plain
        percentile intervals under-cover. An end is 0 or ``inf`` when the set reaches
        the edge of the searched range (:math:`B_{crit}` not bounded by the data).
        ``"f"``: the same set with :math:`c` the F(1, n − 2) quantile (exact for
        Gaussian log-errors, no bootstrap needed). ``"percentile"``: quantiles of the
        bootstrap :math:`B_{crit}` (under-covers with few points: 0.80–0.85 at nominal
        0.90 in ``benchmarks/coverage_fit.py``, against 0.87–0.90 for ``"profile"``).
    bounded : bool
        Constrain :math:`S_{min} \le \min_i S_i` and :math:`E_{min} \le \min_i E_i`.
        Off by default: with scatter the constraint binds in most fits (a noisy
        large-batch point lies below the asymptote) and biases :math:`B_{crit}`
        upwards (+3.5 % to +7.5 % at 15 % log-noise, see ``benchmarks/coverage_fit.py``);
        without it the log-space least-squares fit is unbiased. ``bound`` in the
        result reports whether the constraint was active.
        ``s_min_ci`` and ``e_min_ci`` are always percentile intervals.

    Raises
    ------
    ValueError
        Fewer than 3 batch sizes reached the target, non-positive steps, bad options.

    Examples
    --------
    >>> import pandas as pd
    >>> from empirical_batch.tradeoff import Tradeoff
    >>> t = Tradeoff(s_min=1000, e_min=64000)
    >>> b = [8, 16, 32, 64, 128, 256, 512]
    >>> fit = fit_tradeoff(pd.DataFrame({"batch_size": b, "steps": t.steps(b)}), n_boot=50)
    >>> round(fit.b_crit, 6), round(fit.s_min, 6)
    (64.0, 1000.0)
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    if "batch_size" not in table.columns or not (
        "steps" in table.columns or "examples" in table.columns
    ):
        raise ValueError(
            "table needs a 'batch_size' column and a 'steps' or 'examples' column; "
            f"got {list(table.columns)}"
        )
    ci = as_float(ci, "ci")
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    if not isinstance(n_boot, int | np.integer) or n_boot < 0:
        raise ValueError(f"n_boot must be a non-negative int, got {n_boot!r}")
    combine = combine or table.attrs.get("combine", "mean")
    if combine not in _COMBINE:
        raise ValueError(f"combine must be one of {_COMBINE}, got {combine!r}")
    if bootstrap not in ("auto", "seeds", "residuals"):
        raise ValueError(f"bootstrap must be 'auto', 'seeds' or 'residuals', got {bootstrap!r}")
    if interval not in ("profile", "f", "percentile"):
        raise ValueError(f"interval must be 'profile', 'f' or 'percentile', got {interval!r}")
    check_positive(table["batch_size"].to_numpy(dtype=float), "table['batch_size']")
    unreached: tuple[float, ...] = ()
    if "reached" in table.columns:
        mask = table["reached"].astype(bool).to_numpy()
        unreached = tuple(sorted(set(table.loc[~mask, "batch_size"].astype(float))))
        table = table.loc[mask]
    b, groups = _seed_groups(table)
    for bi, g in zip(b, groups, strict=True):
        if not np.all(np.isfinite(g)) or np.any(g <= 0):
            raise ValueError(
                f"steps at batch_size={bi:g} must be finite and > 0, got {g.tolist()}; "
                "mark batch sizes that never reached the target with reached=False"
            )
    target = table.attrs.get("target")
    if len(b) < 3:
        raise ValueError(
            f"only {len(b)} batch size(s) reached the target"
            + (f" {target:g}" if target is not None else "")
            + f" ({b.tolist()}; unreached: {list(unreached)}); fitting S_min and B_crit "
            "needs at least 3"
            + (f"; the best value logged by any non-diverged point is "
               f"{table.attrs['best_metric']:g}" if "best_metric" in table.attrs else "")
        )
    sizes = np.array([len(g) for g in groups])
    if bootstrap == "auto":
        bootstrap = "seeds" if np.all(sizes >= 2) else "residuals"
    if bootstrap == "seeds" and np.any(sizes < 2):
        raise ValueError(
            "bootstrap='seeds' needs at least 2 seeds at every batch size; batch sizes "
            f"{b[sizes < 2].tolist()} have one"
        )
    rng = np.random.default_rng(seed)
    log_b = np.log(b)
    y = np.log([float(_combine(g, combine)) for g in groups])
    grid = _profile_grid(log_b)
    lc, lsm, _, prof = _fit_point(y, log_b, grid, bounded)
    fitted = lsm + np.logaddexp(0.0, lc - log_b)
    resid = y - fitted
    n = len(b)
    rss_min = float(np.sum(resid**2))

    nan2 = (math.nan, math.nan)
    b_ci = s_ci = e_ci = nan2
    if n_boot > 0:
        if bootstrap == "seeds":
            # seeds resampled within each batch size and recentred on the fitted curve
            # (x ↦ x·Ŝ(B)/combine(x)), so that the bootstrap world's truth is the fit
            Y = np.empty((n_boot, n))
            for j, g in enumerate(groups):
                idx = rng.integers(0, len(g), size=(n_boot, len(g)))
                Y[:, j] = np.log(_combine(g[idx], combine, axis=1)) - resid[j]
        else:
            centred = resid - resid.mean()
            scale = math.sqrt(n / (n - 2)) if n > 2 else 1.0
            idx = rng.integers(0, n, size=(n_boot, n))
            Y = fitted[None, :] + scale * centred[idx]
        lcs = _fit_many(Y, log_b, bounded)
        rss_d, lsms = _rss_at(Y, log_b, lcs, bounded)
        q = [(1 - ci) / 2, (1 + ci) / 2]
        bc = np.exp(lcs)
        sm = np.exp(lsms)
        s_ci = tuple(float(v) for v in np.quantile(sm, q))
        e_ci = tuple(float(v) for v in np.quantile(sm * bc, q))
        if interval == "percentile":
            b_ci = tuple(float(v) for v in np.quantile(bc, q))
        elif rss_min <= 1e-24 * n:
            b_ci = (math.exp(lc), math.exp(lc))  # exact data: no scatter to calibrate on
        else:
            rss_true, _ = _rss_at(Y, log_b, np.full(n_boot, lc), bounded)
            with np.errstate(divide="ignore", invalid="ignore"):
                stat = (rss_true - rss_d) / (rss_d / (n - 2))
            stat = np.where(np.isfinite(stat), np.maximum(stat, 0.0), np.inf)
            crit = float(np.quantile(stat, ci))
            if interval == "f":
                crit = float(stats.f.ppf(ci, 1, n - 2))
            b_ci = _profile_interval(grid, prof, rss_min, n - 2, crit)

    s_min = math.exp(lsm)
    b_crit = math.exp(lc)
    unc = np.mean(y - np.logaddexp(0.0, lc - log_b))
    if lsm < unc - 1e-12:
        bound = "s_min <= min S" if abs(lsm - y.min()) < 1e-9 else "e_min <= min E"
    else:
        over = [name for name, ok in (("s_min > min S", lsm <= y.min() + 1e-12),
                                      ("e_min > min E", lsm + lc <= (y + log_b).min() + 1e-12))
                if not ok]
        bound = "unbounded: " + ", ".join(over) if over else "none"
    return TradeoffFit(
        s_min=s_min,
        e_min=s_min * b_crit,
        b_crit=b_crit,
        b_crit_ci=b_ci,
        s_min_ci=s_ci,
        e_min_ci=e_ci,
        ci_level=ci,
        bootstrap=bootstrap,
        n_boot=int(n_boot),
        batch_sizes=tuple(b.tolist()),
        steps=tuple(np.exp(y).tolist()),
        log_residuals=tuple(resid.tolist()),
        log_rmse=float(np.sqrt(np.mean(resid**2))),
        n_batch_sizes=n,
        n_below=int(np.sum(b < b_crit)),
        n_above=int(np.sum(b > b_crit)),
        extrapolation=bool(b_crit < b.min() or b_crit > b.max()),
        bound=bound,
        unreached_batch_sizes=unreached,
        target=None if target is None else float(target),
    )


def critical_batch_curve(
    sweep,
    targets,
    *,
    combine: str = "mean",
    config: str | Sequence[str] = "learning_rate",
    ci: float = 0.95,
    n_boot: int = 1000,
    seed=0,
    errors: str = "raise",
    progress: bool = False,
    interval: str = "profile",
    bounded: bool = False,
) -> pd.DataFrame:
    r""":math:`B_{crit}` as a function of the target: one :func:`fit_tradeoff` per target.

    Parameters
    ----------
    sweep : Sweep or DataFrame
    targets : array_like
        Metric values to reach.
    errors : {"raise", "report"}
        What to do with a target that fewer than 3 batch sizes reach: raise, or
        keep the row with NaN estimates and the reason in the ``note`` column.
    progress : bool
        Show a tqdm progress bar over targets.
    combine, config, ci, n_boot, seed, interval, bounded
        As in :func:`steps_to_target` and :func:`fit_tradeoff` (one
        ``numpy.random.Generator`` drives all targets).

    Returns
    -------
    pandas.DataFrame
        Columns ``target, s_min, e_min, b_crit, b_crit_lo, b_crit_hi, n_batch_sizes,
        log_rmse, extrapolation, note``; ``attrs["fits"]`` holds the
        :class:`TradeoffFit` objects (``None`` for reported failures).
    """
    sweep = _as_sweep(sweep)
    targets = as_array(targets, "targets", ndim=(0, 1)).reshape(-1)
    if errors not in ("raise", "report"):
        raise ValueError(f"errors must be 'raise' or 'report', got {errors!r}")
    if combine not in _COMBINE:
        raise ValueError(f"combine must be one of {_COMBINE}, got {combine!r}")
    p = _prepare(sweep, config)
    rng = np.random.default_rng(seed)
    it = targets
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(targets, desc="B_crit per target", unit="target")
    rows, fits = [], []
    for t in it:
        table = _steps_table(p, float(t), combine)
        try:
            fit = fit_tradeoff(table, ci=ci, n_boot=n_boot, seed=rng, combine=combine,
                               interval=interval, bounded=bounded)
        except ValueError as exc:
            if errors == "raise":
                raise ValueError(f"target {t:g}: {exc}") from None
            n_ok = int(table["reached"].sum())
            rows.append({"target": float(t), "s_min": np.nan, "e_min": np.nan,
                         "b_crit": np.nan, "b_crit_lo": np.nan, "b_crit_hi": np.nan,
                         "n_batch_sizes": n_ok, "log_rmse": np.nan,
                         "extrapolation": False, "note": str(exc)})
            fits.append(None)
            continue
        rows.append({
            "target": float(t), "s_min": fit.s_min, "e_min": fit.e_min, "b_crit": fit.b_crit,
            "b_crit_lo": fit.b_crit_ci[0], "b_crit_hi": fit.b_crit_ci[1],
            "n_batch_sizes": fit.n_batch_sizes, "log_rmse": fit.log_rmse,
            "extrapolation": fit.extrapolation,
            "note": f"unreached: {list(fit.unreached_batch_sizes)}"
            if fit.unreached_batch_sizes else "",
        })
        fits.append(fit)
    out = pd.DataFrame(rows)
    out.attrs.update(fits=fits, metric_name=sweep.metric_name,
                     higher_is_better=sweep.higher_is_better)
    return out


# --------------------------------------------------------------------------- power law


@dataclass(frozen=True)
class PowerLaw:
    r""":math:`y = a\,x^{k}` fitted by least squares in log-log space.

    For Kaplan et al.'s :math:`B_{crit}(L) = B_*/L^{1/\alpha_B}`: ``coefficient``
    is :math:`B_*` and ``exponent`` is :math:`-1/\alpha_B`
    (see :attr:`alpha_from_exponent`).
    """

    coefficient: float
    exponent: float
    coefficient_ci: tuple[float, float]
    exponent_ci: tuple[float, float]
    ci_level: float
    log_rmse: float
    n: int

    @property
    def interval(self) -> tuple[float, float]:
        """Confidence interval of the exponent."""
        return self.exponent_ci

    @property
    def alpha_from_exponent(self) -> float:
        r""":math:`\alpha = -1/k` (Kaplan's :math:`\alpha_B` when y = B_crit, x = L)."""
        return -1.0 / self.exponent

    def __call__(self, x):
        x = check_positive(x, "x")
        out = self.coefficient * x**self.exponent
        return float(out) if np.ndim(out) == 0 else out

    def to_dict(self) -> dict:
        return asdict(self)


def fit_power_law(x, y, *, ci: float = 0.95) -> PowerLaw:
    r"""Fit :math:`y = a x^k` by ordinary least squares of :math:`\log y` on :math:`\log x`.

    Intervals are Student-t intervals of the regression (n − 2 degrees of freedom);
    the coefficient's interval is that of :math:`\log a`, exponentiated. They assume
    independent errors: B_crit values fitted at several targets of *one* sweep share
    its runs, their errors are correlated and the interval is then too narrow (bootstrap
    the whole sweep instead, e.g. refit on resampled runs).

    Examples
    --------
    >>> law = fit_power_law([1, 2, 4, 8], [3.0, 6.0, 12.0, 24.0])
    >>> round(law.coefficient, 6), round(law.exponent, 6)
    (3.0, 1.0)
    """
    x = check_positive(as_array(x, "x", ndim=1), "x")
    y = check_positive(as_array(y, "y", ndim=1), "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {len(x)} and {len(y)}")
    if len(x) < 3:
        raise ValueError(f"a power law with an interval needs at least 3 points, got {len(x)}")
    if np.ptp(x) == 0:
        raise ValueError("x must take at least two distinct values")
    ci = as_float(ci, "ci")
    lx, ly = np.log(x), np.log(y)
    n = len(x)
    xm, ym = lx.mean(), ly.mean()
    sxx = np.sum((lx - xm) ** 2)
    k = float(np.sum((lx - xm) * (ly - ym)) / sxx)
    la = ym - k * xm
    resid = ly - la - k * lx
    s2 = float(np.sum(resid**2) / (n - 2))
    t = stats.t.ppf((1 + ci) / 2, n - 2)
    se_k = math.sqrt(s2 / sxx)
    se_a = math.sqrt(s2 * (1 / n + xm**2 / sxx))
    return PowerLaw(
        coefficient=math.exp(la),
        exponent=k,
        coefficient_ci=(math.exp(la - t * se_a), math.exp(la + t * se_a)),
        exponent_ci=(k - t * se_k, k + t * se_k),
        ci_level=ci,
        log_rmse=float(np.sqrt(np.mean(resid**2))),
        n=n,
    )


# --------------------------------------------------------------------------- learning rate


@dataclass(frozen=True)
class LRRecommendation:
    """Learning rate (with interval) and predicted steps/examples at one batch size."""

    batch_size: float
    learning_rate: float
    learning_rate_ci: tuple[float, float]
    steps: float
    examples: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LRScalingFit:
    r"""Fit of :math:`\epsilon(B) = \epsilon_*/(1 + B_*/B)^\alpha` (paper eq. 2.6, App. C/E).

    ``alpha = 1`` for SGD (and momentum), between ½ and 1 for Adam-like optimizers.
    ``tradeoff_fit`` (when the fit was made from a sweep) supplies predicted steps.
    """

    eps_star: float
    b_star: float
    alpha: float
    eps_star_ci: tuple[float, float]
    b_star_ci: tuple[float, float]
    alpha_ci: tuple[float, float]
    ci_level: float
    alpha_fixed: bool
    batch_sizes: tuple[float, ...]
    learning_rates: tuple[float, ...]
    log_residuals: tuple[float, ...]
    refined: tuple[bool, ...]
    tradeoff_fit: TradeoffFit | None = None
    _draws: np.ndarray | None = field(default=None, repr=False, compare=False)

    def learning_rate(self, batch_size):
        r""":math:`\epsilon(B) = \epsilon_*/(1 + B_*/B)^\alpha`."""
        b = check_positive(batch_size, "batch_size")
        out = self.eps_star / (1.0 + self.b_star / b) ** self.alpha
        return float(out) if np.ndim(out) == 0 else out

    def recommend(self, batch_size: float) -> LRRecommendation:
        """Learning rate (bootstrap interval) and, with a tradeoff fit, steps and examples."""
        b = as_float(batch_size, "batch_size")
        if b <= 0:
            raise ValueError(f"batch_size must be > 0, got {b}")
        lr = self.learning_rate(b)
        if self._draws is not None and len(self._draws):
            e, bs, a = self._draws.T
            pred = e / (1.0 + bs / b) ** a
            q = [(1 - self.ci_level) / 2, (1 + self.ci_level) / 2]
            lr_ci = tuple(float(v) for v in np.quantile(pred, q))
        else:
            lr_ci = (math.nan, math.nan)
        if self.tradeoff_fit is not None:
            steps = float(self.tradeoff_fit.tradeoff.steps(b))
            examples = steps * b
        else:
            steps = examples = math.nan
        return LRRecommendation(b, lr, lr_ci, steps, examples)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("_draws", "tradeoff_fit")}
        d["tradeoff_fit"] = None if self.tradeoff_fit is None else self.tradeoff_fit.to_dict()
        return d


def _best_lr_refined(cfg: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best learning rate per batch size; parabola in (log lr, log steps) through the
    best rate and its two neighbours on the grid when both reached the target."""
    bs, lrs, refined = [], [], []
    for b, g in cfg.groupby("batch_size", sort=True):
        g = g.dropna(subset=["learning_rate"]).sort_values("learning_rate")
        ok = g["reached"].to_numpy()
        if not ok.any():
            continue
        steps = np.where(ok, g["steps"].to_numpy(dtype=float), np.inf)
        i = int(np.argmin(steps))
        x = np.log(g["learning_rate"].to_numpy(dtype=float))
        best, ref = x[i], False
        if 0 < i < len(g) - 1 and np.isfinite(steps[i - 1]) and np.isfinite(steps[i + 1]):
            xs, ys = x[i - 1:i + 2], np.log(steps[i - 1:i + 2])
            c2, c1, _ = np.polyfit(xs, ys, 2)
            if c2 > 0:
                v = -c1 / (2 * c2)
                if xs[0] <= v <= xs[2]:
                    best, ref = v, True
        bs.append(float(b))
        lrs.append(math.exp(best))
        refined.append(ref)
    return np.array(bs), np.array(lrs), np.array(refined)


def _lr_profile(Y, log_b, grid, alpha):
    """Per (draw, B* grid point): RSS, intercept a and exponent α of
    log ε = a − α log(1 + B*/B)."""
    n = Y.shape[1]
    X = np.logaddexp(0.0, grid[:, None] - log_b[None, :])  # (G, n)
    ym = Y.mean(1)[:, None]
    xm = X.mean(1)[None, :]
    sxx = np.einsum("ij,ij->i", X, X)[None, :] - n * xm**2
    syy = np.einsum("ij,ij->i", Y, Y)[:, None] - n * ym**2
    sxy = np.einsum("dn,gn->dg", Y, X) - n * ym * xm
    if alpha is None:
        slope = sxy / sxx
        rss = syy - slope * sxy
        a_hat = -slope
    else:
        a_hat = np.full_like(sxy, alpha)
        rss = syy + 2 * alpha * sxy + alpha**2 * sxx
    intercept = ym + a_hat * xm
    return rss, intercept, a_hat


def fit_lr_scaling(
    source,
    target: float | None = None,
    *,
    alpha: float | None = None,
    combine: str = "mean",
    ci: float = 0.95,
    n_boot: int = 1000,
    seed=0,
) -> LRScalingFit:
    r"""Fit :math:`\epsilon(B) = \epsilon_*/(1 + B_*/B)^\alpha` to the best learning rates.

    Parameters
    ----------
    source : Sweep or DataFrame
        A sweep (then ``target`` is required: the best rate per batch size is the one
        reaching the target in fewest steps, refined by a parabola through it and its
        two neighbouring rates in (log ε, log S) when both reached the target), or a
        table with ``batch_size`` and ``learning_rate`` (one best rate per batch size).
    alpha : float, optional
        Fix the exponent (1 for SGD); fitted when ``None``.
    ci, n_boot, seed
        Residual bootstrap (log-residuals, vectorised over a log grid of :math:`B_*`).

    Returns
    -------
    LRScalingFit
        With a :class:`TradeoffFit` attached when ``source`` was a sweep, so that
        ``recommend(B)`` also predicts steps and examples.

    Notes
    -----
    The law is identified only when the best rate changes with batch size. When it
    is the same at every batch size (a coarse learning-rate grid), the fit returns
    α ≈ 0 and a meaningless :math:`B_*`; check ``learning_rates`` first. Intervals
    come from a residual bootstrap and do not include the uncertainty of picking the
    best rate from a grid.
    """
    tradeoff_fit = None
    if isinstance(source, Sweep) or (
        isinstance(source, pd.DataFrame) and "metric" in source.columns
    ):
        if target is None:
            raise ValueError("target is required when fitting learning rates from a sweep")
        sweep = _as_sweep(source)
        p = _prepare(sweep, "learning_rate")
        cfg = _config_table(p, _per_run(p, as_float(target, "target")), combine)
        b, lr, refined = _best_lr_refined(cfg)
        table = _steps_table(p, float(target), combine)
        if int(table["reached"].sum()) >= 3:
            tradeoff_fit = fit_tradeoff(table, ci=ci, n_boot=n_boot, seed=seed)
    elif isinstance(source, pd.DataFrame):
        for c in ("batch_size", "learning_rate"):
            if c not in source.columns:
                raise ValueError(f"table needs column {c!r}; got {list(source.columns)}")
        t = source
        if "reached" in t.columns:
            t = t[t["reached"].astype(bool)]
        b = check_positive(t["batch_size"].to_numpy(dtype=float), "batch_size")
        lr = check_positive(t["learning_rate"].to_numpy(dtype=float), "learning_rate")
        refined = np.zeros(len(b), dtype=bool)
    else:
        raise TypeError(f"source must be a Sweep or DataFrame, got {type(source).__name__}")
    n_par = 2 if alpha is None else 1
    if len(b) < n_par + 2:
        raise ValueError(
            f"fitting the learning-rate law needs at least {n_par + 2} batch sizes with a "
            f"best learning rate, got {len(b)}"
        )
    if alpha is not None:
        alpha = as_float(alpha, "alpha")
    log_b, y = np.log(b), np.log(lr)
    grid = _profile_grid(log_b)
    rss, icpt, al = _lr_profile(y[None, :], log_b, grid, alpha)
    k = int(np.argmin(rss[0]))
    if 0 < k < len(grid) - 1:
        def obj(g):
            r, _, _ = _lr_profile(y[None, :], log_b, np.array([g]), alpha)
            return float(r[0, 0])

        res = optimize.minimize_scalar(obj, bounds=(grid[k - 1], grid[k + 1]),
                                       method="bounded", options={"xatol": 1e-10})
        lbs = float(res.x)
    else:
        lbs = float(grid[k])
    _, icpt, al = _lr_profile(y[None, :], log_b, np.array([lbs]), alpha)
    eps_star, a_fit = math.exp(float(icpt[0, 0])), float(al[0, 0])
    fitted = icpt[0, 0] - a_fit * np.logaddexp(0.0, lbs - log_b)
    resid = y - fitted
    rng = np.random.default_rng(seed)
    n = len(b)
    q = [(1 - ci) / 2, (1 + ci) / 2]
    draws = None
    if n_boot > 0:
        scale = math.sqrt(n / (n - n_par - 1))
        Y = fitted[None, :] + scale * (resid - resid.mean())[rng.integers(0, n, (n_boot, n))]
        rss_b, ic_b, al_b = _lr_profile(Y, log_b, grid, alpha)
        kk = np.argmin(rss_b, axis=1)
        r = np.arange(n_boot)
        draws = np.column_stack([np.exp(ic_b[r, kk]), np.exp(grid[kk]), al_b[r, kk]])
        e_ci, b_ci, a_ci = (tuple(float(v) for v in np.quantile(draws[:, j], q))
                            for j in range(3))
    else:
        e_ci = b_ci = a_ci = (math.nan, math.nan)
    return LRScalingFit(
        eps_star=eps_star, b_star=math.exp(lbs), alpha=a_fit,
        eps_star_ci=e_ci, b_star_ci=b_ci, alpha_ci=a_ci, ci_level=ci,
        alpha_fixed=alpha is not None,
        batch_sizes=tuple(b.tolist()), learning_rates=tuple(lr.tolist()),
        log_residuals=tuple(resid.tolist()), refined=tuple(bool(v) for v in refined),
        tradeoff_fit=tradeoff_fit, _draws=draws,
    )
