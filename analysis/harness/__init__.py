"""The paper reproduction with the validation harness (:mod:`empirical_batch.harness`).

The engine, its tasks and its analysis ship with the package; this folder keeps what
belongs to this repository: ``docs_page`` (writes the validation page of the docs
from committed results) and ``run_gpu.sh`` (the runbook of the GPU run).
"""
