"""The tests' one local Ray and their warm engines.

One Ray per test session, started once with a fixed number of logical CPUs (Ray's scheduling slots,
not cores) and never restarted: enough for the widest test (a trainer: an engine, two learners,
verification) beside the engines the session keeps warm (``POOL_ENGINES``, in
:class:`rldata.engine.pool.EnginePools`), so a test that starts engines of its own always finds room.
It is started through :func:`rldata.engine.actors.ensure_ray`, as a user's job starts its local Ray.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

FRESH_CPUS = max(4, os.cpu_count() or 1)  # the most a test schedules at once (what the trainer asks Ray for)
POOL_ENGINES = 3  # engines the session keeps warm at most (each holds one logical CPU)
# Idle warm engines close, the least used first, before a test starts while the machine has less
# memory than this available: room for the test's own engines (about 2 GB each), learners or CLI
# run, and for what the other pytest-xdist worker starts meanwhile, on a 24 GB machine where Ray's
# memory monitor kills a worker at 95 % (benchmarks/RESULTS.md, issue 40 §3).  One process keeps
# all its warm engines: it never has this little.  12 while an engine held 1 GiB of KV cache (peak
# 16.87 GiB used); 9 since the bundled model's takes 64 MiB (peak 13.26 GiB at 12).
FREE_GIB = 9.0
SESSION_CPUS = FRESH_CPUS + POOL_ENGINES
STARTS: list[
    str
] = []  # the GCS address of each local Ray this session saw start (one, unless a test restarts it)


def init_ray(num_cpus: int = SESSION_CPUS) -> None:
    """Start the session's Ray (or check the one running has at least ``num_cpus``); a running Ray
    with fewer is restarted once, recorded in ``STARTS``."""
    import ray

    from rldata.engine.actors import ensure_ray

    if ray.is_initialized() and ray.cluster_resources().get("CPU", 0) < num_cpus:
        ray.shutdown()  # started by a test outside the session's fixtures: replaced once, and reported
    if not ray.is_initialized():
        ensure_ray(None, num_cpus=num_cpus)
    note_ray()


def note_ray() -> None:
    """Record the running Ray, when it is one this session has not seen."""
    import ray

    if ray.is_initialized():
        gcs = ray.get_runtime_context().gcs_address
        if not STARTS or STARTS[-1] != gcs:
            STARTS.append(gcs)


@contextmanager
def ray_with_cpus(num_cpus: int) -> Iterator[None]:
    """The session's Ray, which has at least ``num_cpus`` logical CPUs for the block (it is never
    restarted: it was started wide enough for every test)."""
    init_ray()
    import ray

    have = ray.cluster_resources().get("CPU", 0)
    assert have >= num_cpus, f"the session's Ray has {have:g} CPUs, the test needs {num_cpus}"
    yield


@contextmanager
def warm_engine(pools, *, model=None, max_model_len: int | None = None) -> Iterator:
    """One engine of ``model`` (None: the bundled one) borrowed from the session's warm engines
    (``pools``: the ``engine_pools`` fixture) and seen as a local engine
    (rldata.engine.actors.RemoteEngine: ``generate``, ``count_tokens``, what the generative judge runs
    on), reset as a fresh one is (tests/engine/test_pool.py); given back after the block."""
    from rldata.configs.sampling import VllmConfig
    from rldata.engine.pool import PoolKey

    pool = pools.pool_for(PoolKey.of(model, max_model_len=max_model_len, vllm=VllmConfig()), engines=1)
    lease = pool.lend(model=model, max_model_len=max_model_len, engines=1)
    try:
        yield lease.remote(0)
    finally:
        lease.close()
