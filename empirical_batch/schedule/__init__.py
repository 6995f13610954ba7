"""Batch-size schedules: design (App. D, Merrill et al.'s doubling, Seesaw), predicted
savings, an online rule for growing the batch during training, exporters (Megatron-LM,
Levanter, JSON/CSV) and a PyTorch scheduler.

``import empirical_batch.schedule`` does not import torch.
"""

from __future__ import annotations

from .export import parse_megatron, to_csv, to_json, to_levanter, to_megatron
from .online import ADAPTIVE_POLICIES, AdaptiveBatchRule
from .policies import BatchSchedule, design_schedule, seesaw_schedule
from .scheduler import BatchSizeScheduler
from .trajectory import NoiseTrajectory

__all__ = [
    "ADAPTIVE_POLICIES",
    "AdaptiveBatchRule",
    "BatchSchedule",
    "BatchSizeScheduler",
    "NoiseTrajectory",
    "design_schedule",
    "parse_megatron",
    "seesaw_schedule",
    "to_csv",
    "to_json",
    "to_levanter",
    "to_megatron",
]
