"""The engine pool (rldata.engine.pool) on the real engine, Ray and store: a job on borrowed engines
writes exactly the rows a job on fresh engines writes (plain samples, episodes, a held-out
evaluation), whatever the previous user left in them (a trainer's weights, a full prefix cache, a
moved random state); a pool refuses other settings and a second borrower, and one whose engine died
refuses every loan with the cause, while warm pools start such a pool anew."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import replace

import psutil
import pytest

from rldata.configs.sampling import EngineConfig, SampleConfig, SamplingSpec, VllmConfig
from rldata.engine.pool import EngineDied, EnginePools, PoolKey
from rldata.errors import ConfigError, RldataError
from rldata.jobs.sample import run_sample

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

FRESH = "compares rows on borrowed engines with rows on engines the job starts itself"


def _tasks(store, n: int, seed: int = 3) -> None:
    from rldata.sample_data.arith import generate

    store.append(
        "tasks",
        [
            {"task_id": f"p{seed}-{i:03d}", "source": "arith", "domain": "math", "prompt": r["prompt"],
             "answer": r["answer"], "metadata": json.dumps(r.get("metadata", {}))}
            for i, r in enumerate(generate(n, seed=seed))
        ],
    )  # fmt: skip


def _stores(tmp_path, n: int, seed: int = 3):
    from rldata import open_store

    fresh, pooled = open_store(tmp_path / "fresh"), open_store(tmp_path / "pooled")
    for s in (fresh, pooled):
        _tasks(s, n, seed)
    return fresh, pooled


def _bundled_pool(engine_pools, engines: int = 2):
    """The session's pool of the bundled model at its own context (what sample jobs borrow)."""
    return engine_pools.pool_for(PoolKey.of(None, max_model_len=None, vllm=VllmConfig()), engines=engines)


def _dirty(pool) -> None:
    """Leave the pool as a training run leaves it: its weights synced in (the base model moved a
    little), prompts in the prefix cache, the random state drawn from.  Checked to change samples."""
    import ray
    import torch
    from transformers import AutoModelForCausalLM

    from rldata.engine.core import default_model_path

    spec = SamplingSpec(n=2, max_tokens=8, seed=5)
    prompts = ["12 + 7 =", "3 * 4 ="]
    with pool.lend(model=None, max_model_len=None, seed=11) as actors:
        before = ray.get(actors[0].generate.remote(prompts, spec, None, False))
        model = AutoModelForCausalLM.from_pretrained(default_model_path(), torch_dtype=torch.float32)
        gen = torch.Generator().manual_seed(0)
        moved = [(k, v + 0.05 * torch.randn(v.shape, generator=gen)) for k, v in model.state_dict().items()]
        ray.get([a.reload_weights.remote(moved) for a in actors])  # what the trainer's sync calls
        after = ray.get(actors[0].generate.remote(prompts, spec, None, False))
        ray.get([a.generate.remote(prompts, SamplingSpec(n=2, max_tokens=8, seed=None)) for a in actors])
    assert [s.token_ids for g in before for s in g] != [s.token_ids for g in after for s in g]


ROWS = (
    "SELECT traj_id, task_id, sample_idx, completion, completion_tokens, cumulative_logprob, finish_reason, "
    "reward, messages, num_turns FROM trajectories ORDER BY traj_id"
)
VERDICTS = "SELECT traj_id, verifier, verifier_version, passed, score FROM verifications ORDER BY traj_id"
LEDGER = (
    "SELECT task_id, model, params_hash, verifier_key, n, n_correct, n_error FROM passrates ORDER BY 1, 4"
)


def _same_rows(a, b, n: int) -> None:
    rows = a.sql(ROWS).fetchall()
    assert len(rows) == n and rows == b.sql(ROWS).fetchall()
    assert a.sql(VERDICTS).fetchall() == b.sql(VERDICTS).fetchall()
    assert a.sql(LEDGER).fetchall() == b.sql(LEDGER).fetchall()


