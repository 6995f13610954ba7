r"""One SGD step on a quadratic loss (McCandlish et al. 2018, §2.2, App. C).

Per-example gradients have mean $G$ and covariance $\Sigma$; a batch of
$B$ of them has mean $G_{est}$ with covariance $\Sigma/B$. With
Hessian $H$, the expected loss after the update $\theta \leftarrow
\theta - \epsilon G_{est}$ is (eq. 2.5)

$$
E[L(\theta - \epsilon G_{est})] = L(\theta) - \epsilon |G|^2 +
\tfrac12 \epsilon^2 \left(G^T H G + \frac{\operatorname{tr}(H\Sigma)}{B}\right).
$$

Everything the model predicts depends on four scalars, $|G|^2$,
$G^THG$, $\operatorname{tr}\Sigma$ and $\operatorname{tr}(H\Sigma)$;
`QuadraticModel` computes them once from dense, diagonal or eigenbasis
inputs (or takes them directly) and derives the rest.

Variants (see ``docs/concepts.md`` for the derivations):

* **finite dataset** — sampling a batch without replacement from $D$ examples
  gives $\operatorname{cov}(G_{est}) = \Sigma(1/B - 1/D)$ with $\Sigma$ the
  Bessel-corrected per-example covariance; ``dataset_size=D`` replaces $1/B$
  by $1/B - 1/D$ everywhere.
* **preconditioning** — the update $-\epsilon P G_{est}$ is plain SGD in the
  coordinates $\theta = P^{1/2}\phi$; `QuadraticModel.preconditioned`
  returns the model in that geometry ($G \to P^{1/2}G$,
  $H \to P^{1/2}HP^{1/2}$, $\Sigma \to P^{1/2}\Sigma P^{1/2}$).
* **momentum** — heavy-ball momentum $m$ with learning rate $\epsilon$
  acts, for a gradient that changes slowly over $1/(1-m)$ steps, like plain
  SGD with the effective step $\epsilon/(1-m)$ (App. C).
"""

from __future__ import annotations

from .one_step import (
    dl_opt,
    effective_learning_rate,
    eps_opt,
    noise_scales_from_scalars,
    sign_descent_eps_opt,
    surge_eps_opt,
)
from .quadratic_model import QuadraticModel, anisotropic_quadratic, power_law_spectrum

__all__ = [
    "QuadraticModel",
    "anisotropic_quadratic",
    "dl_opt",
    "effective_learning_rate",
    "eps_opt",
    "noise_scales_from_scalars",
    "power_law_spectrum",
    "sign_descent_eps_opt",
    "surge_eps_opt",
]
