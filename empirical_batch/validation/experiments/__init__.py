"""The validation study's experiments: the measurements it makes beyond the sweeps.

- ``noise``: the reference runs (for each optimizer, the sweep member at
  `NoiseSpec.batch_size` with the best learning rate, retrained) and the noise scales
  measured at checkpoints along them, and the averages and crossings of those scales
  that the study's fits read;
- ``one_step``: the one-step experiment, the loss decrease of one SGD step over batch
  sizes and step sizes at checkpoints of the SGD reference run, against eqs. 2.6–2.7;
- ``branched``: branched training, the critical batch measured directly from the
  reference runs' checkpoints (`empirical_batch.branched_critical_batch`);
- ``scales``: the Hessian and collector noise-scale measurements at a model's weights,
  and the chunk sizes that keep them within the device's memory.

They train through the harness engine's public pieces, as any user of the engine
would: its tasks (`empirical_batch.harness.tasks`), trainer and vmapped group step
(`empirical_batch.harness.trainer`, `empirical_batch.harness.group_step`), the plan
(`empirical_batch.harness.config`) and the stage cache (`empirical_batch.harness.resume`).
The engine does not import them: the study's analysis (`empirical_batch.validation.report`)
runs them inside the engine's analysis stages.
"""
