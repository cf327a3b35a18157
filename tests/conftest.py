"""Shared fixtures: a real Delta store in a temp dir, and one real local Ray per test session."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: fast start
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def store(tmp_path):
    from rldata import open_store

    return open_store(tmp_path / "store")


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray started once for the whole session (it takes ~7 s to start here)."""
    import ray

    from tests.ray_helpers import init_ray

    if not ray.is_initialized():
        init_ray()
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def _session_ray_is_narrow(request):
    """A test on the session's Ray runs on its 2 CPUs even after a test that widened it."""
    if "ray_session" in request.fixturenames:
        from tests.ray_helpers import narrow_session_ray

        narrow_session_ray()


@pytest.fixture(scope="session")
def qwen_model(tmp_path_factory):
    """The tiny Qwen2-architecture fixture (rldata.models.fixture), built once per test session."""
    from rldata.models.fixture import make_qwen2_fixture

    return make_qwen2_fixture(tmp_path_factory.mktemp("qwen2-tiny"), size="tiny", seed=0)


@pytest.fixture
def qwen_hub_cache(qwen_model, tmp_path, monkeypatch):
    """The tiny Qwen2 fixture cached as hub id Qwen/Qwen2.5-0.5B-Instruct in a hub cache laid out as
    huggingface_hub lays it out; HF_HUB_CACHE points there and the hub is offline.  Returns the cache."""
    from tests.hub_helpers import lay_out_hub_cache

    cache = tmp_path / "hf-cache"
    lay_out_hub_cache(cache, "Qwen/Qwen2.5-0.5B-Instruct", qwen_model)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache
