"""One prompt longer than the engine's context does not abort `rldata sample`: it gets its own
recorded outcome and the other tasks are sampled (real store, Ray, vLLM engine, math-verify)."""

from __future__ import annotations

import pytest

from rldata.configs.sampling import SampleConfig, SamplingSpec
from rldata.jobs.sample import run_sample
from tests.jobs.test_sample import _arith_tasks

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


def test_a_prompt_longer_than_the_context_is_recorded_and_the_rest_goes_on(store, ray_session):
    tasks = _arith_tasks(6, seed=5)
    tasks[2] = {**tasks[2], "prompt": "What is " + " + ".join(["1"] * 200) + "?"}
    store.append("tasks", tasks)
    spec = SamplingSpec(n=2, temperature=1.0, max_tokens=8, seed=0)
    summary = run_sample(store, SampleConfig(sampling=spec, batch_tasks=6, max_model_len=64))
    assert summary.prompt_too_long == 1 and summary.tasks_sampled == 6
    # its samples are not generated, so they are no verifier errors (issue 45 §5: the tour's 3,104
    # "verifier errors" were 194 such tasks x 16 samples); the ledger still counts them in n_error
    assert summary.not_generated == 2 and summary.errors == 0
    long_id = tasks[2]["task_id"]
    rows = store.sql(
        "SELECT task_id, finish_reason, completion_tokens FROM trajectories ORDER BY task_id"
    ).fetchall()
    assert len(rows) == 12
    assert {r[1] for r in rows if r[0] == long_id} == {"prompt_too_long"}
    assert all(r[1] != "prompt_too_long" and r[2] >= 1 for r in rows if r[0] != long_id)
    v = store.sql("SELECT passed, error FROM verifications WHERE task_id = $1", params=[long_id]).fetchall()
    assert len(v) == 2 and all(p is None and e.startswith("prompt_too_long") for p, e in v)
    # the ledger counts them as errors: never a pass, never a fail
    n, n_correct, n_error = store.sql(
        "SELECT n, n_correct, n_error FROM passrates WHERE task_id = $1", params=[long_id]
    ).fetchall()[0]
    assert (n, n_correct, n_error) == (0, 0, 2)
