r"""The paper's claims, each checked against the harness's result tables.

`claims_table` takes the tables the report writes (``b_crit_vs_noise.csv``,
``table1.csv``, ``one_step.csv``, ``branched.csv``) and returns one row per task,
optimizer and claim with a verdict — ``holds``, ``does not hold`` or ``undecided`` —
and the numbers and intervals behind it. A claim is said to hold only where its
interval supports it; where the interval straddles the threshold it is ``undecided``.
The noise scales (B_simple, B_noise) are single measurements on the reference run; their
sampling error is not propagated (the intervals below are those of B_crit).

The claims (McCandlish et al. 2018, arXiv:1812.06162; Zhang et al. 2019,
arXiv:1907.04164; Merrill et al. 2025, arXiv:2505.23971):

a. **B_simple predicts B_crit within an order of magnitude** (§3, Table 1). For a run
   at fixed batch the model gives $B_{crit}(L) = \int \mathcal B\,ds / \int ds$ up to
   $L$ (App. D; `empirical_batch.validation.fits`), so B_crit at each fitted target is
   compared with the progress-weighted mean of B_simple along the reference run up to
   that target (``b_simple_avg``). Holds when the interval [lo, hi]/B_simple lies inside
   [1/10, 10] at every target where both are known; does not hold when at some target it
   lies entirely outside; else undecided. The same test with B_simple *at* the target
   is listed beside it (``*_local``).
b. **B_crit grows over training** (§3, Table 1: "start" vs "averaged"): growth =
   B_crit(hardest target)/B_crit(loosest target), with the report's interval
   (``b_crit_growth_low``/``_high``: the hull of the per-target combination
   [lo_hard/hi_loose, hi_hard/lo_loose], joint level ≥ 90 %, and the seed bootstrap).
   Holds when the interval lies above 1; does not hold when below; else undecided. The
   paper states no threshold: its own factors (``TABLE1_GROWTH``, from
   ``datasets.mccandlish2018_table1()``) run from 3× (CIFAR-10) to 143× (Billion Word), and
   the evidence says where the measured interval lies against that range. (Our targets
   span a smaller part of training than the paper's start and average, so a smaller
   factor is expected.)
c. **The one-step model fits the measured ε_opt(B) and ΔL_opt(B)** (§2.2, eqs. 2.6–2.7,
   Fig. 2): at each checkpoint and batch size of the one-step experiment the model
   fitted to that checkpoint predicts both; a prediction is consistent with its
   measurement when it lies in the measurement's 95 % interval. With n points and m
   misses, the model is rejected for a quantity when P(Binomial(n, 0.05) ≥ m) < 0.01
   (more misses than sampling error explains). Holds when neither quantity is
   rejected; does not hold when either is; undecided with fewer than 10 points. A point
   whose measurement, interval or prediction is NaN is left out and counted. Only the
   SGD reference run has a one-step experiment; other optimizers are ``not tested``.
d. **Adam reaches a larger B_crit than SGD** (Zhang et al. 2019, §4): at one loss,
   the task's common target (the easiest of the two optimizers' hardest targets,
   ``b_crit_common`` in ``table1.csv``; comparing each at its own hardest target
   would mix the optimizer with the loss). Holds when Adam's interval lies above
   SGD's; does not hold when below; else undecided. One row per task, optimizer
   ``adam vs sgd``.
e. **B_noise is closer to B_crit than B_simple** (§2.2: B_simple = B_noise only when
   H ∝ I; the paper uses B_simple as the cheap stand-in), both averaged up to the target
   as in (a): d(c) = |log c/B_noise| − |log c/B_simple| is monotone in log c, so it is
   decided over the whole interval of B_crit from its two ends: B_noise closer at the
   target when d < 0 at both ends, farther when d > 0 at both. Holds when B_noise is
   closer at every target where both scales are known; does not hold when farther at
   every such target; else undecided (the counts are listed; ``*_local`` with the values
   at the target).
f. **Branched training agrees with the model's keep-up point** (Merrill et al. 2025,
   arXiv:2505.23971, in the one-step model: `empirical_batch.validation.fits.keep_up_point`):
   a branch at kB keeps up with the one at B while kB ≤ B/x + B/2 − 𝓑/2 for SGD branches
   at k·η (x = η/ε_max; 1.5B + 𝓑/2 at η = ε_opt(B), the reference's tuned rate), or
   kB ≤ 2B + 𝓑 for branches at their best rate (used for Adam's √k branches, an
   approximation). The branched bracket [low, high) is compared with that point with
   𝓑 = B_crit (``keep_up``, with the interval of B_crit). Consistent at a checkpoint when
   the two intervals meet; holds when consistent at every checkpoint where B_crit is
   fitted, does not hold when at none, else undecided. *Local*: the 𝓑 the bracket implies
   under the same rule (``b_local_low``/``_high``) against the local B_noise at the
   checkpoint (inside at every checkpoint: holds; at none: does not hold).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import InputError

__all__ = ["CLAIMS", "TABLE1_GROWTH", "claims_table"]

HOLDS, FAILS, UNDECIDED, NOT_TESTED = "holds", "does not hold", "undecided", "not tested"

#: claim id -> statement
CLAIMS = {
    "a": "B_simple (averaged up to the target) predicts B_crit within an order of magnitude",
    "b": "B_crit grows over training (Table 1: start to averaged)",
    "c": "the one-step model fits the measured eps_opt(B) and dL_opt(B)",
    "d": "Adam reaches a larger B_crit than SGD (Zhang et al. 2019)",
    "e": "B_noise is closer to B_crit than B_simple (both averaged up to the target)",
    "f": "the branched bracket meets the model's keep-up point for the branches' rule",
}

#: growth of B_crit from "start" to "averaged" in McCandlish et al. 2018, Table 1
#: (``datasets.mccandlish2018_table1()`` through ``analysis.table1``, a test holds them
#: equal; Atari: geometric midpoints of its ranges over games; Dota 5v5 gives no start value)
TABLE1_GROWTH = {"MNIST": 10.0, "SVHN": 10.0, "CIFAR10": 3.0, "ImageNet": 15.0,
                 "Billion Word": 1e5 / 700, "Autoencoder (SVHN)": 4.0, "VAE (SVHN)": 20.0,
                 "Atari": float(np.sqrt(400 * 8000) / np.sqrt(100 * 1000)),
                 "Dota 1v1": 60.0}

#: one-step misses more frequent than this binomial tail probability reject the model
ONE_STEP_ALPHA = 0.01
#: the nominal level of the one-step experiment's intervals
ONE_STEP_LEVEL = 0.95

COLUMNS = ["task", "optimizer", "claim", "statement", "verdict", "value", "lo", "hi",
           "verdict_local", "value_local", "lo_local", "hi_local", "evidence"]


def _g(x) -> str:
    x = None if x is None else float(x)
    if x is None or not np.isfinite(x):
        return "inf" if (x is not None and np.isposinf(x)) else "nan"
    return f"{x:.3g}"


def _row(task, opt, cid, verdict, value=np.nan, lo=np.nan, hi=np.nan, evidence="",
         local=None):
    row = {"task": task, "optimizer": opt, "claim": cid, "statement": CLAIMS[cid],
           "verdict": verdict, "value": value, "lo": lo, "hi": hi, "evidence": evidence,
           "verdict_local": "", "value_local": np.nan, "lo_local": np.nan,
           "hi_local": np.nan}
    if local is not None:
        row.update({"verdict_local": local["verdict"], "value_local": local["value"],
                    "lo_local": local["lo"], "hi_local": local["hi"]})
        row["evidence"] = f"{evidence} | local (at the target): {local['evidence']}"
    return row


def _within_10x(crit: pd.DataFrame, col: str) -> dict:
    """Claim (a)'s test of B_crit against the noise-scale column ``col``."""
    c = crit.dropna(subset=["b_crit", col])
    c = c[c[col] > 0]
    left = len(crit) - len(c)
    why = ""
    if left and "avg_note" in crit and col.endswith("_avg"):
        notes = [n for n in crit.loc[~crit.index.isin(c.index), "avg_note"]
                 if isinstance(n, str) and n]
        why = f"; first reason: {notes[0]}" if notes else ""
    if c.empty:
        return {"verdict": UNDECIDED, "value": np.nan, "lo": np.nan, "hi": np.nan,
                "evidence": f"no target with both B_crit and {col} ({left} left out{why})"}
    r = c["b_crit"] / c[col]
    lo = c["b_crit_low"] / c[col]
    hi = c["b_crit_high"] / c[col]
    inside = (lo >= 0.1) & (hi <= 10)
    outside = (hi < 0.1) | (lo > 10)
    verdict = HOLDS if inside.all() else FAILS if outside.any() else UNDECIDED
    ev = "; ".join(f"L={t:.3g}: {_g(v)} [{_g(a)}, {_g(b)}]"
                   for t, v, a, b in zip(c["target"], r, lo, hi, strict=True))
    if left:
        ev += f" ({left} target(s) without B_crit or {col} left out{why})"
    worst = int(np.argmax(np.abs(np.log(r.to_numpy(float)))))
    return {"verdict": verdict, "value": float(r.iloc[worst]), "lo": float(lo.iloc[worst]),
            "hi": float(hi.iloc[worst]), "evidence": f"B_crit/{col} per target: {ev}"}


