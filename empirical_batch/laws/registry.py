r"""Published batch-size laws, as data, in the result type of fitted ones (`ScalingLaw`).

Each entry gives the formula, the unit of the batch (tokens or sequences), the
citation, the range the law was fitted on where it is recorded, and what of it is
confirmed against the source's text (``confirmed``, ``unconfirmed``). A constant that
could not be confirmed is either stored with ``confirmed=False`` and said so, or left
NaN: a law with an unknown coefficient predicts only from an anchor
(`empirical_batch.laws.predict`), and one with an unknown exponent not at all.

===================  =====================================================================
name                 law
===================  =====================================================================
steplaw_b_opt        $B_{opt} = 0.58\,D^{0.571}$ tokens (Li et al. 2025)
steplaw_lr_opt       $\eta_{opt} = 1.79\,N^{-0.713}D^{0.307}$ (Li et al. 2025)
deepseek_b_opt       $B_{opt} = 0.2920\,C^{0.3271}$ tokens, C in FLOPs (DeepSeek LLM 2024)
deepseek_lr_opt      $\eta_{opt} = 0.3118\,C^{-0.1250}$ (DeepSeek LLM 2024)
power_lines_b_opt    $B_{opt} \propto D^{0.383}$ (Bergsma et al. 2025)
power_lines_b_crit   $B_{crit} \propto D^{k}$ (Bergsma et al. 2025; k not recorded)
minicpm_b_opt        $B_{opt} = 1.21\times10^{9}\,L^{-6.24}$ tokens (Hu et al. 2024)
zhang2024_b_crit     $B_{crit} \propto D^{k}$, independent of N (Zhang et al. 2024)
kaplan2020_b_crit    $B_{crit} = 2\times10^{8}\,L^{-1/0.21}$ tokens (Kaplan et al. 2020)
===================  =====================================================================

References
----------
H. Li et al. "Predictable Scale: Part I — Optimal Hyperparameter Scaling Law in Large
Language Model Pretraining" (Step Law). arXiv:2503.04715 (2025).
DeepSeek-AI. "DeepSeek LLM: Scaling Open-Source Language Models with Longtermism."
arXiv:2401.02954 (2024), §3.1.
S. Bergsma, N. Dey, G. Gosal, G. Gray, D. Soboleva, J. Hestness. "Power Lines: Scaling
Laws for Weight Decay and Batch Size in LLM Pre-training." arXiv:2505.13738 (2025).
S. Hu et al. "MiniCPM: Unveiling the Potential of Small Language Models with Scalable
Training Strategies." arXiv:2404.06395 (2024).
H. Zhang, D. Morwani, N. Vyas, J. Wu, D. Zou, U. Ghai, D. Foster, S. Kakade. "How Does
Critical Batch Size Scale in Pre-training?" arXiv:2410.21676 (ICLR 2025).
J. Kaplan et al. "Scaling Laws for Neural Language Models." arXiv:2001.08361 (2020), §5.1.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import NotFoundError
from ..fit.b_crit_law import KAPLAN_2020
from ..result import Interval
from .law import ScalingLaw

__all__ = ["PUBLISHED_LAWS", "get_law"]

_NAN = math.nan

_STEPLAW = ("Li et al. 2025, 'Predictable Scale: Part I' (Step Law), arXiv:2503.04715; "
            "data and fitting code at github.com/step-law/steplaw")
_DEEPSEEK = ("DeepSeek-AI 2024, 'DeepSeek LLM: Scaling Open-Source Language Models with "
             "Longtermism', arXiv:2401.02954, §3.1")
_POWER = ("Bergsma, Dey, Gosal, Gray, Soboleva, Hestness 2025, 'Power Lines: Scaling Laws "
          "for Weight Decay and Batch Size in LLM Pre-training', arXiv:2505.13738")
_MINICPM = ("Hu et al. 2024, 'MiniCPM: Unveiling the Potential of Small Language Models with "
            "Scalable Training Strategies', arXiv:2404.06395, §3.2")
_ZHANG = ("Zhang, Morwani, Vyas, Wu, Zou, Ghai, Foster, Kakade 2024, 'How Does Critical Batch "
          "Size Scale in Pre-training?', arXiv:2410.21676")
_KAPLAN = "Kaplan et al. 2020, 'Scaling Laws for Neural Language Models', arXiv:2001.08361, §5.1"

#: the registry as data: one dict per law (the `ScalingLaw` fields a published law has)
_ENTRIES: tuple[dict[str, Any], ...] = (
    dict(name="steplaw_b_opt", quantity="b_opt", inputs=("tokens",), coefficient=0.58,
         exponents=(0.571,), unit="tokens", ranges=(None,), citation=_STEPLAW,
         formula="B_opt = 0.58 · D^0.571 (B and D in tokens)", confirmed=False,
         unconfirmed="0.58 and 0.571 as quoted for Step Law's dense models (1,911 runs over "
         "17 (N, D) cells), not checked against the paper's text; the code/fit_tool.py "
         "of github.com/step-law/steplaw gives the method (B in tokens: bs × seq_len, "
         "seq_len 2048 by default; the near-optimal band filter_threshold 0.0025; a "
         "log-linear fit bootstrapped 1,000 times; for its parameter set '1004', B in "
         "log D only and the learning rate in log N and log D) but neither the constants "
         "nor their bootstrap intervals (that parameter file is not in the repository); "
         "the fitted ranges of N and D are not recorded"),
    dict(name="steplaw_lr_opt", quantity="lr_opt", inputs=("n_params", "tokens"),
         coefficient=1.79, exponents=(-0.713, 0.307), unit="learning rate",
         ranges=(None, None), citation=_STEPLAW,
         formula="eta_opt = 1.79 · N^-0.713 · D^0.307", confirmed=False,
         unconfirmed="1.79, -0.713 and 0.307 as quoted, not checked against the paper's "
         "text (see steplaw_b_opt: the form, log lr linear in log N and log D, is that of "
         "code/fit_tool.py in github.com/step-law/steplaw, which does not hold the "
         "constants); the fitted ranges of N and D are not recorded"),
    dict(name="deepseek_b_opt", quantity="b_opt", inputs=("compute",), coefficient=0.2920,
         exponents=(0.3271,), unit="tokens", ranges=(None,), citation=_DEEPSEEK,
         formula="B_opt = 0.2920 · C^0.3271 (B in tokens, C in FLOPs)", confirmed=False,
         unconfirmed="0.2920 and 0.3271 as quoted by secondary sources, not checked "
         "against the paper's §3.1 (github.com/deepseek-ai/DeepSeek-LLM's README gives "
         "no formula); DeepSeek's C "
         "is M·D with M the non-embedding FLOPs per token, not 6ND; the fitted compute "
         "range is not recorded"),
    dict(name="deepseek_lr_opt", quantity="lr_opt", inputs=("compute",), coefficient=0.3118,
         exponents=(-0.1250,), unit="learning rate", ranges=(None,), citation=_DEEPSEEK,
         formula="eta_opt = 0.3118 · C^-0.1250 (C in FLOPs)", confirmed=False,
         unconfirmed="0.3118 and -0.1250 as quoted by secondary sources, not checked "
         "against the paper's §3.1 (one secondary table writes 0.3188: the coefficient "
         "is in doubt); C is M·D (non-embedding FLOPs per token × tokens); the compute "
         "range is not recorded"),
    dict(name="power_lines_b_opt", quantity="b_opt", inputs=("tokens",), coefficient=_NAN,
         exponents=(0.383,), unit="tokens", ranges=(None,), citation=_POWER,
         formula="B_opt ∝ D^0.383 (independent of N)", confirmed=False,
         unconfirmed="the abstract states B_opt is a power law in D independent of N; the "
         "exponent 0.383 is the one of karpathy/nanochat's scripts/base_train.py (B_REF "
         "= 2**19 tokens at depth 12, B = 2^round(log2(B_REF·(D/D_REF)^0.383)), citing "
         "arXiv:2505.13738), not checked against the paper's text; no interval for the "
         "exponent is recorded (a prediction has none unless one is given); the "
         "coefficient and the fitted range are not recorded (predict from an anchor)"),
    dict(name="power_lines_b_crit", quantity="b_crit", inputs=("tokens",), coefficient=_NAN,
         exponents=(_NAN,), unit="tokens", ranges=(None,), citation=_POWER,
         formula="B_crit ∝ D^k (independent of N)", confirmed=False,
         unconfirmed="the abstract states B_crit is a power law in D independent of N; "
         "neither k nor the coefficient is recorded"),
    dict(name="minicpm_b_opt", quantity="b_opt", inputs=("loss",), coefficient=1.21e9,
         exponents=(-6.24,), unit="tokens", ranges=(None,), citation=_MINICPM,
         formula="B_opt = 1.21e9 / L^6.24 (L the C4 loss in nats per token; B in tokens)",
         confirmed=False,
         unconfirmed="1.21e9 and 6.24 are confirmed: they are in the paper's §3.2 "
         "'Optimal Batch Size' (bs = 1.21e9 / L^6.24 with L the C4 loss, from 0.009B, "
         "0.03B and 0.17B models at 6 batch sizes each, learning rate 0.01, cosine "
         "schedule; the optimum minimises the tokens to a loss, App. A.2); not "
         "confirmed: the batch's unit (tokens; §3.2 does not state it) and the fitted "
         "loss range (not stated)"),
    dict(name="zhang2024_b_crit", quantity="b_crit", inputs=("tokens",), coefficient=_NAN,
         exponents=(_NAN,), unit="tokens", ranges=((1.74e9, 2.46e10),), citation=_ZHANG,
         formula="B_crit ∝ D^k, with N held out (critical batch grows with D, not N)",
         confirmed=False,
         unconfirmed="the paper's exponent is not recorded here; `python "
         "analysis/zhang_law.py` fits it from their published steps-to-target table (5 "
         "models, Chinchilla budgets 1.74e9–2.46e10 tokens, the range stored here)"),
    dict(name="kaplan2020_b_crit", quantity="b_crit", inputs=("loss",),
         coefficient=KAPLAN_2020["b_star"], exponents=(-1.0 / KAPLAN_2020["alpha_b"],),
         unit="tokens", ranges=(None,), citation=_KAPLAN,
         formula="B_crit = B* / L^(1/alpha_B), B* ≈ 2e8 tokens, alpha_B ≈ 0.21",
         confirmed=True, unconfirmed=""),
)


def _law(entry: dict[str, Any]) -> ScalingLaw:
    nan = Interval(_NAN, _NAN, 0.95)
    return ScalingLaw(coefficient_interval=nan,
                      exponent_intervals=tuple(nan for _ in entry["inputs"]),
                      source="published", **entry)


PUBLISHED_LAWS: dict[str, ScalingLaw] = {e["name"]: _law(e) for e in _ENTRIES}
"""Published laws by name (see the module's table)."""


def get_law(name: str) -> ScalingLaw:
    """The published law ``name``; `NotFoundError` lists the names."""
    try:
        return PUBLISHED_LAWS[name]
    except KeyError:
        raise NotFoundError(f"no published law {name!r}; laws are "
                            f"{sorted(PUBLISHED_LAWS)}") from None
