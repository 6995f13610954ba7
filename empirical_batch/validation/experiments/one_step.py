r"""The one-step experiment: the most direct test of eqs. 2.6–2.7.

At a checkpoint θ of the SGD reference run, take a fixed sample of ``n_examples``
examples of the task's objective data as *the* data set (L is its mean loss, G its
mean gradient, Σ its per-example covariance, H its Hessian: exactly the quantities
``hessian_noise_scale`` computes on it), and for each batch size B draw
``n_batches`` batches from it with replacement, take each batch's gradient $G_{est}$ and
measure the improvement of the objective after one SGD step for a log grid of step
sizes ε (all at the same weights θ, in float64):

$$
\Delta L_j(\epsilon) = L(\theta) - L(\theta - \epsilon G_{est,j}).
$$

The model (eq. 2.5) says the mean over batches is
$\Delta L(\epsilon) = \epsilon a - \tfrac12 \epsilon^2 b_B$ with
$a = |G|^2$ and $b_B = G^THG + \operatorname{tr}(H\Sigma)/B$. Per B the
quadratic through the origin is fitted by least squares to the mean curve on the
points with $\epsilon \le 2\hat\epsilon$ ($\hat\epsilon$ = the grid point
with the largest mean improvement; in the model $\Delta L(2\epsilon_{opt}) = 0$,
so this keeps the region the quadratic describes; at least the 3 smallest ε), giving
the measured $\epsilon_{opt}(B) = a/b_B$ and
$\Delta L_{opt}(B) = a^2/(2 b_B)$, with percentile intervals from resampling
the batches. Across B, the weighted linear regression $b_B = c + d/B$ gives the
*fitted* $B_{noise} = d/c$, $\epsilon_{max} = \bar a/c$ and
$\Delta L_{max} = \bar a^2/(2c)$. Predictions
$\epsilon_{max}/(1 + B_{noise}/B)$ and $\Delta L_{max}/(1 + B_{noise}/B)$
(`empirical_batch.eps_opt`, `empirical_batch.dl_opt`) are formed twice:
from the fitted constants, and from the Hessian-vector-product measurement at the
same weights on the same examples (``hessian_noise_scale``: $\epsilon_{max} =
|G|^2/G^THG$, $\Delta L_{max} = |G|^4/(2G^THG)$, $B_{noise}$).

The ε grid spans ``1e-4 … 4`` times $|G|^2/G^THG$ from the Hessian measurement
(times the run's learning rate when $G^THG \le 0$): it only places the grid;
every measured number comes from the loss changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch.func import functional_call, grad, vmap

from ...errors import InputError
from ...harness.config import OneStepSpec, spec_key
from ...harness.resume import cached, task_identity
from ...harness.tasks.base import Task
from ...theory import dl_opt, eps_opt
from . import scales
from .noise import evenly_spaced, objective_sample
from .scales import hessian_scales, saved_bytes_per_example

EPS_SPAN = (1e-4, 4.0)


@dataclass(frozen=True)
class OneStepResult:
    """Per-B measurements and predictions (``table``) and per-checkpoint constants (``summary``)."""

    table: pd.DataFrame
    summary: dict

    def to_dict(self) -> dict:
        return {"summary": self.summary, "table": self.table.to_dict(orient="list")}


def fit_step_quadratic(eps: np.ndarray, mean_dl: np.ndarray) -> tuple[float, float]:
    r"""Fit one SGD step's measured improvement to the model $\Delta L(\epsilon) =
    a\epsilon - \tfrac12 b\epsilon^2$ (McCandlish et al. 2018, eq. 2.5), through the
    origin, by least squares over the rates up to twice the best one measured (and at
    least the three smallest; non-finite improvements, steps that diverged, left out),
    and return $(a, b)$: NaN when fewer than 3 improvements are finite. The optimum is
    `step_optimum` ``(a, b)``: $\epsilon_{opt} = a/b$, $\Delta L_{opt} = a^2/2b$.

    A library function (the harness's one-step experiment uses it): measure the mean
    loss improvement of one step at a grid of learning rates ``eps`` at one batch size,
    then fit.

    >>> eps = np.array([0.1, 0.2, 0.3, 0.4, 0.6])
    >>> a, b = fit_step_quadratic(eps, 2.0 * eps - 0.5 * 5.0 * eps**2)
    >>> round(a, 9), round(b, 9), [round(v, 9) for v in step_optimum(a, b)]
    (2.0, 5.0, [0.4, 0.4])
    """
    eps = np.asarray(eps, dtype=float)
    mean_dl = np.asarray(mean_dl, dtype=float)
    if eps.ndim != 1 or eps.shape != mean_dl.shape or eps.size < 3:
        raise InputError("eps and mean_dl must be 1-D arrays of the same length >= 3")
    finite = np.isfinite(mean_dl)
    if finite.sum() < 3:  # e.g. every step diverged: no quadratic to fit
        return float("nan"), float("nan")
    k_hat = int(np.nanargmax(np.where(finite, mean_dl, -np.inf)))
    keep = eps <= 2 * eps[k_hat]
    keep[:3] = True
    keep &= finite
    if keep.sum() < 2:
        return float("nan"), float("nan")
    x = np.stack([eps[keep], -0.5 * eps[keep] ** 2], axis=1)
    coef, *_ = np.linalg.lstsq(x, mean_dl[keep], rcond=None)
    return float(coef[0]), float(coef[1])


def curvature_line(batch_sizes, b, a, sd) -> tuple[float, float, float]:
    r"""The weighted least-squares line $b_B = c + d/B$ through the per-B curvatures
    ``b`` (weights $1/\mathrm{sd}^2$) and the weighted mean $\bar a$ of the gains
    ``a``: $(\bar a, c, d)$, so that $B_{noise} = d/c$ (eq. 2.6). All NaN when an input
    is not finite or a spread is not positive (no weights: e.g. a single batch per B),
    and where fewer than two batch sizes remain: a status, not an error.
    """
    bs, b, a, sd = (np.asarray(v, float) for v in (batch_sizes, b, a, sd))
    if (len(bs) < 2 or not np.all(np.isfinite(np.concatenate([bs, b, a, sd])))
            or not np.all(sd > 0)):
        return float("nan"), float("nan"), float("nan")
    w = 1.0 / sd**2
    if not np.all(np.isfinite(w)):
        return float("nan"), float("nan"), float("nan")
    x = np.stack([np.ones_like(bs), 1.0 / bs], axis=1) * np.sqrt(w)[:, None]
    (c, d), *_ = np.linalg.lstsq(x, b * np.sqrt(w), rcond=None)
    return float(np.average(a, weights=w)), float(c), float(d)


def _pct(values, q: float) -> float:
    """Percentile ignoring NaN draws (a draw without curvature); NaN when all are NaN."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return float(np.percentile(v, q)) if v.size else float("nan")


def step_optimum(a: float, b: float) -> tuple[float, float]:
    r"""$(\epsilon_{opt}, \Delta L_{opt}) = (a/b, a^2/2b)$ of a fitted step quadratic;
    NaN when the fit has no positive gain or curvature."""
    if not (a > 0 and b > 0):
        return float("nan"), float("nan")
    return a / b, a * a / (2 * b)


def one_step_at(task: Task, state: dict, spec: OneStepSpec, *, learning_rate: float,
                key: int = 0, step: int = 0) -> OneStepResult:
    """Run the experiment at the weights ``state`` (a state dict of ``task``'s model)."""
    device = task.device
    model = task.init_model(0)
    model.load_state_dict({k: v.to(device) for k, v in state.items()})
    model = model.double()

    def f64(t):
        return t.double() if t.is_floating_point() else t

    x_o, y_o = (f64(t) for t in objective_sample(task, spec.n_examples))
    hs = hessian_scales(model, task.loss_fn, x_o, y_o, n_probes=spec.hvp_probes, seed=step)
    scale = hs["g2"] / hs["ghg"] if hs["ghg"] > 0 else learning_rate
    eps = scale * np.geomspace(*EPS_SPAN, spec.n_eps)
    eps_t = torch.tensor(eps, dtype=torch.float64, device=device)

    # batch gradients in vmap chunks of c batches, c × B × (saved bytes per example)
    # <= scales.saved_bytes_budget (2 GiB on the CPU): unchunked, the full preset's
    # sequence task would hold the float64 activations of 128 × 1024 windows at once
    # (about 1 MB each on the CPU).
    # The result does not depend on the chunk beyond round-off.
    per_example = saved_bytes_per_example(model, task.loss_fn, x_o, y_o)
    budget = scales.saved_bytes_budget(device)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss_p(p, x, y):
        return task.loss_fn(functional_call(model, (p, buffers), (x,)), y)

    losses_at = vmap(loss_p, in_dims=(0, None, None), chunk_size=64)
    with torch.no_grad():
        l0 = float(loss_p(params, x_o, y_o))
    rng = np.random.default_rng(np.random.SeedSequence([key, step]))
    rows, boots = [], {}
    n_obj = x_o.shape[0]
    for b in spec.batch_sizes:
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        idx = torch.randint(n_obj, (spec.n_batches, b), generator=gen).to(device)
        xs, ys = x_o[idx], y_o[idx]
        chunk = max(1, budget // (per_example * int(b)))
        batch_grads = vmap(grad(loss_p), in_dims=(None, 0, 0),
                           chunk_size=chunk if chunk < spec.n_batches else None)
        g = batch_grads(params, xs, ys)  # each [n_batches, ...]
        with torch.no_grad():
            moved = {
                k: (params[k] - eps_t.reshape(1, -1, *[1] * params[k].dim())
                    * g[k].unsqueeze(1)).reshape(-1, *params[k].shape)
                for k in params
            }
            dl = l0 - losses_at(moved, x_o, y_o).reshape(spec.n_batches, spec.n_eps)
        dl = dl.cpu().numpy()
        a, bb = fit_step_quadratic(eps, dl.mean(axis=0))
        e_opt, d_opt = step_optimum(a, bb)
        draws_ab = np.array([
            fit_step_quadratic(eps, dl[rng.integers(0, spec.n_batches, spec.n_batches)].mean(0))
            for _ in range(spec.n_boot)
        ])
        boots[b] = draws_ab
        opt_draws = np.array([step_optimum(*ab) for ab in draws_ab])
        rows.append({
            "batch_size": b, "a": a, "b": bb, "b_sd": float(np.std(draws_ab[:, 1])),
            "eps_opt": e_opt, "dl_opt": d_opt,
            "eps_opt_low": _pct(opt_draws[:, 0], 2.5),
            "eps_opt_high": _pct(opt_draws[:, 0], 97.5),
            "dl_opt_low": _pct(opt_draws[:, 1], 2.5),
            "dl_opt_high": _pct(opt_draws[:, 1], 97.5),
            "eps_argmax": float(eps[int(np.argmax(dl.mean(axis=0)))]),
            "dl_argmax": float(dl.mean(axis=0).max()),
        })
    table = pd.DataFrame(rows)
    bs = table["batch_size"].to_numpy(float)

    sd = table["b_sd"].to_numpy(float)
    a_bar, c, d = curvature_line(bs, table["b"].to_numpy(float), table["a"].to_numpy(float), sd)
    fit_draws = []
    for i in range(spec.n_boot):
        bi = np.array([boots[b][i, 1] for b in spec.batch_sizes])
        ai = np.array([boots[b][i, 0] for b in spec.batch_sizes])
        _, ci, di = curvature_line(bs, bi, ai, sd)
        fit_draws.append(di / ci if ci > 0 else np.nan)
    ok_fit = c > 0 and d >= 0 and a_bar > 0
    b_noise_fit = d / c if ok_fit else float("nan")
    eps_max_fit = a_bar / c if ok_fit else float("nan")
    dl_max_fit = a_bar**2 / (2 * c) if ok_fit else float("nan")
    ok_hvp = hs["ghg"] > 0 and hs["b_noise"] >= 0
    eps_max_hvp = hs["g2"] / hs["ghg"] if ok_hvp else float("nan")
    dl_max_hvp = 0.5 * hs["g2"] ** 2 / hs["ghg"] if ok_hvp else float("nan")
    nan = np.full(len(bs), np.nan)
    table["eps_opt_pred_fit"] = eps_opt(bs, eps_max_fit, b_noise_fit) if ok_fit else nan
    table["dl_opt_pred_fit"] = dl_opt(bs, dl_max_fit, b_noise_fit) if ok_fit else nan
    table["eps_opt_pred_hvp"] = eps_opt(bs, eps_max_hvp, hs["b_noise"]) if ok_hvp else nan
    table["dl_opt_pred_hvp"] = dl_opt(bs, dl_max_hvp, hs["b_noise"]) if ok_hvp else nan
    table.insert(0, "step", step)
    table.insert(0, "task", task.name)
    summary = {
        "task": task.name, "step": step, "loss": l0,
        "b_noise_fit": b_noise_fit,
        "b_noise_fit_low": _pct(fit_draws, 2.5),
        "b_noise_fit_high": _pct(fit_draws, 97.5),
        "b_noise_hvp": hs["b_noise"], "b_noise_hvp_se": hs["b_noise_se"],
        "b_simple_hvp": hs["b_simple"],
        "eps_max_fit": eps_max_fit, "eps_max_hvp": eps_max_hvp,
        "dl_max_fit": dl_max_fit, "dl_max_hvp": dl_max_hvp,
        "g2_fit": a_bar, "g2_hvp": hs["g2"], "ghg_fit": float(c), "ghg_hvp": hs["ghg"],
        "trace_h_sigma_fit": float(d), "trace_h_sigma_hvp": hs["trace_h_sigma"],
    }
    return OneStepResult(table, summary)


def run_one_step(task: Task, spec: OneStepSpec, reference, *, key: int = 0) -> OneStepResult:
    """The experiment at ``spec.n_checkpoints`` of the reference run's snapshots (kept per
    task inside an `empirical_batch.harness.resume.stage_cache` block)."""
    ident = (task_identity(task), spec_key(spec), reference.member.to_dict(),
             reference.scales[["step", "eval_loss"]].to_numpy().tolist(), key)
    return cached(task.name, "one_step", reference.member.optimizer, ident,
                  lambda: _run_one_step(task, spec, reference, key=key))


def _run_one_step(task: Task, spec: OneStepSpec, reference, *, key: int = 0) -> OneStepResult:
    tables, summaries = [], []
    for s in evenly_spaced(sorted(reference.snapshots), spec.n_checkpoints):
        res = one_step_at(task, reference.snapshots[s], spec,
                          learning_rate=reference.member.learning_rate, key=key, step=s)
        tables.append(res.table)
        summaries.append(res.summary)
    return OneStepResult(pd.concat(tables, ignore_index=True),
                         {"checkpoints": summaries})
