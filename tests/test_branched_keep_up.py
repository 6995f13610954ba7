"""The keep-up point of branched training in the one-step model
(`empirical_batch.validation.fits.keep_up_point`): derived with sympy and checked on the
exact noisy quadratic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empirical_batch.validation.claims import claims_table
from empirical_batch.validation.fits import keep_up_point, local_noise_from_bracket

sp = pytest.importorskip("sympy")


def _derived(rule: str):
    """kB at which a branch over the same examples makes half the reference's decrease,
    solved by sympy from the expected one-step improvement (`symbolic.sgd_step`)."""
    from empirical_batch.symbolic import sgd_step

    d = sgd_step()
    k, x, bn = sp.symbols("k x b_noise", positive=True)
    e_max = d.eps_max
    sub = {d.tr_hs: bn * d.ghg}
    imp = d.improvement.subs(sub)  # ΔL(eps, B)
    ref = imp.subs(d.eps, x * e_max)
    if rule == "linear":  # branch k: batch kB, rate k·x·eps_max, Δ/(kB) steps
        branch = imp.subs({d.eps: k * x * e_max, d.B: k * d.B}) / k
    else:  # every branch at its own best rate
        e_opt = sp.solve(sp.diff(imp, d.eps), d.eps)[0]
        branch = imp.subs(d.eps, e_opt).subs(d.B, k * d.B) / k
        ref = imp.subs(d.eps, e_opt)
    (k_star,) = sp.solve(sp.Eq(branch, ref / 2), k)
    return sp.simplify(k_star * d.B), d.B, x, bn


def test_keep_up_point_is_the_sympy_solution():
    kb, b, x, bn = _derived("linear")
    assert sp.simplify(kb - (b / x + b / 2 - bn / 2)) == 0
    at_opt = kb.subs(x, 1 / (1 + bn / b))
    assert sp.simplify(at_opt - (sp.Rational(3, 2) * b + bn / 2)) == 0
    kb_best, b2, _, bn2 = _derived("best")
    assert sp.simplify(kb_best - (2 * b2 + bn2)) == 0
    rng = np.random.default_rng(0)
    for _ in range(5):
        bv, nv, xv = rng.uniform(1, 64), rng.uniform(1, 5000), rng.uniform(0.01, 1)
        assert keep_up_point(bv, nv, x=xv) == pytest.approx(
            float(kb.subs({b: bv, bn: nv, x: xv})), rel=1e-12)
        assert keep_up_point(bv, nv) == pytest.approx(float(at_opt.subs({b: bv, bn: nv})))
        assert keep_up_point(bv, nv, rule="best") == pytest.approx(2 * bv + nv)
        for rule in ("linear", "best"):
            assert local_noise_from_bracket(bv, keep_up_point(bv, nv, rule=rule),
                                            rule=rule) == pytest.approx(nv)


def _zhang_states(b=8):
    """States of an SGD run on the noisy quadratic of Zhang et al. (d = 1000, h_i = 1/i,
    Σ = H) at batch 8 and the rate ε_opt(B) of each step, where B_noise first passes
    30, 370, 1200 and 3150."""
    from empirical_batch.simulate import NoisyQuadratic

    nq = NoisyQuadratic.zhang(dims=1000, init=1.0)
    h, c = nq.curvature, nq.noise
    m, out = np.ones_like(h), {}
    for _ in range(100_000):
        bn, em = np.sum(h * c) / np.sum(h**3 * m), np.sum(h**2 * m) / np.sum(h**3 * m)
        for t in (30, 370, 1200, 3150):
            if t not in out and bn >= t:
                out[t] = (m.copy(), bn, em)
        if len(out) == 4:
            break
        eta = em / (1 + bn / b)
        m = (1 - eta * h) ** 2 * m + eta**2 * c / b
    return nq, out


def test_keep_up_point_against_the_exact_noisy_quadratic():
    from scipy.optimize import brentq

    from empirical_batch.simulate import NoisyQuadratic

    b = 8
    nq, states = _zhang_states(b)
    assert len(states) == 4
    for m, bn, em in states.values():
        st = NoisyQuadratic(nq.curvature, noise=nq.noise, init=m)
        l0 = st.expected_loss(1.0, b, 0)
        for x in (1 / (1 + bn / b), 0.5 / (1 + bn / b)):  # ε_opt(B) and half of it
            eta = x * em
            per_example_ref = (l0 - st.expected_loss(eta, b, 1)) / b

            def gap(kb, eta=eta, per_example_ref=per_example_ref, st=st, l0=l0):
                k = kb / b  # one step at kB and k·η: its decrease per example
                return (l0 - st.expected_loss(k * eta, kb, 1)) / kb - per_example_ref / 2

            measured = brentq(gap, b, 1e7, xtol=1e-10)
            assert measured == pytest.approx(keep_up_point(b, bn, x=x), rel=1e-8)
        # the best-rate branches: each at ε_opt(kB) of the state
        per_ref = (l0 - st.expected_loss(em / (1 + bn / b), b, 1)) / b

        def gap_best(kb, st=st, l0=l0, em=em, bn=bn, per_ref=per_ref):
            return (l0 - st.expected_loss(em / (1 + bn / kb), kb, 1)) / kb - per_ref / 2

        best = brentq(gap_best, b, 1e7, xtol=1e-10)
        assert best == pytest.approx(keep_up_point(b, bn, rule="best"), rel=1e-8)


def _branched_rows():
    return pd.DataFrame({
        "task": "t", "optimizer": ["sgd", "sgd"], "step": [10, 20], "eval_loss": [1.0, 0.9],
        "base_batch": 8, "learning_rate": 0.1, "b_branched_low": [32.0, 64.0],
        "b_branched_high": [64.0, 128.0], "b_noise": [60.0, 40.0],
        "b_crit": [40.0, 100.0], "b_crit_low": [30.0, 90.0], "b_crit_high": [50.0, 110.0]})


def test_claim_f_uses_the_rule_the_branches_follow():
    from empirical_batch.validation import fits

    br = _branched_rows()
    # what branched_vs_fit adds, from its own helpers
    base = br["base_batch"].astype(float)
    for col, out in (("b_crit", "keep_up"), ("b_crit_low", "keep_up_low"),
                     ("b_crit_high", "keep_up_high")):
        br[out] = keep_up_point(base, br[col])
        br[col.replace("b_crit", "b_crit_plus_2b")] = br[col] + 2 * base
    br["keep_up_rule"] = fits.KEEP_UP_RULE["sgd"]
    for end in ("low", "high"):
        br[f"b_local_{end}"] = local_noise_from_bracket(base, br[f"b_branched_{end}"])
    crit = pd.DataFrame({"task": ["t"], "optimizer": ["sgd"], "target": [1.0],
                         "b_crit": [40.0], "b_crit_low": [30.0], "b_crit_high": [50.0],
                         "b_simple": [np.nan], "b_noise": [np.nan]})
    t1 = pd.DataFrame({"task": ["t"], "optimizer": ["sgd"]})
    f = claims_table(crit, t1, branched=br).query("claim == 'f'").iloc[0]
    # 1.5B + B_crit/2: [27, 37] meets [32, 64); [57, 67] meets [64, 128): holds
    assert f["verdict"] == "holds" and "1.5B + B_crit/2" in f["evidence"]
    low = br.assign(b_branched_low=[16.0, 32.0], b_branched_high=[32.0, 64.0])
    f = claims_table(crit, t1, branched=low).query("claim == 'f'").iloc[0]
    # 1.5B + B_crit/2 = [27, 37] meets [16, 32); [57, 67] meets [32, 64): holds, where
    # 2B + B_crit ([46, 66], [106, 126]) is apart from both brackets
    assert f["verdict"] == "holds"
    two_b = low.drop(columns=[c for c in low if c.startswith("keep_up")])
    assert claims_table(crit, t1, branched=two_b).query("claim == 'f'").iloc[0][
        "verdict"] == "does not hold"
    # local: the bracket's B (2(kB - 1.5B)): [8, 40) and [40, 104) against B_noise 60, 40
    assert f["verdict_local"] == "undecided"
    assert "outside" in f["evidence"] and "inside" in f["evidence"]