def _claim_a(task, opt, crit: pd.DataFrame) -> dict:
    avg = _within_10x(crit, "b_simple_avg") if "b_simple_avg" in crit else None
    local = _within_10x(crit, "b_simple")
    if avg is None:  # tables written before the averaged columns existed
        return _row(task, opt, "a", UNDECIDED, evidence="no averaged B_simple in the table",
                    local=local)
    return _row(task, opt, "a", avg["verdict"], avg["value"], avg["lo"], avg["hi"],
                avg["evidence"] + " (the row's value is the farthest from 1)", local=local)


def _paper_range_text(lo: float, hi: float) -> str:
    f = np.array(sorted(TABLE1_GROWTH.values()))
    listed = ", ".join(f"{k} {_g(v)}x" for k, v in TABLE1_GROWTH.items())
    if hi < f[0]:
        where = "below every factor of Table 1"
    elif lo > f[-1]:
        where = "above every factor of Table 1"
    else:
        n_in = int(np.sum((f >= lo) & (f <= hi)))
        where = f"overlapping Table 1's range ({n_in} of its {len(f)} factors inside it)"
    return f"Table 1's factors: {listed}; the measured interval lies {where}"


def _claim_b(task, opt, t1: pd.Series) -> dict:
    g = t1.get("b_crit_growth", np.nan)
    lo, hi = t1.get("b_crit_growth_low", np.nan), t1.get("b_crit_growth_high", np.nan)
    if not np.isfinite(g):
        return _row(task, opt, "b", UNDECIDED, evidence="fewer than 2 fitted targets")
    verdict = HOLDS if lo > 1 else FAILS if hi < 1 else UNDECIDED
    ev = (f"B_crit {_g(t1['b_crit_start'])} at L={t1['target_start']:.3g} -> "
          f"{_g(t1['b_crit_averaged'])} at L={t1['target_averaged']:.3g}; growth {_g(g)}x "
          f"[{_g(lo)}, {_g(hi)}] (per-target "
          f"[{_g(t1.get('b_crit_growth_low_pertarget', np.nan))}, "
          f"{_g(t1.get('b_crit_growth_high_pertarget', np.nan))}], seed bootstrap "
          f"[{_g(t1.get('b_crit_growth_low_boot', np.nan))}, "
          f"{_g(t1.get('b_crit_growth_high_boot', np.nan))}]); "
          + _paper_range_text(float(lo), float(hi)))
    return _row(task, opt, "b", verdict, g, lo, hi, ev)


