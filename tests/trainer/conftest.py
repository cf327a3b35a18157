"""Fixtures for the trainer tests: a small real Llama saved in HF format."""

from __future__ import annotations

import pytest
from trainer_helpers import build_tiny_llama


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def train_ray(ray_session):
    """The session's Ray (wide enough for an engine, two learners and verification tasks beside the
    session's warm engines: tests/ray_helpers.py)."""
    from tests.ray_helpers import ray_with_cpus

    with ray_with_cpus(4):
        yield ray_session