@pytest.mark.fresh_engines(reason=FRESH)
def test_samples_on_a_used_pool_are_the_samples_of_fresh_engines(engine_pools, tmp_path):
    pool = _bundled_pool(engine_pools)
    fresh, pooled = _stores(tmp_path, 12)
    job = SampleConfig(
        sampling=SamplingSpec(n=4, max_tokens=8, seed=3), batch_tasks=4
    )  # 3 batches, 2 engines
    want = run_sample(fresh, job)
    _dirty(pool)
    got = run_sample(pooled, job, engines=pool)
    assert (want.engines, got.engines) == (2, 2) and want.samples == got.samples == 48
    _same_rows(fresh, pooled, 48)

    # unseeded requests draw from the engine's own random state: reseeded as a fresh engine's is
    fresh2, pooled2 = _stores(tmp_path / "unseeded", 3, seed=4)
    job = SampleConfig(sampling=SamplingSpec(n=4, max_tokens=8, seed=None), engines=1)
    run_sample(fresh2, job)
    _dirty(pool)
    run_sample(pooled2, job, engines=pool)
    q = "SELECT task_id, sample_idx, completion FROM trajectories ORDER BY 1, 2"
    assert len(fresh2.sql(q).fetchall()) == 12 and fresh2.sql(q).fetchall() == pooled2.sql(q).fetchall()


@pytest.mark.fresh_engines(reason=FRESH)
def test_episodes_on_a_used_pool_are_the_episodes_of_fresh_engines(engine_pools, tmp_path):
    pool = _bundled_pool(engine_pools)
    fresh, pooled = _stores(tmp_path, 6, seed=8)
    job = SampleConfig(sampling=SamplingSpec(n=2, max_tokens=24, seed=1), env="calculator", batch_tasks=3)
    run_sample(fresh, job)
    _dirty(pool)
    run_sample(pooled, job, engines=pool)
    _same_rows(fresh, pooled, 12)
    assert fresh.sql("SELECT count(*) FROM trajectories WHERE env_id IS NOT NULL").fetchall() == [(12,)]


@pytest.mark.fresh_engines(reason=FRESH)
def test_an_evaluation_on_a_used_pool_is_the_evaluation_of_fresh_engines(engine_pools, tmp_path):
    from rldata import open_store
    from rldata.configs.sampling import EvalConfig
    from rldata.engine.core import default_model_path
    from rldata.ingest import ingest, sample_path
    from rldata.trainer.config import TrainConfig
    from rldata.trainer.evaluate import eval_task_ids, evaluate

    pool = _bundled_pool(engine_pools)
    fresh, pooled = open_store(tmp_path / "fresh"), open_store(tmp_path / "pooled")
    for s in (fresh, pooled):
        ingest(s, sample_path("arith-heldout"))
    cfg = TrainConfig(
        model=str(default_model_path()), seed=2, max_tokens=8, eval=EvalConfig(heldout=True, size=6, n=4)
    )
    ids = eval_task_ids(fresh, cfg)
    want = evaluate(fresh, default_model_path(), cfg, ids)
    _dirty(pool)
    got = evaluate(pooled, default_model_path(), cfg, ids, engines=pool)
    assert got == want and want.samples == 24
    _same_rows(fresh, pooled, 24)


