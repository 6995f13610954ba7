"""The validation study: does the model of McCandlish et al. (2018) predict real training?

The study runs on what the harness engine (`empirical_batch.harness`) trains — sweeps
of small models over batch size, learning rate and seed, and its own experiments: the
noise scales along reference runs, the one-step experiment, branched training — and uses
the engine, and the fit layer (`empirical_batch.fit`), only through their public
functions, as any user would:

- ``experiments``: the reference runs and the noise scales measured along them
  (``noise``, with the Hessian and collector measurements of ``scales``), the one-step
  experiment (``one_step``) and branched training (``branched``), trained through the
  engine's tasks, trainer and stage cache;
- ``fits``: per task and optimizer, the targets (`empirical_batch.fit.choose_targets`),
  B_crit at each, the noise scales averaged up to each target (the model's
  B_crit = ∫𝓑 ds / ∫ds, App. D) and at it, and the Table-1-style row;
- ``uncertainty``: seed-bootstrap intervals of the growth of B_crit and of B_crit ∝ L^k;
- ``b_crit_law``: Kaplan et al.'s B_crit(L) = B*/L^(1/α_B) per task and optimizer;
- ``claims``: the paper's claims, each with a verdict from its interval;
- ``report``: the ``analyze`` and ``report`` stages (tables, figures, ``report.md``),
  with ``markdown`` and ``figures`` for the output, each task's fits cached under a
  hash of their inputs;
- ``study``: `run_study`, the engine's run with the study as its analysis;
- ``curves``: the study's fit settings (``FIT_OPTIONS``) in one place.

``empirical-batch harness`` runs it (through ``study.run_study``). Needs torch
(through the harness) and matplotlib for the figures; ``import empirical_batch`` does not
import this package.
"""

from .._optional import check_installed

check_installed("torch", by="the validation study", extra="harness")
