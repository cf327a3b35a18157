"""Fixtures for the trainer tests: a small real Llama saved in HF format."""

from __future__ import annotations

import pytest
from trainer_helpers import build_tiny_llama


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def train_ray():
    """A local Ray with 4 logical CPUs: engine + learner + verification tasks (+ an eval engine)."""
    import ray

    env = {"env_vars": {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}}
    restore = ray.is_initialized() and ray.cluster_resources().get("CPU", 0) < 4
    if restore:
        ray.shutdown()
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False, runtime_env=env)
    yield ray
    if restore:  # give the session back the 2-CPU Ray that tests/conftest.py started
        ray.shutdown()
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=env)
