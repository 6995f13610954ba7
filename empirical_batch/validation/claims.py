r"""The paper's claims, each checked against the harness's result tables.

`claims_table` takes the tables the report writes (``b_crit_vs_noise.csv``,
``table1.csv``, ``one_step.csv``) and returns one row per task, optimizer and claim
with a verdict — ``holds``, ``does not hold`` or ``undecided`` — and the numbers and
intervals behind it. A claim is said to hold only where its interval supports it;
where the interval straddles the threshold it is ``undecided``. The noise scales
(B_simple, B_noise) are single measurements on the reference run; their sampling
error is not propagated (the intervals below are those of B_crit).

The claims (McCandlish et al. 2018, arXiv:1812.06162; Zhang et al. 2019,
arXiv:1907.04164):

a. **B_simple predicts B_crit within an order of magnitude** (§3, Table 1): at every
   fitted target, B_crit/B_simple at the same loss lies in [1/10, 10]. Holds when the
   interval [lo, hi]/B_simple lies inside [1/10, 10] at every target where both are
   known; does not hold when at some target it lies entirely outside; else undecided.
b. **B_crit grows by at least 10× over training** (§3, Table 1: "start" vs
   "averaged"): growth = B_crit(hardest target)/B_crit(loosest target), with the
   report's interval (``b_crit_growth_lo``/``_hi``: the hull of the per-target
   combination [lo_hard/hi_loose, hi_hard/lo_loose], joint level ≥ 90 %, and the seed
   bootstrap). Holds when its lower end is ≥ 10; does not hold when its upper end is
   < 10.
c. **The one-step model fits the measured ε_opt(B) and ΔL_opt(B)** (§2.2, eqs. 2.6–2.7,
   Fig. 2): at each checkpoint and batch size of the one-step experiment the model
   fitted to that checkpoint predicts both; a prediction is consistent with its
   measurement when it lies in the measurement's 95 % interval. With n points and m
   misses, the model is rejected for a quantity when P(Binomial(n, 0.05) ≥ m) < 0.01
   (more misses than sampling error explains). Holds when neither quantity is
   rejected; does not hold when either is; undecided with fewer than 10 points. Only
   the SGD reference run has a one-step experiment; other optimizers are ``not
   tested``.
d. **Adam reaches a larger B_crit than SGD** (Zhang et al. 2019, §4): at one loss,
   the task's common target (the easiest of the two optimizers' hardest targets,
   ``b_crit_common`` in ``table1.csv``; comparing each at its own hardest target
   would mix the optimizer with the loss). Holds when Adam's interval lies above
   SGD's; does not hold when below; else undecided. One row per task, optimizer
   ``adam vs sgd``.
e. **B_noise is closer to B_crit than B_simple** (§2.2: B_simple = B_noise only when
   H ∝ I; the paper uses B_simple as the cheap stand-in): at a target,
   d(c) = |log c/B_noise| − |log c/B_simple| is monotone in log c, so it is decided
   over the whole interval of B_crit from its two ends: B_noise closer at the target
   when d < 0 at both ends, farther when d > 0 at both. Holds when B_noise is closer at
   every target where both scales are known; does not hold when farther at every such
   target; else undecided (the counts are listed).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import InputError

__all__ = ["CLAIMS", "claims_table"]

HOLDS, FAILS, UNDECIDED, NOT_TESTED = "holds", "does not hold", "undecided", "not tested"

#: claim id -> statement
CLAIMS = {
    "a": "B_simple predicts B_crit within an order of magnitude",
    "b": "B_crit grows >= 10x over training",
    "c": "the one-step model fits the measured eps_opt(B) and dL_opt(B)",
    "d": "Adam reaches a larger B_crit than SGD (Zhang et al. 2019)",
    "e": "B_noise is closer to B_crit than B_simple",
}

#: one-step misses more frequent than this binomial tail probability reject the model
ONE_STEP_ALPHA = 0.01
#: the nominal level of the one-step experiment's intervals
ONE_STEP_LEVEL = 0.95


def _g(x) -> str:
    x = None if x is None else float(x)
    if x is None or not np.isfinite(x):
        return "inf" if (x is not None and np.isposinf(x)) else "nan"
    return f"{x:.3g}"


def _row(task, opt, cid, verdict, value=np.nan, lo=np.nan, hi=np.nan, evidence=""):
    return {"task": task, "optimizer": opt, "claim": cid, "statement": CLAIMS[cid],
            "verdict": verdict, "value": value, "lo": lo, "hi": hi, "evidence": evidence}


def _claim_a(task, opt, crit: pd.DataFrame) -> dict:
    c = crit.dropna(subset=["b_crit", "b_simple"])
    c = c[c["b_simple"] > 0]
    if c.empty:
        return _row(task, opt, "a", UNDECIDED, evidence="no target with both B_crit and "
                    "B_simple")
    r = c["b_crit"] / c["b_simple"]
    lo = c["b_crit_lo"] / c["b_simple"]
    hi = c["b_crit_hi"] / c["b_simple"]
    inside = (lo >= 0.1) & (hi <= 10)
    outside = (hi < 0.1) | (lo > 10)
    verdict = HOLDS if inside.all() else FAILS if outside.any() else UNDECIDED
    ev = "; ".join(f"L={t:.3g}: {_g(v)} [{_g(a)}, {_g(b)}]"
                   for t, v, a, b in zip(c["target"], r, lo, hi, strict=True))
    worst = int(np.argmax(np.abs(np.log(r.to_numpy(float)))))
    return _row(task, opt, "a", verdict, float(r.iloc[worst]), float(lo.iloc[worst]),
                float(hi.iloc[worst]), "B_crit/B_simple per target (the row's value is the "
                f"farthest from 1): {ev}")


def _claim_b(task, opt, t1: pd.Series) -> dict:
    g = t1.get("b_crit_growth", np.nan)
    lo, hi = t1.get("b_crit_growth_lo", np.nan), t1.get("b_crit_growth_hi", np.nan)
    if not np.isfinite(g):
        return _row(task, opt, "b", UNDECIDED, evidence="fewer than 2 fitted targets")
    verdict = HOLDS if lo >= 10 else FAILS if hi < 10 else UNDECIDED
    ev = (f"B_crit {_g(t1['b_crit_start'])} at L={t1['target_start']:.3g} -> "
          f"{_g(t1['b_crit_averaged'])} at L={t1['target_averaged']:.3g}; growth {_g(g)} "
          f"[{_g(lo)}, {_g(hi)}] (per-target "
          f"[{_g(t1.get('b_crit_growth_lo_pertarget', np.nan))}, "
          f"{_g(t1.get('b_crit_growth_hi_pertarget', np.nan))}], seed bootstrap "
          f"[{_g(t1.get('b_crit_growth_lo_boot', np.nan))}, "
          f"{_g(t1.get('b_crit_growth_hi_boot', np.nan))}])")
    return _row(task, opt, "b", verdict, g, lo, hi, ev)


def _claim_c(task, one: pd.DataFrame) -> dict:
    rows = one[one["task"] == task] if len(one) and "task" in one else one.iloc[0:0]
    if rows.empty:
        return _row(task, "sgd", "c", NOT_TESTED, evidence="no one-step experiment")
    parts, rejected, n_min = [], False, len(rows)
    worst_p = 1.0
    for q in ("eps_opt", "dl_opt"):
        ok = rows[[f"{q}_lo", f"{q}_hi", f"{q}_pred_fit"]].notna().all(axis=1)
        r = rows[ok]
        n = len(r)
        n_min = min(n_min, n)
        inside = (r[f"{q}_lo"] <= r[f"{q}_pred_fit"]) & (r[f"{q}_pred_fit"] <= r[f"{q}_hi"])
        m = int(n - inside.sum())
        p = float(stats.binom.sf(m - 1, n, 1 - ONE_STEP_LEVEL)) if m > 0 else 1.0
        worst_p = min(worst_p, p)
        rejected |= p < ONE_STEP_ALPHA
        dev = float(np.median(np.abs(r[f"{q}_pred_fit"] / r[q] - 1))) if n else np.nan
        parts.append(f"{q}: {n - m}/{n} predictions inside the measured 95% interval "
                     f"(P(>= {m} misses) = {p:.2g}), median |pred/meas - 1| = {dev:.2g}")
    verdict = UNDECIDED if n_min < 10 else FAILS if rejected else HOLDS
    return _row(task, "sgd", "c", verdict, worst_p, evidence="; ".join(parts)
                + f"; reject at P < {ONE_STEP_ALPHA}")


def _claim_d(task, t1: pd.DataFrame) -> dict:
    by = t1.set_index("optimizer")
    if not {"sgd", "adam"} <= set(by.index):
        return _row(task, "adam vs sgd", "d", NOT_TESTED, evidence="needs both optimizers")
    a, s = by.loc["adam"], by.loc["sgd"]
    need = ("b_crit_common", "b_crit_common_lo")
    if not all(c in by.columns for c in need) or not all(
            np.isfinite(pd.to_numeric(r[c])) for r in (a, s) for c in need):
        return _row(task, "adam vs sgd", "d", UNDECIDED,
                    evidence="B_crit not fitted at a common target")
    ratio = a["b_crit_common"] / s["b_crit_common"]
    verdict = (HOLDS if a["b_crit_common_lo"] > s["b_crit_common_hi"]
               else FAILS if a["b_crit_common_hi"] < s["b_crit_common_lo"] else UNDECIDED)
    ev = (f"at the common target L={a['target_common']:.3g}: Adam {_g(a['b_crit_common'])} "
          f"[{_g(a['b_crit_common_lo'])}, {_g(a['b_crit_common_hi'])}], SGD "
          f"{_g(s['b_crit_common'])} [{_g(s['b_crit_common_lo'])}, "
          f"{_g(s['b_crit_common_hi'])}]")
    lo = a["b_crit_common_lo"] / s["b_crit_common_hi"]
    hi = (a["b_crit_common_hi"] / s["b_crit_common_lo"] if s["b_crit_common_lo"] > 0
          else np.inf)
    return _row(task, "adam vs sgd", "d", verdict, ratio, lo, hi,
                ev + "; value: the ratio Adam/SGD, interval from the two intervals' ends")


def _closer(c, bn, bs):
    return abs(np.log(c / bn)) - abs(np.log(c / bs))


def _claim_e(task, opt, crit: pd.DataFrame) -> dict:
    c = crit.dropna(subset=["b_crit", "b_noise", "b_simple", "b_crit_lo", "b_crit_hi"])
    c = c[(c["b_noise"] > 0) & (c["b_simple"] > 0) & (c["b_crit_lo"] > 0)
          & np.isfinite(c["b_crit_hi"])]
    if c.empty:
        return _row(task, opt, "e", UNDECIDED, evidence="no target with B_crit (bounded "
                    "interval), B_noise and B_simple")
    n_closer = n_farther = 0
    ev = []
    for _, r in c.iterrows():
        d_lo = _closer(r["b_crit_lo"], r["b_noise"], r["b_simple"])
        d_hi = _closer(r["b_crit_hi"], r["b_noise"], r["b_simple"])
        if d_lo < 0 and d_hi < 0:
            n_closer += 1
            tag = "B_noise closer"
        elif d_lo > 0 and d_hi > 0:
            n_farther += 1
            tag = "B_simple closer"
        else:
            tag = "undecided"
        ev.append(f"L={r['target']:.3g}: B_crit {_g(r['b_crit'])} [{_g(r['b_crit_lo'])}, "
                  f"{_g(r['b_crit_hi'])}], B_noise {_g(r['b_noise'])}, B_simple "
                  f"{_g(r['b_simple'])}: {tag}")
    n = len(c)
    verdict = HOLDS if n_closer == n else FAILS if n_farther == n else UNDECIDED
    return _row(task, opt, "e", verdict, float(n_closer), float(n_farther), float(n),
                "value = targets where B_noise is closer, lo = where B_simple is, hi = "
                "targets compared: " + "; ".join(ev))


def claims_table(crit: pd.DataFrame, table1: pd.DataFrame,
                 one_step: pd.DataFrame | None = None) -> pd.DataFrame:
    """The claims of the module doc, per task and optimizer, from the report's tables.

    Parameters
    ----------
    crit : DataFrame
        ``b_crit_vs_noise.csv``: per task, optimizer and target, ``b_crit``,
        ``b_crit_lo``, ``b_crit_hi``, ``b_simple``, ``b_noise``.
    table1 : DataFrame
        ``table1.csv``: per task and optimizer, the start/averaged B_crit with
        intervals and the growth with its per-target and bootstrap intervals.
    one_step : DataFrame, optional
        ``one_step.csv``: the one-step experiment (claim c is ``not tested`` without it).

    Returns
    -------
    DataFrame
        Columns ``task, optimizer, claim, statement, verdict, value, lo, hi,
        evidence`` (``value``/``lo``/``hi``: the number behind the verdict, see each
        claim; ``evidence``: the numbers in words).
    """
    for name, frame, cols in (("crit", crit, ("task", "optimizer", "target", "b_crit")),
                              ("table1", table1, ("task", "optimizer"))):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise InputError(f"claims_table: {name} lacks columns {missing}")
    one = pd.DataFrame() if one_step is None else one_step
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
        rows.append(_claim_d(task, t1))
    out = pd.DataFrame(rows, columns=["task", "optimizer", "claim", "statement", "verdict",
                                      "value", "lo", "hi", "evidence"])
    order = {t: i for i, t in enumerate(dict.fromkeys(out["task"]))}
    key = out["task"].map(order).astype(int) * 100 + out["claim"].map(ord)
    return out.iloc[np.argsort(key.to_numpy(), kind="stable")].reset_index(drop=True)
