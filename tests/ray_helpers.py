"""The tests' local Ray: the session's 2-CPU instance (tests/conftest.py) and a wider one for a test
that schedules more actors at once (engine, learners, verification, an eval engine)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

SESSION_CPUS = 2
_ENV = {"env_vars": {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}}  # in-process engines start fast


def init_ray(num_cpus: int = SESSION_CPUS) -> None:
    import ray

    ray.init(
        address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, runtime_env=_ENV
    )


@contextmanager
def ray_with_cpus(num_cpus: int) -> Iterator[None]:
    """A local Ray with at least ``num_cpus`` logical CPUs for the block.  A narrower running one
    (the session's) is shut down and the block's driver starts its own (``ensure_ray``); with none
    running, the driver starts one too.  The wide Ray is left running after the block: the next test
    that needs one reuses it instead of paying two restarts (~8 s each here), and a test that asks
    for the session's Ray gets the narrow one back first (``narrow_session_ray``)."""
    import ray

    if ray.is_initialized() and ray.cluster_resources().get("CPU", 0) < num_cpus:
        ray.shutdown()
    yield


def narrow_session_ray() -> None:
    """Put the session's ``SESSION_CPUS`` Ray back where a wider one runs (left by ``ray_with_cpus``):
    tests on the session's Ray size their engines by its CPUs."""
    import ray

    if ray.is_initialized() and ray.cluster_resources().get("CPU", 0) != SESSION_CPUS:
        ray.shutdown()
        init_ray(SESSION_CPUS)
