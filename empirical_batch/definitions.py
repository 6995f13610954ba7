r"""One vocabulary of critical batch sizes, with converters between them.

Papers since McCandlish et al. (2018) call different quantities "the critical
batch size". This module names each one (`CBSDefinition`, all in
`CBS_DEFINITIONS`) and converts between those that the steps/examples
hyperbola relates:

* ``"mccandlish"``: $B_{crit} = E_{min}/S_{min}$, the hyperbola
  $S(B) = S_{min}(1 + B_{crit}/B)$;
* ``"bergsma"``: the same hyperbola in data, $D(B) = D_{min}(1 + B/B_{crit})$
  (the same value);
* ``"zhang"``: the batch $B^*$ whose steps exceed linear scaling from a base batch
  $B_0$ by a fraction $o$ (20 %), $B^* = (1+o)B_0 + o\,B_{crit}$ under the hyperbola;
* ``"merrill"``: local, tolerance-based, the largest batch whose loss after a window
  of $\Delta$ tokens stays within $\delta$ of the small-batch run;
* ``"li_peak"``: $B_{peak}$, where Adam's optimal learning rate peaks;
  $B_{peak} = B_{noise}$ in Li et al. (2024).

Derivation of Zhang et al.'s CBS under the hyperbola. Linear scaling from $B_0$
predicts $S_{lin}(B) = S(B_0)\,B_0/B$; the CBS is where
$S(B) = (1+o)\,S_{lin}(B)$:

$$
S_{min}\left(1 + \frac{B_{crit}}{B}\right)
  = (1+o)\,S_{min}\left(1 + \frac{B_{crit}}{B_0}\right)\frac{B_0}{B}
\iff B + B_{crit} = (1+o)(B_0 + B_{crit})
\iff B^* = (1+o)B_0 + o\,B_{crit},
$$

so $B^* \approx 0.2\,B_{crit}$ for $B_0 \ll B_{crit}$ and $o = 0.2$.

Merrill et al.'s local CBS is a measurement (branched runs), not a formula; the
converter `merrill_cbs_from_b_crit` is this library's model of it under the data
hyperbola: training $\Delta$ tokens at batch $B$ is worth
$\Delta/(1 + B/B_{crit})$ small-batch-limit tokens, so with the loss falling at
$s = -dL/dD_{min}$ per such token the loss gap to the base batch $B_0$ is

$$
\mathrm{gap}(B) = s\,\Delta\left[\frac{1}{1 + B_0/B_{crit}} - \frac{1}{1 + B/B_{crit}}\right],
$$

and the local CBS is the $B$ with $\mathrm{gap}(B) = \delta$. Two values of
$B_{crit}$ give the same local CBS, so the inverse is refused.

References
----------
* McCandlish, S., Kaplan, J., Amodei, D., & OpenAI Dota Team (2018). An
  Empirical Model of Large-Batch Training. arXiv:1812.06162.
* Zhang, H., Morwani, D., Vyas, N., Wu, J., Zou, D., Ghai, U., Foster, D., &
  Kakade, S. (2024). How Does Critical Batch Size Scale in Pre-training?
  arXiv:2410.21676 (ICLR 2025).
* Bergsma, S., Dey, N., Gosal, G., Gray, G., Soboleva, D., & Hestness, J.
  (2025). Power Lines: Scaling Laws for Weight Decay and Batch Size in LLM
  Pre-training. arXiv:2505.13738 (NeurIPS 2025).
* Merrill, W., Arora, S., Groeneveld, D., & Hajishirzi, H. (2025). Critical
  Batch Size Revisited: A Simple Empirical Approach to Large-Batch Language Model
  Training. arXiv:2505.23971.
* Li, S., Zhao, P., Zhang, H., Sun, X., Wu, H., Jiao, D., Wang, W., Liu, C.,
  Fang, Z., Xue, J., Tao, Y., Cui, B., & Wang, D. (2024). Surge Phenomenon in
  Optimal Learning Rate and Batch Size Scaling. arXiv:2405.14578 (NeurIPS 2024).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from ._validate import as_array, as_float
from .errors import InputError
from .params import DOMAINS, Domain, validate_params
from .result import Result

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CBS_DEFINITIONS",
    "CBSDefinition",
    "b_crit_from_zhang_cbs",
    "cbs_definitions_frame",
    "convert_cbs",
    "merrill_cbs_from_b_crit",
    "zhang_cbs_from_b_crit",
    "zhang_cbs_from_sweep",
]

CITATIONS = MappingProxyType({
    "mccandlish": "McCandlish, Kaplan & Amodei (2018), An Empirical Model of Large-Batch "
                  "Training, arXiv:1812.06162",
    "zhang": "Zhang, Morwani, Vyas, Wu, Zou, Ghai, Foster & Kakade (2024), How Does "
             "Critical Batch Size Scale in Pre-training?, arXiv:2410.21676",
    "bergsma": "Bergsma, Dey, Gosal, Gray, Soboleva & Hestness (2025), Power Lines: Scaling "
               "Laws for Weight Decay and Batch Size in LLM Pre-training, arXiv:2505.13738",
    "merrill": "Merrill, Arora, Groeneveld & Hajishirzi (2025), Critical Batch Size "
               "Revisited, arXiv:2505.23971",
    "li_peak": "Li et al. (2024), Surge Phenomenon in Optimal Learning Rate and Batch Size "
               "Scaling, arXiv:2405.14578",
})


@dataclass(frozen=True)
class CBSDefinition(Result):
    """One published definition of "the critical batch size".

    Attributes
    ----------
    key : str
        Identifier used by `convert_cbs` (``"mccandlish"``, ``"zhang"``, ...).
    name, symbol, formula : str
        What it is called, its symbol and its defining formula (plain text).
    citation : str
        The paper that defines it.
    assumptions : str
        What must hold for the conversion to $B_{crit}$ (or why there is none).
    requires : tuple of str
        Extra information a conversion from/to $B_{crit}$ needs (keyword names of
        `convert_cbs`); empty when the value is $B_{crit}$ itself.
    """

    key: str
    name: str
    symbol: str
    formula: str
    citation: str
    assumptions: str
    requires: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __repr__(self) -> str:
        return f"CBSDefinition({self.key!r}: {self.formula})"


Definition = Literal["mccandlish", "bergsma", "zhang", "merrill", "li_peak"]
"""The keys of `CBS_DEFINITIONS`: the definitions `convert_cbs` converts between."""

CBS_DEFINITIONS: MappingProxyType[str, CBSDefinition] = MappingProxyType({
    "mccandlish": CBSDefinition(
        "mccandlish", "critical batch size (steps/examples hyperbola)", "B_crit",
        "B_crit = E_min / S_min, with S(B) = S_min (1 + B_crit/B)", CITATIONS["mccandlish"],
        "steps to a fixed loss follow the hyperbola (S/S_min - 1)(E/E_min - 1) = 1; "
        "B_crit ≈ B_noise averaged over training",
    ),
    "bergsma": CBSDefinition(
        "bergsma", "critical batch size (data form)", "B_crit",
        "D = D_min (1 + B/B_crit)", CITATIONS["bergsma"],
        "the same hyperbola written in tokens D = B·S: the value equals McCandlish's "
        "B_crit (batch measured in the same unit, e.g. tokens)",
    ),
    "zhang": CBSDefinition(
        "zhang", "20% overhead over linear scaling", "B*",
        "S(B*) = (1 + o) S(B0) B0 / B*, o = 0.2; under the hyperbola "
        "B* = (1 + o) B0 + o B_crit", CITATIONS["zhang"],
        "needs the base batch B0 (and the overhead o, 0.2 in the paper); exact under "
        "the hyperbola, which the paper's sweeps follow only approximately",
        ("base_batch", "overhead"),
    ),
    "merrill": CBSDefinition(
        "merrill", "local, tolerance-based CBS (branched training)", "B*_local",
        "largest B with L_B(Δ) - L_B0(Δ) <= δ after a window of Δ tokens from a checkpoint",
        CITATIONS["merrill"],
        "a measurement; from B_crit only under this library's data-hyperbola model of "
        "the window, needing the tolerance δ, the window Δ, the loss slope per token and "
        "the base batch; not invertible (two B_crit give the same value)",
        ("tolerance", "window", "loss_slope", "base_batch"),
    ),
    "li_peak": CBSDefinition(
        "li_peak", "peak of Adam's optimal learning rate", "B_peak",
        "eps_opt(B) = eps_max / [(sqrt(B_noise/B) + sqrt(B/B_noise))/2], peak at "
        "B_peak = B_noise", CITATIONS["li_peak"],
        "B_peak = B_noise (the gradient noise scale), which equals B_crit only under "
        "McCandlish's approximation B_crit ≈ B_noise: pass approximate=True to use it",
        ("approximate",),
    ),
})


def cbs_definitions_frame() -> pd.DataFrame:
    """All definitions as a DataFrame, one row per key (the docs table)."""
    import pandas as pd

    return pd.DataFrame([d.to_dict() for d in CBS_DEFINITIONS.values()])


_POS = Domain(0.0)  # a positive real

@validate_params(b_crit="b_crit", base_batch="base_batch", overhead="overhead")
def zhang_cbs_from_b_crit(b_crit: float, *, base_batch: float, overhead: float = 0.2) -> float:
    r"""Zhang et al.'s CBS under the hyperbola with critical batch ``b_crit``.

    $$
    B^* = (1 + o)\,B_0 + o\,B_{crit}
    $$

    the batch at which the steps to the target exceed linear scaling from the base
    batch $B_0$ by the fraction $o$ (module docstring for the derivation).

    Parameters
    ----------
    b_crit : float
        McCandlish's $B_{crit} = E_{min}/S_{min}$.
    base_batch : float
        $B_0$, the batch linear scaling starts from.
    overhead : float
        $o$; 0.2 in the paper ("20 % more steps than linear scaling").

    Examples
    --------
    >>> zhang_cbs_from_b_crit(1000.0, base_batch=64.0)
    276.8

    References
    ----------
    * Zhang, H., Morwani, D., Vyas, N., Wu, J., Zou, D., Ghai, U., Foster, D., &
      Kakade, S. (2024). How Does Critical Batch Size Scale in Pre-training?
      arXiv:2410.21676.
    """
    bc = as_float(b_crit, "b_crit")
    b0 = as_float(base_batch, "base_batch")
    o = as_float(overhead, "overhead")
    return (1.0 + o) * b0 + o * bc


@validate_params(cbs=_POS, base_batch="base_batch", overhead="overhead")
def b_crit_from_zhang_cbs(cbs: float, *, base_batch: float, overhead: float = 0.2) -> float:
    r"""$B_{crit}$ from Zhang et al.'s CBS: $B_{crit} = (B^* - (1+o)B_0)/o$.

    Raises ``ValueError`` when $B^* \le (1+o)B_0$, which no positive $B_{crit}$
    produces.

    >>> b_crit_from_zhang_cbs(276.8, base_batch=64.0)
    1000.0

    References
    ----------
    * Zhang, H., Morwani, D., Vyas, N., Wu, J., Zou, D., Ghai, U., Foster, D., &
      Kakade, S. (2024). How Does Critical Batch Size Scale in Pre-training?
      arXiv:2410.21676.
    """
    c = as_float(cbs, "cbs")
    b0 = as_float(base_batch, "base_batch")
    o = as_float(overhead, "overhead")
    if c <= (1.0 + o) * b0:
        raise InputError(
            f"cbs={c!r} must exceed (1 + overhead)·base_batch = {(1 + o) * b0!r}: under the "
            "hyperbola the CBS is (1 + o)·B0 + o·B_crit"
        )
    return (c - (1.0 + o) * b0) / o


@validate_params(batch_sizes="batch_sizes", steps="steps", base_batch="base_batch",
                 overhead="overhead")
def zhang_cbs_from_sweep(batch_sizes: ArrayLike, steps: ArrayLike, *,
                         base_batch: float | None = None, overhead: float = 0.2) -> float:
    r"""Zhang et al.'s CBS measured directly on a sweep, without the hyperbola.

    $S(B) = (1+o)\,S(B_0)B_0/B$ is the same as $E(B) = (1+o)\,E(B_0)$ with
    $E = BS$: the CBS is the first batch (from $B_0$ upward) whose examples to the
    target reach $(1+o)$ times the base batch's, interpolated linearly in
    $(\log B, \log E)$ between the two measured batch sizes around the crossing.

    Parameters
    ----------
    batch_sizes, steps : array-like
        Steps to the target per batch size (one value per batch size).
    base_batch : float, optional
        $B_0$; the smallest batch size of the sweep by default. Must be one of
        ``batch_sizes``.
    overhead : float
        $o$, 0.2 in the paper.

    Raises
    ------
    ValueError
        When no measured batch size reaches the overhead (the CBS lies beyond the
        sweep: nothing is extrapolated).

    References
    ----------
    * Zhang, H., Morwani, D., Vyas, N., Wu, J., Zou, D., Ghai, U., Foster, D., &
      Kakade, S. (2024). How Does Critical Batch Size Scale in Pre-training?
      arXiv:2410.21676.
    """
    b = as_array(batch_sizes, "batch_sizes", ndim=1)
    s = as_array(steps, "steps", ndim=1)
    if b.size != s.size or b.size < 2:
        raise InputError(f"batch_sizes and steps must have the same length >= 2, got "
                         f"{b.size} and {s.size}")
    if np.unique(b).size != b.size:
        raise InputError("batch_sizes must be distinct (combine seeds first)")
    o = as_float(overhead, "overhead")
    order = np.argsort(b)
    b, s = b[order], s[order]
    b0 = float(b[0]) if base_batch is None else as_float(base_batch, "base_batch")
    if b0 not in b:
        raise InputError(f"base_batch={b0!r} must be one of batch_sizes {b.tolist()}")
    keep = b >= b0
    b, s = b[keep], s[keep]
    ratio = b * s / (b[0] * s[0])
    above = np.flatnonzero(ratio >= 1.0 + o)
    if above.size == 0:
        raise InputError(f"no batch size of the sweep reaches {1 + o:g}x the examples of "
                         f"base_batch={b0:g} (largest ratio {ratio.max():.3g}): the CBS lies "
                         "beyond the sweep")
    i = int(above[0])
    x = np.log(ratio[i - 1:i + 1])
    y = np.log(b[i - 1:i + 1])
    return float(np.exp(np.interp(np.log(1.0 + o), x, y)))


@validate_params(b_crit="b_crit", tolerance=_POS, window=_POS, loss_slope=_POS,
                 base_batch="base_batch")
def merrill_cbs_from_b_crit(
    b_crit: float, *, tolerance: float, window: float, loss_slope: float, base_batch: float
) -> float:
    r"""A local, tolerance-based CBS (Merrill et al. 2025) modelled by the data hyperbola.

    The largest $B$ whose loss after $\Delta$ = ``window`` tokens stays within
    $\delta$ = ``tolerance`` of the base batch $B_0$:

    $$
    \frac{1}{1 + B^*/B_{crit}} = \frac{1}{1 + B_0/B_{crit}} - \frac{\delta}{s\,\Delta},
    \qquad B^* = B_{crit}\left(\frac{1}{q} - 1\right),
    $$

    with $q$ the right-hand side and $s$ = ``loss_slope`` $= -dL/dD_{min}$
    (loss decrease per small-batch-limit token). Returns ``inf`` when $q \le 0$
    (every batch stays within the tolerance over this window). This is a model of
    their measurement, not their procedure: it assumes the hyperbola holds within the
    window and that the loss is linear in tokens over it.

    References
    ----------
    * Merrill, W., Arora, S., Groeneveld, D., & Hajishirzi, H. (2025). Critical
      Batch Size Revisited: A Simple Empirical Approach to Large-Batch Language Model
      Training. arXiv:2505.23971.
    """
    bc = as_float(b_crit, "b_crit")
    tol = as_float(tolerance, "tolerance")
    w = as_float(window, "window")
    s = as_float(loss_slope, "loss_slope")
    b0 = as_float(base_batch, "base_batch")
    q = 1.0 / (1.0 + b0 / bc) - tol / (s * w)
    if q <= 0:
        return float("inf")
    return bc * (1.0 / q - 1.0)


_HUB = {"mccandlish", "bergsma"}  # both are B_crit itself


def _to_b_crit(value: float, key: str, info: Mapping[str, Any]) -> float:
    if key in _HUB:
        return value
    if key == "zhang":
        _need(info, ("base_batch",), key)
        return b_crit_from_zhang_cbs(value, base_batch=info["base_batch"],
                                     overhead=info.get("overhead", 0.2))
    if key == "li_peak":
        _need_approximate(info)
        return value
    raise InputError(
        "a Merrill et al. local CBS cannot be converted to B_crit: under the hyperbola two "
        "values of B_crit give the same local CBS (measure B_crit with a sweep instead)"
    )


def _from_b_crit(bc: float, key: str, info: Mapping[str, Any]) -> float:
    if key in _HUB:
        return bc
    if key == "zhang":
        _need(info, ("base_batch",), key)
        return zhang_cbs_from_b_crit(bc, base_batch=info["base_batch"],
                                     overhead=info.get("overhead", 0.2))
    if key == "li_peak":
        _need_approximate(info)
        return bc
    _need(info, ("tolerance", "window", "loss_slope", "base_batch"), key)
    return merrill_cbs_from_b_crit(bc, tolerance=info["tolerance"], window=info["window"],
                                   loss_slope=info["loss_slope"], base_batch=info["base_batch"])


def _need(info: Mapping[str, Any], names: tuple[str, ...], key: str) -> None:
    missing = [n for n in names if info.get(n) is None]
    if missing:
        raise InputError(
            f"converting the {key!r} critical batch size needs {', '.join(missing)} "
            f"(not given); see CBS_DEFINITIONS[{key!r}].assumptions"
        )


def _need_approximate(info: Mapping[str, Any]) -> None:
    if info.get("approximate") is not True:
        raise InputError(
            "B_peak (Li et al. 2024) is the noise scale B_noise, which equals B_crit only "
            "approximately (McCandlish et al. 2018, B_crit ≈ B_noise averaged over training);"
            " pass approximate=True to accept that approximation"
        )


_INFO_KEYS = {"base_batch", "overhead", "tolerance", "window", "loss_slope", "approximate"}


_INFO = {"base_batch": DOMAINS["base_batch"], "overhead": DOMAINS["overhead"],
         "tolerance": _POS, "window": _POS, "loss_slope": _POS}


@validate_params(value=_POS, from_def=Definition, to_def=Definition)
def convert_cbs(value: float, from_def: Definition, to_def: Definition, **info: Any) -> float:
    r"""Convert a critical batch size between the definitions of `CBS_DEFINITIONS`.

    Goes through McCandlish's $B_{crit}$: ``mccandlish`` and ``bergsma`` are the
    same number; ``zhang`` needs ``base_batch`` (and ``overhead``, default 0.2),
    $B^* = (1+o)B_0 + oB_{crit}$; ``merrill`` needs ``tolerance``, ``window``,
    ``loss_slope`` and ``base_batch`` and converts only *from* $B_{crit}$;
    ``li_peak`` ($B_{peak} = B_{noise}$) needs ``approximate=True`` to be
    identified with $B_{crit}$. A conversion that lacks information raises
    ``ValueError`` naming what is missing.

    Parameters
    ----------
    value : float
        The critical batch size in the ``from_def`` definition.
    from_def, to_def : str
        Keys of `CBS_DEFINITIONS`.
    **info
        ``base_batch``, ``overhead``, ``tolerance``, ``window``, ``loss_slope``,
        ``approximate`` as the definitions require.

    Examples
    --------
    >>> convert_cbs(1000.0, "mccandlish", "zhang", base_batch=64.0)
    276.8

    References
    ----------
    * McCandlish, S., Kaplan, J., Amodei, D., & OpenAI Dota Team (2018). An
      Empirical Model of Large-Batch Training. arXiv:1812.06162.
    * Zhang, H., et al. (2024). How Does Critical Batch Size Scale in
      Pre-training? arXiv:2410.21676.
    * Bergsma, S., et al. (2025). Power Lines: Scaling Laws for Weight Decay and
      Batch Size in LLM Pre-training. arXiv:2505.13738.
    * Merrill, W., et al. (2025). Critical Batch Size Revisited. arXiv:2505.23971.
    * Li, S., et al. (2024). Surge Phenomenon in Optimal Learning Rate and Batch
      Size Scaling. arXiv:2405.14578.
    """
    v = as_float(value, "value")
    unknown = set(info) - _INFO_KEYS
    if unknown:
        raise InputError(f"unknown keyword(s) {sorted(unknown)}; expected some of "
                         f"{sorted(_INFO_KEYS)}")
    if "approximate" in info and not isinstance(info["approximate"], bool):
        raise InputError(f"approximate must be a bool, got {info['approximate']!r}")
    for k, domain in _INFO.items():
        if info.get(k) is not None:
            domain.check(as_float(info[k], k), k)
    if from_def == to_def:
        return v
    return _from_b_crit(_to_b_crit(v, from_def, info), to_def, info)
