r"""The model's closed forms, derived with sympy (McCandlish et al. 2018, §2.2–2.3, App. C–D).

Nothing here types an answer in: each closed form is *derived* from the expansion
of the loss, by differentiating, solving and taking limits, so tests can hold the
numpy implementations in `empirical_batch.theory` and
`empirical_batch.tradeoff` against an independent computation.

* `sgd_step` — from the second-order expansion of $L(\theta - \epsilon
  G_{est})$ averaged over $G_{est}$ (computed entry by entry for explicit
  symbolic matrices in `expected_step_loss`): $\epsilon_{opt}$,
  $\Delta L_{opt}$, $\epsilon_{max}$, $\Delta L_{max}$,
  $B_{noise}$.
* `preconditioned_step` — the same for the update $-\epsilon PG_{est}$.
* `tradeoff_law` — from $S = S_{min}(1 + B_{crit}/B)$, $E = BS$.
* `adaptive_batch` — the optimal schedule $B = \sqrt{r\mathcal{B}}$ and
  the gain $\gamma$ (App. D).

Every result is a frozen dataclass of sympy expressions; `numeric` turns an
expression into a numpy function of the named symbols. sympy is imported here
only, so importing the rest of the library does not load it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np
import sympy as sp
from numpy.typing import ArrayLike

from .errors import InputError

__all__ = [
    "AdaptiveDerivation",
    "PreconditionedDerivation",
    "StepDerivation",
    "TradeoffDerivation",
    "adaptive_batch",
    "adaptive_gain",
    "expected_step_loss",
    "numeric",
    "preconditioned_step",
    "sgd_step",
    "tradeoff_law",
]


def _check(condition: object, message: str) -> None:
    if not condition:
        raise RuntimeError(f"symbolic derivation failed: {message}")


class _AsDict:
    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


def numeric(expr: sp.Expr, *symbols: sp.Symbol) -> Callable[..., Any]:
    """``sympy.lambdify(symbols, expr, "numpy")``: a numpy function of the symbols.

    >>> d = sgd_step()
    >>> f = numeric(d.eps_opt, d.B, d.g2, d.ghg, d.tr_hs)
    >>> float(f(4.0, 2.0, 2.0, 8.0))
    0.5
    """
    f: Callable[..., Any] = sp.lambdify(symbols, expr, modules="numpy")
    return f


# --- one SGD step -----------------------------------------------------------------


def expected_step_loss(n: int = 2, *,
                       preconditioned: bool = False) -> tuple[sp.Expr, dict[str, Any]]:
    r"""Expected second-order loss change of one step, entry by entry, for n×n symbols.

    With $G_{est} = G + \xi$, $E\xi = 0$, $E\xi\xi^T = \Sigma/B$
    and the step $\delta = -\epsilon D G_{est}$ ($D = I$, or a symmetric
    $P$ when ``preconditioned``), the Taylor expansion
    $L(\theta+\delta) - L(\theta) = G^T\delta + \tfrac12\delta^TH\delta$ is
    expanded as a polynomial in the components $\xi_i$, and every monomial is
    averaged using only the first two moments: $\xi_i \to 0$,
    $\xi_i\xi_j \to \Sigma_{ij}/B$.

    Returns ``(expr, symbols)`` where ``symbols`` is a dict with the matrices
    ``G``, ``H``, ``Sigma``, ``P`` (``None`` unless preconditioned) and scalars
    ``eps``, ``B``.
    """
    if n < 1:
        raise InputError(f"n must be >= 1, got {n!r}")
    eps, b = sp.symbols("epsilon B", positive=True)
    g = sp.Matrix(n, 1, lambda i, _: sp.Symbol(f"G{i}", real=True))
    h = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"H{min(i, j)}{max(i, j)}", real=True))
    sig = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"S{min(i, j)}{max(i, j)}", real=True))
    p = (
        sp.Matrix(n, n, lambda i, j: sp.Symbol(f"P{min(i, j)}{max(i, j)}", real=True))
        if preconditioned
        else None
    )
    xi = sp.Matrix(n, 1, lambda i, _: sp.Symbol(f"xi{i}", real=True))
    direction = (p if preconditioned else sp.eye(n)) * (g + xi)
    delta = -eps * direction
    change = sp.expand((g.T * delta)[0, 0] + sp.Rational(1, 2) * (delta.T * h * delta)[0, 0])
    poly = sp.Poly(change, *xi)
    mean = sp.Integer(0)
    for powers, coeff in poly.terms():
        order = sum(powers)
        if order == 0:
            mean += coeff
        elif order == 2:
            idx = [i for i, k in enumerate(powers) for _ in range(k)]
            mean += coeff * sig[idx[0], idx[1]] / b
        # order 1: E[xi_i] = 0; the expansion has no higher orders
    symbols = {"G": g, "H": h, "Sigma": sig, "P": p, "eps": eps, "B": b}
    return sp.expand(mean), symbols


@dataclass(frozen=True)
class StepDerivation(_AsDict):
    r"""Closed forms of one SGD step, as sympy expressions in ``g2, ghg, tr_s, tr_hs, B``.

    ``improvement`` is
    $\epsilon|G|^2 - \tfrac12\epsilon^2(G^THG + \operatorname{tr}(H\Sigma)/B)$,
    read off `expected_step_loss`; the rest is derived from it.
    """

    eps: sp.Symbol
    B: sp.Symbol
    g2: sp.Symbol
    ghg: sp.Symbol
    tr_s: sp.Symbol
    tr_hs: sp.Symbol
    improvement: sp.Expr
    eps_opt: sp.Expr
    dl_opt: sp.Expr
    eps_max: sp.Expr
    dl_max: sp.Expr
    b_noise: sp.Expr
    b_simple: sp.Expr


def _scalar_form(expr: sp.Expr, syms: Mapping[str, Any]
                 ) -> tuple[sp.Expr, tuple[sp.Symbol, sp.Symbol, sp.Symbol]]:
    """Rewrite the entry-wise expansion in the invariants |G|², GᵀHG, tr(HΣ)."""
    g, h, sig = syms["G"], syms["H"], syms["Sigma"]
    g2, ghg, tr_hs = sp.symbols("g2 ghg tr_hs", positive=True)
    e, b = syms["eps"], syms["B"]
    # The expansion is a polynomial in eps: c1 eps + c2 eps^2; identify its coefficients.
    expanded = sp.expand(expr)
    c1, c2 = expanded.coeff(e, 1), expanded.coeff(e, 2)
    # c1 and c2 must equal -|G|^2 and (G^T H G + tr(H Sigma)/B)/2: check, then substitute.
    _check(sp.expand(c1 + (g.T * g)[0, 0]) == 0, "linear term is not -|G|^2 eps")
    _check(
        sp.expand(c2 - ((g.T * h * g)[0, 0] + (h * sig).trace() / b) / 2) == 0,
        "quadratic term is not (GᵀHG + tr(HΣ)/B) eps²/2",
    )
    return -(-g2 * e + (ghg + tr_hs / b) / 2 * e**2), (g2, ghg, tr_hs)


@lru_cache(maxsize=1)
def sgd_step(n: int = 2) -> StepDerivation:
    r"""Derive ε_opt, ΔL_opt, ε_max, ΔL_max, B_noise and B_simple from eq. 2.5.

    1. The expected improvement $\Delta L(\epsilon) = -E[L(\theta-\epsilon
       G_{est})-L(\theta)]$ comes from `expected_step_loss` (checked, for
       ``n``×``n`` symbolic matrices, to equal
       $\epsilon|G|^2-\tfrac12\epsilon^2(G^THG+\operatorname{tr}(H\Sigma)/B)$).
    2. $\epsilon_{opt}$ solves $\partial\Delta L/\partial\epsilon = 0$
       (a maximum: $\partial^2\Delta L/\partial\epsilon^2 < 0$).
    3. $\Delta L_{opt} = \Delta L(\epsilon_{opt})$.
    4. $\epsilon_{max}$, $\Delta L_{max}$ are the limits $B\to\infty$.
    5. $B_{noise}$ is the batch size at which $\epsilon_{opt} =
       \epsilon_{max}/2$; the result is then checked to satisfy
       $\epsilon_{opt} = \epsilon_{max}/(1+B_{noise}/B)$ identically in B.
    6. $B_{simple}$ is the $B_{noise}$ of $H\propto I$
       ($G^THG = h|G|^2$, $\operatorname{tr}(H\Sigma) = h\operatorname{tr}\Sigma$).
    """
    expr, syms = expected_step_loss(n)
    improvement, (g2, ghg, tr_hs) = _scalar_form(expr, syms)
    e, b = syms["eps"], syms["B"]
    tr_s, h = sp.symbols("tr_s h", positive=True)

    (e_opt,) = sp.solve(sp.diff(improvement, e), e)
    _check(sp.diff(improvement, e, 2).is_negative, "the stationary point is not a maximum")
    d_opt = sp.simplify(improvement.subs(e, e_opt))
    e_max = sp.limit(e_opt, b, sp.oo)
    d_max = sp.limit(d_opt, b, sp.oo)
    (b_noise,) = sp.solve(sp.Eq(e_opt, e_max / 2), b)
    _check(sp.simplify(e_opt - e_max / (1 + b_noise / b)) == 0, "eps_opt != eps_max/(1+Bn/B)")
    _check(sp.simplify(d_opt - d_max / (1 + b_noise / b)) == 0, "dl_opt != dl_max/(1+Bn/B)")
    b_simple = sp.simplify(b_noise.subs({ghg: h * g2, tr_hs: h * tr_s}))
    return StepDerivation(
        eps=e, B=b, g2=g2, ghg=ghg, tr_s=tr_s, tr_hs=tr_hs,
        improvement=improvement, eps_opt=sp.simplify(e_opt), dl_opt=d_opt,
        eps_max=e_max, dl_max=d_max, b_noise=b_noise, b_simple=b_simple,
    )


@dataclass(frozen=True)
class PreconditionedDerivation(_AsDict):
    r"""Closed forms of the step $-\epsilon PG_{est}$, in explicit matrix entries.

    ``symbols`` holds the matrices ``G``, ``H``, ``Sigma``, ``P`` and ``eps``, ``B``.
    """

    symbols: dict[str, Any]
    improvement: sp.Expr
    eps_opt: sp.Expr
    eps_max: sp.Expr
    dl_max: sp.Expr
    b_noise: sp.Expr

    def entries(self) -> tuple[sp.Symbol, ...]:
        """The entry symbols in the order `substitute` expects them."""
        out = []
        for key in ("G", "H", "Sigma", "P"):
            out.extend(sorted(self.symbols[key].free_symbols, key=str))
        return tuple(out)

    def substitute(self, expr: sp.Expr, gradient: ArrayLike, hessian: ArrayLike,
                   noise_cov: ArrayLike, preconditioner: ArrayLike) -> float:
        """Evaluate ``expr`` at numeric (symmetric) matrices."""
        vals: dict[sp.Symbol, float] = {}
        for key, arr in (("G", gradient), ("H", hessian), ("Sigma", noise_cov),
                         ("P", preconditioner)):
            mat, a = self.symbols[key], np.asarray(arr, dtype=float)
            for i in range(mat.shape[0]):
                for j in range(mat.shape[1]):
                    vals[mat[i, j]] = float(a[i][j] if mat.shape[1] > 1 else a[i])
        return float(expr.subs(vals))


@lru_cache(maxsize=4)
def preconditioned_step(n: int = 2) -> PreconditionedDerivation:
    r"""Derive B_noise and ε_max of the preconditioned update $-\epsilon PG_{est}$.

    The expected improvement from `expected_step_loss` with ``preconditioned``
    is a quadratic $a\epsilon - \tfrac12 c(B)\epsilon^2$ in explicit entries of
    n×n symbolic $G, H, \Sigma, P$; it is maximised over ε, the limit
    $B\to\infty$ gives $\epsilon_{max}$, and $B_{noise}$ is again the
    batch size that halves $\epsilon_{opt}$. Tests compare these against
    $\operatorname{tr}(PHP\Sigma)/G^TPHPG$ and $G^TPG/G^TPHPG$ computed in
    numpy.
    """
    expr, syms = expected_step_loss(n, preconditioned=True)
    e, b = syms["eps"], syms["B"]
    improvement = sp.expand(-expr)
    # improvement = a eps - (q0 + q1/B) eps^2 / 2 with entry-polynomials a, q0, q1;
    # optimise the generic form, then substitute the entries (fast, and the same steps
    # as sgd_step).
    a_sym, q0_sym, q1_sym = sp.symbols("a q0 q1", positive=True)
    generic = a_sym * e - (q0_sym + q1_sym / b) * e**2 / 2
    (e_opt_g,) = sp.solve(sp.diff(generic, e), e)
    e_max_g = sp.limit(e_opt_g, b, sp.oo)
    d_max_g = sp.limit(generic.subs(e, e_opt_g), b, sp.oo)
    (b_noise_g,) = sp.solve(sp.Eq(e_opt_g, e_max_g / 2), b)
    quad_b = sp.expand(-2 * improvement.coeff(e, 2) * b)  # q0 B + q1
    entries = {
        a_sym: improvement.coeff(e, 1),
        q0_sym: quad_b.coeff(b, 1),
        q1_sym: quad_b.coeff(b, 0),
    }
    _check(
        sp.expand(generic.subs(entries) - improvement) == 0,
        "the preconditioned improvement is not quadratic in eps with a 1/B noise term",
    )
    e_opt, e_max, d_max, b_noise = (
        x.subs(entries) for x in (e_opt_g, e_max_g, d_max_g, b_noise_g)
    )
    return PreconditionedDerivation(
        symbols=syms, improvement=improvement, eps_opt=e_opt, eps_max=e_max,
        dl_max=d_max, b_noise=b_noise,
    )


# --- the tradeoff -----------------------------------------------------------------


@dataclass(frozen=True)
class TradeoffDerivation(_AsDict):
    r"""The steps/examples law derived from per-step progress $\propto 1/(1 + B_{crit}/B)$."""

    B: sp.Symbol
    s_min: sp.Symbol
    e_min: sp.Symbol
    steps: sp.Expr
    examples: sp.Expr
    b_crit: sp.Expr
    residual: sp.Expr
    law: sp.Expr
    batch_for_steps: sp.Expr
    batch_for_examples: sp.Expr


@lru_cache(maxsize=1)
def tradeoff_law() -> TradeoffDerivation:
    r"""Derive $(S/S_{min}-1)(E/E_{min}-1) = 1$ (eqs. 2.11–2.12).

    Each step at batch B makes $1/(1+\mathcal{B}/B)$ of the progress of an
    infinite-batch step, so a target reached in $S_{min}$ infinite-batch steps
    needs $S = S_{min}(1+\mathcal{B}/B)$ steps and $E = BS$ examples.
    $E_{min}$ is the limit $B\to 0$ of E, which identifies
    $B_{crit} = \mathcal{B} = E_{min}/S_{min}$. Eliminating B (solve the S
    equation for B and substitute) gives ``law`` = $(S/S_{min}-1)(E/E_{min}-1)$,
    which simplifies to 1; ``residual`` is that minus 1 as a function of B (zero).
    """
    b, s_min, noise = sp.symbols("B S_min mathcal_B", positive=True)
    s_sym, e_sym, e_min_sym = sp.symbols("S E E_min", positive=True)
    steps = s_min * (1 + noise / b)
    examples = sp.expand(b * steps)
    e_min = sp.limit(examples, b, 0)
    b_crit = sp.simplify(e_min / s_min)
    # eliminate B between S(B) and E(B)
    (b_of_s,) = sp.solve(sp.Eq(s_sym, steps), b)
    e_of_s = examples.subs(b, b_of_s)
    law = sp.simplify((s_sym / s_min - 1) * (e_of_s / e_min - 1))
    residual = sp.simplify((steps / s_min - 1) * (examples / e_min - 1) - 1)
    # express in S_min, E_min only (B_crit = E_min/S_min)
    sub = {noise: e_min_sym / s_min}
    (b_of_e,) = sp.solve(sp.Eq(e_sym, examples.subs(sub)), b)
    return TradeoffDerivation(
        B=b, s_min=s_min, e_min=e_min_sym,
        steps=steps.subs(sub), examples=sp.expand(examples.subs(sub)),
        b_crit=b_crit.subs(sub), residual=residual, law=law,
        batch_for_steps=sp.simplify(b_of_s.subs(sub)), batch_for_examples=sp.simplify(b_of_e),
    )


# --- adaptive batch size ------------------------------------------------------------


@dataclass(frozen=True)
class AdaptiveDerivation(_AsDict):
    r"""The optimal batch schedule and its gain (App. D), in the integrals
    $I_0 = \int ds$, $I_{1/2} = \int\sqrt{\mathcal{B}}\,ds$,
    $I_1 = \int\mathcal{B}\,ds$."""

    noise: sp.Symbol
    r: sp.Symbol
    batch: sp.Expr
    i0: sp.Symbol
    i_half: sp.Symbol
    i1: sp.Symbol
    steps: sp.Expr
    examples: sp.Expr
    s_min: sp.Expr
    e_min: sp.Expr
    gamma: sp.Expr


@lru_cache(maxsize=1)
def adaptive_batch() -> AdaptiveDerivation:
    r"""Derive the schedule $B = \sqrt{r\mathcal{B}}$ and the gain γ (App. D).

    With $S = \int(1 + \mathcal{B}/B)\,ds$ and $E = \int(\mathcal{B}+B)\,ds$
    (eq. D.1), minimising $E + rS$ pointwise in s gives the schedule (the
    positive root of $\partial_B[(\mathcal{B}+B) + r(1+\mathcal{B}/B)] = 0$).
    Substituting it, $S = I_0 + I_{1/2}/\sqrt r$, $E = I_1 + \sqrt r
    I_{1/2}$; $S_{min} = I_0$ and $E_{min} = I_1$ (the limits
    $r\to\infty$ and $r\to 0$), and
    $(S/S_{min}-1)(E/E_{min}-1)$ is independent of r: that is γ.
    """
    noise, r, bsym = sp.symbols("mathcal_B r B", positive=True)
    objective = (noise + bsym) + r * (1 + noise / bsym)
    roots = [x for x in sp.solve(sp.diff(objective, bsym), bsym) if x.is_positive]
    (batch,) = roots
    _check(
        sp.simplify(sp.diff(objective, bsym, 2).subs(bsym, batch)).is_positive,
        "the schedule is not a minimum",
    )
    # integrands with the schedule substituted, written through sqrt(B_noise)
    steps_integrand = sp.simplify(1 + noise / batch)
    examples_integrand = sp.simplify(noise + batch)
    i0, i_half, i1 = sp.symbols("I_0 I_half I_1", positive=True)

    q = sp.Symbol("q", positive=True)  # sqrt(B_noise)

    def integrate(expr: sp.Expr) -> sp.Expr:
        # linear in 1, sqrt(B), B: map each to its integral symbol
        poly = sp.Poly(sp.expand(expr.subs(noise, q**2)), q)
        out = sp.Integer(0)
        for (k,), c in poly.terms():
            out += c * {0: i0, 1: i_half, 2: i1}[k]
        return out

    steps = integrate(steps_integrand)
    examples = integrate(examples_integrand)
    s_min = sp.limit(steps, r, sp.oo)
    e_min = sp.limit(examples, r, 0)
    gamma = sp.simplify((steps / s_min - 1) * (examples / e_min - 1))
    _check(not gamma.has(r), "gamma depends on r")
    return AdaptiveDerivation(
        noise=noise, r=r, batch=batch, i0=i0, i_half=i_half, i1=i1,
        steps=steps, examples=examples, s_min=s_min, e_min=e_min,
        gamma=gamma,
    )


def adaptive_gain(noise_of_s: sp.Expr, s: sp.Symbol, lower: sp.Expr | float,
                  upper: sp.Expr | float) -> sp.Expr:
    r"""Exact γ for a symbolic noise-scale trajectory $\mathcal{B}(s)$ on [lower, upper].

    Integrates $1$, $\sqrt{\mathcal{B}}$ and $\mathcal{B}$ with sympy
    and substitutes them into `adaptive_batch`'s γ.

    >>> s = sp.Symbol("s", nonnegative=True)
    >>> adaptive_gain(sp.sqrt(s), s, 0, 1)
    24/25
    """
    d = adaptive_batch()
    vals = {
        d.i0: sp.integrate(sp.Integer(1), (s, lower, upper)),
        d.i_half: sp.integrate(sp.sqrt(noise_of_s), (s, lower, upper)),
        d.i1: sp.integrate(noise_of_s, (s, lower, upper)),
    }
    return sp.simplify(d.gamma.subs(vals))
