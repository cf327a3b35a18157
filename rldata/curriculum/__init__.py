"""Curriculum: the ``buckets.yaml`` config (``config``) and the sampler that follows it (``sampler``)."""

from rldata.curriculum.config import (
    DEFAULT_TRAIN_STEPS,
    METRICS,
    SCHEMA_VERSION,
    Bucket,
    Curriculum,
    CurriculumError,
    Phase,
    Promotion,
    check_buckets,
    default_phases,
    empty_selection_reason,
    from_dict,
    late_phases,
    load,
    save,
    selection_buckets,
)
from rldata.curriculum.sampler import SAMPLERS, CurriculumSampler, register_sampler

__all__ = [
    "DEFAULT_TRAIN_STEPS",
    "METRICS",
    "SAMPLERS",
    "SCHEMA_VERSION",
    "Bucket",
    "Curriculum",
    "CurriculumError",
    "CurriculumSampler",
    "Phase",
    "Promotion",
    "check_buckets",
    "default_phases",
    "empty_selection_reason",
    "from_dict",
    "late_phases",
    "load",
    "register_sampler",
    "save",
    "selection_buckets",
]
