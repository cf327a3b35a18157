"""Fixtures for the trainer tests: a small real Llama saved in HF format."""

from __future__ import annotations

import pytest
from trainer_helpers import build_tiny_llama


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