def _claim_c(task, one: pd.DataFrame) -> dict:
    rows = one[one["task"] == task] if len(one) and "task" in one else one.iloc[0:0]
    if rows.empty:
        return _row(task, "sgd", "c", NOT_TESTED, evidence="no one-step experiment")
    parts, rejected, n_min = [], False, len(rows)
    worst_p = 1.0
    for q in ("eps_opt", "dl_opt"):
        cols = [q, f"{q}_low", f"{q}_high", f"{q}_pred_fit"]
        ok = rows[cols].notna().all(axis=1) & (rows[q] != 0)
        r = rows[ok]
        n, left = len(r), int((~ok).sum())
        n_min = min(n_min, n)
        if n == 0:
            parts.append(f"{q}: no point with a measurement, interval and prediction "
                         f"({left} left out)")
            continue
        inside = (r[f"{q}_low"] <= r[f"{q}_pred_fit"]) & (r[f"{q}_pred_fit"] <= r[f"{q}_high"])
        m = int(n - inside.sum())
        p = float(stats.binom.sf(m - 1, n, 1 - ONE_STEP_LEVEL)) if m > 0 else 1.0
        worst_p = min(worst_p, p)
        rejected |= p < ONE_STEP_ALPHA
        dev = float(np.median(np.abs(r[f"{q}_pred_fit"] / r[q] - 1)))
        parts.append(f"{q}: {n - m}/{n} predictions inside the measured 95% interval "
                     f"(P(>= {m} misses) = {p:.2g}), median |pred/meas - 1| = {dev:.2g}"
                     + (f"; {left} point(s) with a NaN (or zero) measurement, or a NaN interval or "
                        "prediction left out" if left else ""))
    verdict = UNDECIDED if n_min < 10 else FAILS if rejected else HOLDS
    why = f"; undecided: {n_min} < 10 points" if n_min < 10 else ""
    return _row(task, "sgd", "c", verdict, worst_p, evidence="; ".join(parts)
                + f"; reject at P < {ONE_STEP_ALPHA}{why}")


