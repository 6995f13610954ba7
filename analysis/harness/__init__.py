"""The validation harness: does the noise scale predict the critical batch size?

Small tasks (``tasks/``) are trained at many batch sizes and learning rates as one
batched program (``trainer``); their evaluation losses land in the sweep schema
(``sweep``); the noise scales are measured along reference runs (``noise``) and one
SGD step is probed directly (``one_step``); ``report`` puts B_crit from the fit
module next to B_simple and B_noise. Every estimate and fit comes from
:mod:`empirical_batch`; the calls are gathered in :mod:`analysis.harness.library`.
"""
