"""OpenEnv environments: a real openenv server on 127.0.0.1 (tests/envs/openenv_server.py)
driven through rldata's environment contract, the env-reward verdict, register and ingest, and
the faults: server down, killed mid-episode, slow, garbage replies."""

from __future__ import annotations

import json
import math
import threading

import pytest

pytest.importorskip("openenv.core.env_server.http_server")

from rldata.envs.base import EnvSpec, make_env
from rldata.envs.catalog import openenv_spec, register_env
from rldata.envs.guard import guarded_reset, guarded_step
from rldata.envs.openenv import OpenEnvEnv, observation_text, ws_url
from rldata.errors import RldataError
from rldata.rollout.episodes import Rollout
from rldata.rollout.score import unverifiable
from rldata.verify.env_reward import EnvRewardVerifier, reward_verdicts
from tests.envs.openenv_server import free_port, serve

pytestmark = pytest.mark.slow  # each server takes a couple of seconds to start


@pytest.fixture(scope="module")
def guess():
    proc, url = serve("guess")
    yield url
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def calc():
    proc, url = serve("calc")
    yield url
    proc.kill()
    proc.wait()


def _say(text):
    return {"role": "assistant", "content": text}


def _play(env, task, seed, moves, timeout=5.0):
    g = guarded_reset(env, task, seed, timeout_s=timeout)
    assert g.finish_reason is None, g.error
    out = [g]
    for m in moves:
        g = guarded_step(env, _say(m), timeout_s=timeout)
        out.append(g)
        if g.finish_reason:
            break
    return out


def test_a_two_turn_game_plays_and_its_reward_is_the_verdict(guess):
    env = OpenEnvEnv(url=guess)
    opening, miss, hit = _play(env, {}, 2, ["1", "4"])  # seed 2: 3+1
    assert opening.messages == [{"role": "user", "content": "3+1="}]
    assert miss.messages == [{"role": "user", "content": "No, higher. One more try."}] and not miss.done
    assert hit.finish_reason == "env_done" and hit.info["env_reward"] == 1.0
    assert hit.messages == [{"role": "user", "content": "Right."}]  # the last word is kept
    (v,) = reward_verdicts(hit.info)
    assert v.passed is True and v.score == 1.0
    lost = _play(OpenEnvEnv(url=guess), {}, 2, ["5", "1"])[-1]
    assert lost.finish_reason == "env_done" and lost.info["env_reward"] == 0.0
    (v,) = reward_verdicts(lost.info)
    assert v.passed is False and v.score == 0.0


def test_a_task_replays_its_stored_reset_arguments(guess):
    task = {"metadata": json.dumps({"reset": {"seed": 1}})}  # 2+1, whatever the episode seed
    for seed in (0, 7, None):
        last = _play(OpenEnvEnv(url=guess), task, seed, ["3"])[-1]
        assert last.info["env_reward"] == 1.0


def test_a_tool_env_returns_tool_messages_and_counts_calls(calc):
    env = OpenEnvEnv(url=calc, observation_role="tool")
    opening, tool, done = _play(env, {}, 1, ["CALC: 137+253", "ANSWER: 390"])
    assert opening.messages[0]["content"].startswith("What is 137+253?")
    assert tool.messages == [{"role": "tool", "content": "390"}] and tool.info["tool_calls"] == 1
    assert done.finish_reason == "env_done" and done.info == {
        "env_reward": 1.0,
        "pass_reward": 1.0,
        "tool_calls": 2,
    }


