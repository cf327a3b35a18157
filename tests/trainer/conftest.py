"""Fixtures for the trainer tests: a small real Llama saved in HF format."""

from __future__ import annotations

import pytest
from trainer_helpers import build_tiny_llama


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def train_ray():
    """A local Ray with 4 logical CPUs: engine + learner + verification tasks (+ an eval engine).  The
    trainer modules share it (the learner-only tests too): it stays up from one module to the next."""
    import ray

    from tests.ray_helpers import init_ray, ray_with_cpus

    with ray_with_cpus(4):
        if not ray.is_initialized():
            init_ray(4)
        yield ray