def _claim_d(task, t1: pd.DataFrame) -> dict:
    by = t1.set_index("optimizer")
    if not {"sgd", "adam"} <= set(by.index):
        return _row(task, "adam vs sgd", "d", NOT_TESTED, evidence="needs both optimizers")
    a, s = by.loc["adam"], by.loc["sgd"]
    need = ("b_crit_common", "b_crit_common_low")
    if not all(c in by.columns for c in need) or not all(
            np.isfinite(pd.to_numeric(r[c])) for r in (a, s) for c in need):
        return _row(task, "adam vs sgd", "d", UNDECIDED,
                    evidence="B_crit not fitted at a common target")
    ratio = a["b_crit_common"] / s["b_crit_common"]
    verdict = (HOLDS if a["b_crit_common_low"] > s["b_crit_common_high"]
               else FAILS if a["b_crit_common_high"] < s["b_crit_common_low"] else UNDECIDED)
    ev = (f"at the common target L={a['target_common']:.3g}: Adam {_g(a['b_crit_common'])} "
          f"[{_g(a['b_crit_common_low'])}, {_g(a['b_crit_common_high'])}], SGD "
          f"{_g(s['b_crit_common'])} [{_g(s['b_crit_common_low'])}, "
          f"{_g(s['b_crit_common_high'])}]")
    lo = a["b_crit_common_low"] / s["b_crit_common_high"]
    hi = (a["b_crit_common_high"] / s["b_crit_common_low"] if s["b_crit_common_low"] > 0
          else np.inf)
    return _row(task, "adam vs sgd", "d", verdict, ratio, lo, hi,
                ev + "; value: the ratio Adam/SGD, interval from the two intervals' ends")


def _closer(c, bn, bs):
    return abs(np.log(c / bn)) - abs(np.log(c / bs))


