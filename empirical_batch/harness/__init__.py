"""The validation harness: real training sweeps of small models, as one batched program.

A *task* (`empirical_batch.harness.tasks.base.Task`: a model, its data and its loss) is
trained at many batch sizes, learning rates and seeds at once (``trainer``: the members
of a grid are stacked and advanced with ``torch.func.vmap``); its evaluation losses land
in the sweep schema (``sweep``, with ``--shard i/n`` for job arrays, and ``distribute``
for the shards through any `concurrent.futures.Executor`: local processes, Dask, Ray).
The validation study, `empirical_batch.validation`, trains its experiments through these
pieces (the noise scales along reference runs, the one-step experiment and branched
training, `empirical_batch.validation.experiments`) and puts B_crit from
`empirical_batch.fit` next to them. ``config`` holds the presets (``tiny``, ``cpu``,
``full``) and ``pipeline`` the engine's stages (the analysis stages run an `Analysis`
passed in: the study's, through `empirical_batch.validation.study.run_study`);
``resume`` keeps each finished unit of a run on disk (a rerun continues;
``--time-budget`` stops between units), ``files`` the rule that the harness never writes
over nor removes a file it did not write, ``device`` the device choice shared by the
pipeline and the shards, ``options`` a run's options (`HarnessOptions`, checked once and
passed to the stages).

Your own task: subclass ``Task`` (see its docstring for the protocol), register it
with `empirical_batch.harness.tasks.register_task`, and run a sweep of it with
`empirical_batch.harness.sweep.run_sweep` (``tests/test_harness_user_task.py`` is a
complete example: a user-defined regression task swept over batch sizes and fitted).

Needs torch (and scikit-learn for the digits task); ``import empirical_batch`` does not
import this package.
"""

from .._optional import check_installed

check_installed("torch", by="the validation harness", extra="harness")