@pytest.mark.fresh_engines(reason="compares a judge on a borrowed engine with a judge on its own engine")
def test_a_judge_on_a_used_pool_writes_the_verdicts_of_its_own_engine(engine_pools, tmp_path):
    import rldata
    from rldata import open_store
    from tests.rewards.test_judge import _seed_store

    pool = _bundled_pool(engine_pools)
    fresh, pooled = open_store(tmp_path / "fresh"), open_store(tmp_path / "pooled")
    for s in (fresh, pooled):
        _seed_store(s)
    want = rldata.judge(fresh, run_id="r1", max_tokens=8, max_model_len=pool.key.max_model_len)
    _dirty(pool)
    got = rldata.judge(pooled, run_id="r1", max_tokens=8, engines=pool)  # the context follows the pool
    assert want.added == got.added == 6 and want.judge == got.judge  # the version names the model alike
    q = "SELECT traj_id, verifier, verifier_version, passed, score, extracted, error, detail FROM verifications"
    rows = fresh.sql(q + " ORDER BY traj_id").fetchall()
    assert rows == pooled.sql(q + " ORDER BY traj_id").fetchall()
    assert any("too long" not in (r[6] or "") for r in rows)  # the engine generated (not all refused)


def test_a_pool_lends_only_its_own_settings_to_one_job_at_a_time(engine_pools, store):
    import ray

    import rldata
    from rldata.engine.actors import ensure_ray
    from tests.ray_helpers import SESSION_CPUS

    pool = _bundled_pool(engine_pools)
    # a job's settings left at their defaults are the pool's; those it gives must be the pool's
    assert pool.follow(EngineConfig()) == replace(pool.config, engines=None)
    assert pool.follow(EngineConfig()).max_model_len == pool.key.max_model_len == 256
    assert pool.follow(EngineConfig(engines=1)).engines == 1
    with pytest.raises(ConfigError, match="^max_model_len: the engine pool holds") as e:
        pool.lend(model=None, max_model_len=pool.key.max_model_len // 2)
    assert e.value.field == "max_model_len"
    with pytest.raises(ConfigError) as e:
        pool.lend(model=None, max_model_len=None, vllm=VllmConfig(dtype="bfloat16"))
    assert e.value.field == "vllm.dtype"
    with pytest.raises(ConfigError, match="^engines: the pool has 2"):
        pool.lend(model=None, max_model_len=None, engines=3)
    # one job at a time: a second borrower is refused while the first holds the engines
    with pool.lend(model=None, max_model_len=None) as actors:
        assert len(actors) == 2
        with pytest.raises(RldataError, match="lent to another job"):
            pool.lend(model=None, max_model_len=None)
        # the local Ray is never restarted under a running pool (it would kill the engines)
        gcs = ray.get_runtime_context().gcs_address
        ensure_ray(None, num_cpus=SESSION_CPUS + 8)
        assert ray.get_runtime_context().gcs_address == gcs
    # the public API: engines=pool borrows (settings follow the pool), a mismatch writes nothing
    _tasks(store, 4)
    first = rldata.sample(store, n=2, max_tokens=8, engines=pool)
    again = rldata.sample(store, n=4, max_tokens=8, engines=pool)
    assert first.samples == 8 and again.samples == 8 and again.time_engine_start_s < 5
    versions = store.versions()
    with pytest.raises(ConfigError, match="^max_model_len"):
        rldata.sample(store, n=8, max_tokens=8, engines=pool, max_model_len=32)
    assert store.count("trajectories") == 16 and store.versions()["trajectories"] == versions["trajectories"]


def _kill(actor) -> None:
    """SIGKILL an engine's process and wait until Ray knows it is gone."""
    import ray

    os.kill(ray.get(actor.ping.remote()), signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:
            pass
        time.sleep(0.5)


@pytest.mark.fresh_engines(reason="kills an engine of a pool of its own (a fault)")
def test_a_pool_whose_engine_died_refuses_every_loan_with_the_cause(store):
    import rldata

    _tasks(store, 4)
    with rldata.engines(engines=1) as pool:
        _kill(pool.actors[0])
        for _ in range(2):  # refused, and refused again: the dead actor is never handed out
            with pytest.raises(EngineDied, match=r"^engine 0 of rldata-pool-\S+ \(tiny-arith\) died") as e:
                rldata.sample(store, n=2, max_tokens=8, engines=pool)
            assert "ActorDiedError" in str(e.value)  # Ray's own account of the death follows
        with pytest.raises(EngineDied):
            pool.lend(model=None, max_model_len=None)
        assert store.count("trajectories") == 0
    assert pool.closed and pool.actors == []


@pytest.mark.fresh_engines(reason="kills an engine of warm pools of their own (a fault)")
def test_warm_pools_start_anew_a_pool_whose_engine_died_and_close_idle_ones_short_of_memory():
    # The session's warm engines (tests/conftest.py) are such pools: an engine the memory monitor
    # kills fails the job it ran under, and the next job gets a live pool, not the dead one's error.
    pools = EnginePools(max_engines=1)
    key = PoolKey.of(None, max_model_len=None, vllm=VllmConfig())
    try:
        first = pools.pool_for(key)
        _kill(first.actors[0])
        again = pools.pool_for(key)
        assert again is not first and first.closed and not again.closed
        again.check()  # its engine answers
        assert pools.started == 2 and pools.loans == 2 and len(pools.died) == 1
        assert re.match(
            r"engine 0 of rldata-pool-\S+ \(tiny-arith\) died, .*: ActorDiedError: ", pools.died[0]
        )
        assert pools.pool_for(key) is again and pools.started == 2  # a live pool is lent as it is
        # Short of memory (less available than min_free_gib), idle pools close; a lent one stays.
        lease = again.lend(model=None, max_model_len=None)
        pools.min_free_gib = 2 * psutil.virtual_memory().total / 2**30
        assert pools.shed() == 0 and not again.closed
        lease.close()
        assert pools.shed() == 1 and again.closed and pools.shed_pools == 1 and pools.live_engines == 0
    finally:
        pools.close()


def test_a_pool_started_again_comes_back_at_the_most_engines_it_had(monkeypatch):
    """EnginePools' sizing alone (the pools it starts recorded, not started: the test above starts
    real ones): a pool closed for room or memory returns at its largest size, so the job that made
    it grow does not restart it a second time; another key keeps its own size."""
    from rldata.engine import pool as pool_mod

    sizes = []

    class Recorded:
        def __init__(self, config):
            sizes.append(config.engines)
            self.size, self.closed, self._dead, self._lent = config.engines, False, None, None

        def close(self):
            self.closed = True

        def check(self):
            pass

    monkeypatch.setattr(pool_mod, "EnginePool", Recorded)
    pools = EnginePools(max_engines=2)
    key = PoolKey.of(None, max_model_len=None, vllm=VllmConfig())
    other = PoolKey.of(None, max_model_len=128, vllm=VllmConfig())
    assert pools.pool_for(key, engines=1).size == 1
    assert pools.pool_for(key, engines=2).size == 2  # grown: started again with two
    assert pools.pool_for(key, engines=1).size == 2  # a larger pool serves a smaller job as it is
    assert pools.pool_for(other, engines=1).size == 1  # room: the pool of `key` closes (2 engines at most)
    assert pools.pool_for(other, engines=1).size == 1
    assert pools.pool_for(key, engines=1).size == 2  # back at two, not one then two again
    assert sizes == [1, 2, 1, 2] and pools.started == 4


def test_an_engine_is_gone_on_any_ray_error_but_a_timeout():
    import ray

    from rldata.engine.pool import engine_gone

    # what a call to an engine raises when its process is gone: Ray's memory monitor killed it (not an
    # actor error: a pool that checked only those lent its dead engine's error to every later job),
    # it was killed, its worker or node was lost
    oom = ray.exceptions.OutOfMemoryError("1 worker(s) were killed due to the node running low on memory")
    for gone in (oom, ray.exceptions.ActorDiedError(), ray.exceptions.WorkerCrashedError(),
                 ray.exceptions.NodeDiedError("node lost")):  # fmt: skip
        assert engine_gone(gone), type(gone).__name__
    assert not engine_gone(ray.exceptions.GetTimeoutError("busy"))  # still running an earlier call
    assert not engine_gone(ValueError("not Ray's"))