def _noise_closer(crit: pd.DataFrame, bn_col: str, bs_col: str) -> dict:
    """Claim (e)'s test with the columns ``bn_col`` (B_noise) and ``bs_col`` (B_simple)."""
    c = crit.dropna(subset=["b_crit", bn_col, bs_col, "b_crit_low", "b_crit_high"])
    c = c[(c[bn_col] > 0) & (c[bs_col] > 0) & (c["b_crit_low"] > 0)
          & np.isfinite(c["b_crit_high"])]
    if c.empty:
        notes = [n for n in crit.get("avg_note", pd.Series(dtype=object))
                 if isinstance(n, str) and n] if bn_col.endswith("_avg") else []
        why = f" (first reason: {notes[0]})" if notes else ""
        return {"verdict": UNDECIDED, "value": np.nan, "lo": np.nan, "hi": np.nan,
                "evidence": f"no target with B_crit (bounded interval), {bn_col} and "
                            f"{bs_col}{why}"}
    n_closer = n_farther = 0
    ev = []
    for _, r in c.iterrows():
        d_lo = _closer(r["b_crit_low"], r[bn_col], r[bs_col])
        d_hi = _closer(r["b_crit_high"], r[bn_col], r[bs_col])
        if d_lo < 0 and d_hi < 0:
            n_closer += 1
            tag = "B_noise closer"
        elif d_lo > 0 and d_hi > 0:
            n_farther += 1
            tag = "B_simple closer"
        else:
            tag = "undecided"
        ev.append(f"L={r['target']:.3g}: B_crit {_g(r['b_crit'])} [{_g(r['b_crit_low'])}, "
                  f"{_g(r['b_crit_high'])}], {bn_col} {_g(r[bn_col])}, {bs_col} "
                  f"{_g(r[bs_col])}: {tag}")
    n = len(c)
    verdict = HOLDS if n_closer == n else FAILS if n_farther == n else UNDECIDED
    return {"verdict": verdict, "value": float(n_closer), "lo": float(n_farther),
            "hi": float(n), "evidence": "; ".join(ev)}


def _claim_e(task, opt, crit: pd.DataFrame) -> dict:
    local = _noise_closer(crit, "b_noise", "b_simple")
    if not {"b_noise_avg", "b_simple_avg"} <= set(crit.columns):
        return _row(task, opt, "e", UNDECIDED, evidence="no averaged noise scales in the "
                    "table", local=local)
    avg = _noise_closer(crit, "b_noise_avg", "b_simple_avg")
    return _row(task, opt, "e", avg["verdict"], avg["value"], avg["lo"], avg["hi"],
                "value = targets where B_noise is closer, lo = where B_simple is, hi = "
                "targets compared: " + avg["evidence"], local=local)


def _bracket_local(ok: pd.DataFrame) -> dict | None:
    """Claim (f), local: the 𝓑 the bracket implies (``b_local_low``/``_high``) against
    the local B_noise of the checkpoint."""
    if not {"b_local_low", "b_local_high", "b_noise"} <= set(ok.columns):
        return None
    r = ok.dropna(subset=["b_local_low", "b_noise"])
    if r.empty:
        return None
    n_in = 0
    ev = []
    for _, x in r.iterrows():
        high = float(x["b_local_high"]) if np.isfinite(x["b_local_high"]) else np.inf
        inside = x["b_local_low"] <= x["b_noise"] < high
        n_in += bool(inside)
        ev.append(f"step {int(x['step'])}: bracket's B [{_g(x['b_local_low'])}, {_g(high)}), "
                  f"B_noise {_g(x['b_noise'])}: {'inside' if inside else 'outside'}")
    n = len(r)
    verdict = HOLDS if n_in == n else FAILS if n_in == 0 else UNDECIDED
    return {"verdict": verdict, "value": float(n_in), "lo": float(n - n_in), "hi": float(n),
            "evidence": "; ".join(ev)}


