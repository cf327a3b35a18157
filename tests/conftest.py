"""Shared fixtures: a real Delta store in a temp dir, one real local Ray per test session, and the
session's warm engines.  ``make test`` and ``make test-fast`` run the session on two
pytest-xdist workers (each its own session: its own Ray and warm engines), handing out whole files,
the longest first (tests/file_order.py)."""

from __future__ import annotations

import json
import os

import pytest

from tests.file_order import load, longest_first

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: fast start
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, whole files go to the workers longest first (tests/file_order.py)."""
    if getattr(config.option, "dist", "no") != "no":
        items[:] = longest_first(items, load())


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch):
    """Tables print as they print to a pipe unless a test sets COLUMNS itself: pytest-xdist's workers
    start with COLUMNS=80, a terminal width the CLI would fit its tables to."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def store(tmp_path):
    from rldata import open_store

    return open_store(tmp_path / "store")


@pytest.fixture(scope="session")
def ray_session():
    """The local Ray of the whole session, started once with ``SESSION_CPUS`` logical CPUs (~7 s
    here) and never restarted (tests/ray_helpers.py)."""
    import ray

    from tests.ray_helpers import init_ray

    init_ray()
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def engine_pools(ray_session):
    """The session's warm engines: one rldata.engine.pool.EnginePool per (model, engine settings),
    started by the first job that asks for it and lent to every later one (at most POOL_ENGINES
    engines live; the least used pool closes to make room)."""
    from rldata.engine.pool import EnginePools
    from tests.ray_helpers import FREE_GIB, POOL_ENGINES

    pools = EnginePools(max_engines=POOL_ENGINES, min_free_gib=FREE_GIB)
    SESSION_POOLS.append(pools)
    yield pools
    pools.close()


@pytest.fixture(autouse=True)
def _warm_engines(request):
    """A test on Ray (marked ``ray``, or asking for the session's Ray) runs on the session's
    Ray, and every job in it that would start engines borrows the session's warm ones instead
    (rldata.engine.pool.borrow): rows equal to fresh engines' (tests/engine/test_pool.py), each start
    paid once.  A test marked ``fresh_engines`` (its subject is the engine lifecycle, a kill, a fault,
    engine settings or a cluster) starts its own, with room made for them."""
    node = request.node
    for pools in SESSION_POOLS:  # short of memory: idle warm engines make room for this test
        pools.shed()
    on_ray = node.get_closest_marker("ray") or "ray_session" in request.fixturenames
    if not on_ray:
        yield
        return
    pools = request.getfixturevalue("engine_pools")
    if node.get_closest_marker("fresh_engines"):
        from tests.ray_helpers import FRESH_CPUS

        pools.release(FRESH_CPUS)
        yield
    else:
        with pools.active():
            yield
    from tests.ray_helpers import note_ray

    note_ray()


SESSION_POOLS: list = []  # the session's EnginePools, once a test asked for it


WORKERS: dict[str, dict] = {}  # under pytest-xdist: each worker's counts, sent when it finishes


def _counts() -> dict:
    from tests.ray_helpers import STARTS

    return {
        "loans": sum(p.loans for p in SESSION_POOLS),
        "started": sum(p.started for p in SESSION_POOLS),
        "ray_starts": len(STARTS),
        "died": [cause for p in SESSION_POOLS for cause in p.died],
        "shed": sum(p.shed_pools for p in SESSION_POOLS),
    }


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # a pytest-xdist worker: its counts go to the controller
        session.config.workeroutput["rldata_counts"] = json.dumps(_counts())


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_testnodedown(node, error):
    counts = getattr(node, "workeroutput", {}).get("rldata_counts")
    if counts:
        WORKERS[node.gateway.id] = json.loads(counts)


def pytest_terminal_summary(terminalreporter):
    # how often the warm engines saved a start, and whether a test restarted Ray (a CI log shows it)
    for name, c in sorted(WORKERS.items()) or [("", _counts())]:
        who = f"{name}: " if name else ""
        if c["loans"] or c["started"]:
            terminalreporter.write_line(
                f"{who}warm engines: {c['loans']} jobs borrowed them, {c['started']} pool starts paid, "
                f"{c['shed']} idle pools closed for memory"
            )
        for cause in c["died"]:  # a warm engine died (Ray's memory monitor?): its pool was started anew
            terminalreporter.write_line(f"warning: {who}a warm engine died: {cause[:300]}", yellow=True)
        if c["ray_starts"] > 1:
            terminalreporter.write_line(
                f"warning: {who}the session's Ray was started {c['ray_starts']} times (a test restarted it)",
                yellow=True,
            )


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
