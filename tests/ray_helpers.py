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
    (the session's) is replaced and given back after; with none running, the block's driver starts
    its own (``ensure_ray``) and keeps it."""
    import ray

    restore = ray.is_initialized() and ray.cluster_resources().get("CPU", 0) < num_cpus
    if restore:
        ray.shutdown()
    try:
        yield
    finally:
        if restore:
            ray.shutdown()
            init_ray(SESSION_CPUS)