def _claim_f(task, opt, branched: pd.DataFrame) -> dict | None:
    b = branched[(branched["task"] == task) & (branched["optimizer"] == opt)] \
        if len(branched) and "task" in branched else branched.iloc[0:0]
    if b.empty:
        return None
    # the keep-up point of the rule the branches follow; tables without it: 2B + B_crit
    pre = "keep_up" if "keep_up_low" in b else "b_crit_plus_2b"
    if f"{pre}_low" not in b:
        return _row(task, opt, "f", UNDECIDED, evidence="no keep-up point in the table")
    rule = (str(b["keep_up_rule"].iloc[0]) if "keep_up_rule" in b else "best")
    name = {"linear": "1.5B + B_crit/2 (k·η branches)",
            "best": "2B + B_crit (best-rate branches)"}.get(rule, rule)
    ok = b.dropna(subset=[f"{pre}_low", f"{pre}_high", "b_branched_low"])
    left = len(b) - len(ok)
    n_in = n_out = 0
    ev = []
    for _, r in ok.iterrows():
        high = float(r["b_branched_high"]) if np.isfinite(r["b_branched_high"]) else np.inf
        meet = r[f"{pre}_low"] <= high and r[f"{pre}_high"] >= r["b_branched_low"]
        n_in += bool(meet)
        n_out += not meet
        ev.append(f"step {int(r['step'])}: bracket [{_g(r['b_branched_low'])}, {_g(high)}), "
                  f"{name} {_g(r[pre])} [{_g(r[f'{pre}_low'])}, {_g(r[f'{pre}_high'])}]: "
                  f"{'meet' if meet else 'apart'}")
    n = n_in + n_out
    if n == 0:
        return _row(task, opt, "f", UNDECIDED, evidence=f"B_crit not fitted at any of the "
                    f"{len(b)} checkpoints' losses")
    verdict = HOLDS if n_in == n else FAILS if n_out == n else UNDECIDED
    tail = f"; {left} checkpoint(s) without a fitted B_crit left out" if left else ""
    return _row(task, opt, "f", verdict, float(n_in), float(n_out), float(n),
                "value = checkpoints where the intervals meet, lo = where they are apart, "
                "hi = compared: " + "; ".join(ev) + tail, local=_bracket_local(b))


def claims_table(crit: pd.DataFrame, table1: pd.DataFrame,
                 one_step: pd.DataFrame | None = None,
                 branched: pd.DataFrame | None = None) -> pd.DataFrame:
    """The claims of the module doc, per task and optimizer, from the report's tables.

    Parameters
    ----------
    crit : DataFrame
        ``b_crit_vs_noise.csv``: per task, optimizer and target, ``b_crit``,
        ``b_crit_low``, ``b_crit_high``, the noise scales at the target (``b_simple``,
        ``b_noise``) and averaged up to it (``b_simple_avg``, ``b_noise_avg``).
    table1 : DataFrame
        ``table1.csv``: per task and optimizer, the start/averaged B_crit with
        intervals and the growth with its per-target and bootstrap intervals.
    one_step : DataFrame, optional
        ``one_step.csv``: the one-step experiment (claim c is ``not tested`` without it).
    branched : DataFrame, optional
        ``branched.csv`` with ``b_crit_plus_2b`` (claim f; no row without it).

    Returns
    -------
    DataFrame
        Columns ``task, optimizer, claim, statement, verdict, value, lo, hi,
        verdict_local, value_local, lo_local, hi_local, evidence`` (``value``/``lo``/
        ``hi``: the number behind the verdict, see each claim; ``*_local``: claims a and e
        with the noise scales at the target; ``evidence``: the numbers in words).
    """
    for name, frame, cols in (("crit", crit, ("task", "optimizer", "target", "b_crit")),
                              ("table1", table1, ("task", "optimizer"))):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise InputError(f"claims_table: {name} lacks columns {missing}")
    one = pd.DataFrame() if one_step is None else one_step
    br = pd.DataFrame() if branched is None else branched
    rows = []
    for task in dict.fromkeys(table1["task"]):
        t1 = table1[table1["task"] == task]
        for opt in t1["optimizer"]:
            c = crit[(crit["task"] == task) & (crit["optimizer"] == opt)]
            t1r = t1[t1["optimizer"] == opt].iloc[0]
            rows.append(_claim_a(task, opt, c))
            rows.append(_claim_b(task, opt, t1r))
            if opt == "sgd":
                rows.append(_claim_c(task, one))
            rows.append(_claim_e(task, opt, c))
            f = _claim_f(task, opt, br)
            if f is not None:
                rows.append(f)
        rows.append(_claim_d(task, t1))
    out = pd.DataFrame(rows, columns=COLUMNS)
    order = {t: i for i, t in enumerate(dict.fromkeys(out["task"]))}
    key = out["task"].map(order).astype(int) * 100 + out["claim"].map(ord)
    return out.iloc[np.argsort(key.to_numpy(), kind="stable")].reset_index(drop=True)