def test_sessions_are_isolated_when_episodes_run_together(guess):
    results = {}

    def one(seed):
        secret = 2 + seed % 9 + seed // 9 % 9
        results[seed] = _play(OpenEnvEnv(url=guess), {}, seed, [str(secret)])[-1].info["env_reward"]

    threads = [threading.Thread(target=one, args=(s,)) for s in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {s: 1.0 for s in range(20)}


def test_register_checks_the_server_and_ingest_makes_tasks_from_reset(store, guess):
    row, new = register_env(store, openenv_spec("guess", guess, max_turns=2))
    assert new and row["kind"] == "openenv" and json.loads(row["spec"])["config"]["url"] == guess
    from rldata.ingest.env import ingest_env

    s = ingest_env(store, "guess", n=5, seed=10)
    assert (s.read, s.added, s.duplicates) == (5, 5, 0)
    rows = store.sql(
        "SELECT prompt, domain, env_id, env_version, metadata FROM tasks ORDER BY prompt"
    ).fetchall()
    assert [r[0] for r in rows] == ["2+2=", "3+2=", "4+2=", "5+2=", "6+2="]  # seeds 10..14
    assert {r[1:4] for r in rows} == {("env-reward", "guess", row["version"])}
    assert json.loads(rows[0][4]) == {"reset": {"seed": 10}}
    assert ingest_env(store, "guess", n=5, seed=10).added == 0  # a re-run adds nothing


def test_server_down_at_register_or_start_is_one_clear_line(store):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(
        RldataError, match=r"^OpenEnv server at http://127\.0\.0\.1:\d+ is not reachable: .*running"
    ):
        register_env(store, openenv_spec("down", url))
    assert store.count("environments") == 0
    with pytest.raises(RldataError, match="is not reachable"):
        OpenEnvEnv.preflight({"url": url}, timeout_s=2)


def test_cli_register_ingest_and_the_server_down_line(tmp_path, guess, capsys):
    from rldata.cli import main

    st = str(tmp_path / "s")
    code = main(["--store", st, "env", "register", "g2", "--openenv", guess, "-f", "csv"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "g2," in out and "openenv" in out
    down = f"http://127.0.0.1:{free_port()}"
    code = main(["--store", st, "env", "register", "gone", "--openenv", down])
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code != 0 and out == ""
    assert len(lines) == 1 and "is not reachable" in lines[0] and "Traceback" not in err
    code = main(["--store", st, "ingest", "--env", "g2", "--n", "3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "added 3" in err


def test_a_server_killed_mid_episode_is_an_env_error():
    proc, url = serve("guess")
    try:
        env = OpenEnvEnv(url=url)
        assert guarded_reset(env, {}, 0, timeout_s=5).finish_reason is None
        proc.kill()
        proc.wait()
        g = guarded_step(env, _say("3"), timeout_s=5)
        assert g.finish_reason == "env_error" and g.done
        assert g.error.startswith("step():")
    finally:
        proc.kill()
    r = Rollout(
        text="3",
        token_ids=(),
        prompt_tokens=1,
        completion_tokens=1,
        cumulative_logprob=None,
        logprobs=None,
        finish_reason="env_error",
        env_error=g.error,
    )
    (v,) = unverifiable(r, max_model_len=64)
    assert v.passed is None and v.score == 0.0 and v.error.startswith("env_error: step():")


def test_a_slow_server_hits_step_timeout():
    proc, url = serve("guess", delay_s=3.0)
    try:
        spec = EnvSpec(env="openenv", config={"url": url}, step_timeout_s=0.5)
        env = make_env(spec)
        assert env.timeout == 0.5  # the spec's step_timeout_s reaches the receive timeout too
        assert guarded_reset(env, {}, 0, timeout_s=0.5).finish_reason is None  # reset is quick
        g = guarded_step(env, _say("1"), timeout_s=0.5)
        assert g.finish_reason == "env_error" and "0.5" in g.error
    finally:
        proc.kill()


def _garbage_server(replies):
    """A WebSocket server on /ws answering each message with the next of ``replies``."""
    from websockets.sync.server import serve as ws_serve

    port = free_port()
    it = iter(replies)

    def handler(conn):
        for _ in conn:
            conn.send(next(it, "{}"))

    server = ws_serve(handler, "127.0.0.1", port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    "reply, why",
    [
        ("<html>502 Bad Gateway</html>", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"type": "state", "data": {}}', "not an observation"),
        ('{"type": "observation", "data": {"reward": 1.0, "done": true}}', "no observation"),
        ('{"type": "error", "data": {"message": "boom"}}', "server error: boom"),
        ('{"type": "observation", "data": {"observation": {}, "done": "yes"}}', "not a bool"),
        ('{"type": "observation", "data": {"observation": {}, "reward": NaN, "done": true}}', "finite"),
        ('{"type": "observation", "data": {"observation": {}, "reward": "1", "done": true}}', "finite"),
        ('{"type": "observation", "data": {"observation": {}, "reward": true, "done": true}}', "finite"),
    ],
)
def test_garbage_replies_are_env_errors_never_a_pass(reply, why):
    opening = '{"type": "observation", "data": {"observation": {"prompt": "go"}, "done": false}}'
    server, url = _garbage_server([opening, reply])
    try:
        env = OpenEnvEnv(url=url)
        assert guarded_reset(env, {}, 0, timeout_s=5).messages == [{"role": "user", "content": "go"}]
        g = guarded_step(env, _say("anything"), timeout_s=5)
        assert g.finish_reason == "env_error" and why in g.error
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    "info",
    [
        {},
        {"env_reward": None},
        {"env_reward": math.nan},
        {"env_reward": math.inf},
        {"env_reward": "1.0"},
        {"env_reward": True},
        {"env_reward": 1.0, "pass_reward": math.nan},
        {"env_reward": 1.0, "pass_reward": "0"},
    ],
)
def test_a_bad_reward_is_an_error_verdict_scored_below_any_wrong_answer(info):
    (v,) = reward_verdicts(info) if "env_reward" in info else EnvRewardVerifier().verify("x", {})
    assert v.passed is None and v.score == 0.0 and v.error.startswith("env-reward:")


def test_reward_rules():
    assert [(v.passed, v.score) for v in reward_verdicts({"env_reward": 5.0, "pass_reward": 1.0})] == [
        (True, 1.0)
    ]
    assert [(v.passed, v.score) for v in reward_verdicts({"env_reward": -3.0})] == [(False, 0.0)]
    assert [(v.passed, v.score) for v in reward_verdicts({"env_reward": 0.5, "pass_reward": 0.5})] == [
        (True, 0.5)
    ]
    assert [(v.passed, v.score) for v in reward_verdicts({"env_reward": 0.4, "pass_reward": 0.5})] == [
        (False, 0.4)
    ]


def test_config_and_url_checks():
    assert ws_url("http://h:1") == "ws://h:1/ws" and ws_url("https://h/x/") == "wss://h/x/ws"
    with pytest.raises(RldataError, match="expected http"):
        OpenEnvEnv(url="h:1")
    with pytest.raises(RldataError, match="observation_role"):
        OpenEnvEnv(url="http://h:1", observation_role="assistant")
    with pytest.raises(RldataError, match="pass_reward"):
        OpenEnvEnv(url="http://h:1", pass_reward=math.nan)
    with pytest.raises(RldataError, match="takes no config keys"):
        OpenEnvEnv(url="http://h:1", colour="red")
    assert observation_text({"prompt": "a", "text": "b"}) == "a"
    assert observation_text({"messages": [{"role": "user", "content": "hi"}]}) == "hi"
    assert observation_text({"board": [1, 2]}) == '{"board": [1, 2]}'


def test_a_sample_job_whose_server_is_down_stops_with_one_line_before_any_work(store):
    from rldata import api
    from rldata.ingest.env import ingest_env

    proc, url = serve("guess")
    try:
        register_env(store, openenv_spec("g", url))
        ingest_env(store, "g", n=2)
    finally:
        proc.kill()
        proc.wait()
    with pytest.raises(RldataError, match=r"^OpenEnv server at .* is not reachable"):
        api.sample(store, n=2, max_tokens=4)
    assert store.count("trajectories") == 0 and store.count("verifications") == 0
