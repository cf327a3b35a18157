"""OpenEnv MCP tool environments: a real openenv ``MCPEnvironment`` with FastMCP tools on
127.0.0.1 (``mcp`` in tests/envs/openenv_server.py).  Register lists its tools into the spec; hand-built
model turns go through the rollout's own functions (``_open`` / ``_advance``, on the Qwen2 fixture's
ChatML template) so the parse -> ``call_tool`` -> tool message path runs against the server; the
faults: server down, a tool raising, an unknown tool, garbage replies, a server killed or slow, tools
changed since registration."""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("openenv.core.env_server.mcp_environment")

from rldata.engine.core import Sample
from rldata.envs.base import EnvSpec, make_env
from rldata.envs.catalog import openenv_spec, register_env, spec_of
from rldata.envs.guard import guarded_reset, guarded_step
from rldata.envs.openenv_mcp import OpenEnvMCPEnv, list_tools, tool_result_text
from rldata.envs.tools import env_tool_schemas
from rldata.errors import RldataError
from rldata.rollout import EnvBinding, Renderer
from rldata.rollout.episodes import _advance, _Episode, _open
from rldata.rollout.score import episode_columns, unverifiable
from tests.envs.openenv_server import free_port, serve

pytestmark = pytest.mark.slow  # each server takes a few seconds to start

BUDGET = 4000
TOOLS = ["add", "divide", "submit"]


@pytest.fixture(scope="module")
def mcp():
    proc, url = serve("mcp")
    yield url
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def renderer(qwen_model):
    return Renderer.for_model(str(qwen_model))


def _spec(url, **kw) -> EnvSpec:
    d = openenv_spec("m", url, mcp=True, **kw)
    d.pop("name")
    return EnvSpec.from_dict(d)


def _call(name, args) -> str:
    return '<tool_call>\n{"name": "' + name + '", "arguments": ' + json.dumps(args) + "}\n</tool_call>"


def _turn(renderer, text: str) -> Sample:
    tok = renderer.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
    return Sample(text, tuple(ids), 0, len(ids), None, None, "stop")


def _episode(renderer, spec, task, *texts):
    ep = _Episode(task=task, seed=1, sample_idx=0)
    binding = EnvBinding("m", "1", spec)
    _open(ep, binding, renderer, BUDGET)
    assert ep.finish is None, ep.error
    for text in texts:
        assert ep.finish is None, (ep.finish, ep.error)
        _advance(ep, _turn(renderer, text), spec, renderer, BUDGET)
    return ep


def test_register_lists_the_servers_tools_into_the_spec(store, mcp):
    row, new = register_env(store, openenv_spec("calc", mcp, mcp=True, max_turns=6))
    spec = json.loads(row["spec"])
    assert new and row["kind"] == "openenv-mcp" and spec["env"] == "openenv-mcp"
    tools = spec["config"]["tools"]
    assert [t["function"]["name"] for t in tools] == TOOLS  # the server's order
    assert tools[0] == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
    assert spec["config"]["reward"] == "server"
    # the environment built from the row declares them: the rollout and the exports read them there
    assert OpenEnvMCPEnv(**spec["config"]).tool_schemas == tools
    assert env_tool_schemas(spec_of(row)) == tools
    assert register_env(store, openenv_spec("calc", mcp, mcp=True, max_turns=6))[1] is False


def test_a_tool_episode_calls_the_servers_tools_and_its_reward_is_the_verdict(renderer, mcp):
    spec = _spec(mcp, max_turns=6)
    ep = _episode(
        renderer,
        spec,
        {},  # a task from reset: the server's opening observation is the question
        _call("add", {"a": 137, "b": 253}),
        # written as the template lays calls out, so the ids can be checked against its rendering
        "I will check.\n" + _call("nope", {}) + "\n" + _call("add", {"a": 1}),
        _call("divide", {"a": 1, "b": 0}) + "\n" + _call("add", {"a": 2, "b": 2}),
        "<tool_call>{not json</tool_call>",
        _call("submit", {"answer": 390}),
    )
    prompt = renderer.tokenizer.decode(ep.prompt_ids)
    assert "What is 137+253?" in prompt and '"name": "submit"' in prompt and "<tools>" in prompt
    r = ep.result()
    assert r.finish_reason == "env_done" and r.num_turns == 5
    m = r.messages
    assert m[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c00010000", "name": "add", "arguments": '{"a": 137, "b": 253}'}],
    }
    assert m[2] == {"role": "tool", "content": "390", "tool_call_id": "c00010000"}
    # turn 2: an unknown tool never reaches the server (tool_parse_fail), the known one with a
    # missing argument does and the server's error comes back
    assert [c["name"] for c in m[3]["tool_calls"]] == ["nope", "add"]
    tool2 = m[4:6]
    assert tool2[0]["tool_call_id"] == "c00020001" and tool2[0]["content"].startswith("error: invalid_args:")
    assert tool2[1] == {
        "role": "tool",
        "content": "error: unknown tool 'nope'; tools: add, divide, submit",
        "tool_call_id": "c00020000",
    }
    # turn 3: a tool raising on the server is an error message, the next call still runs
    assert m[7]["content"] == "error: execution_error: Error calling tool 'divide': float division by zero"
    assert m[8] == {"role": "tool", "content": "4", "tool_call_id": "c00030001"}
    # turn 4: a call that does not parse, answered without a server call
    assert m[10]["content"].startswith("error: the tool call does not parse: not valid JSON")
    assert m[12] == {"role": "tool", "content": "submitted", "tool_call_id": "c00050000"}
    info = r.env_info
    assert info["tool_parser"] == "hermes" and info["tool_parse_fail"] == 2
    assert (info["tool_calls"], info["tool_errors"], info["env_reward"]) == (5, 2, 1.0)
    assert r.num_tool_calls == 5
    (v,) = unverifiable(r, max_model_len=BUDGET)
    assert v.passed is True and v.score == 1.0
    # the token ids are the conversation as the template renders it; the mask 1 on the model's turns
    whole = renderer.encode(renderer.text(r.messages, generation_prompt=False, tools=ep.tools))
    assert list(r.prompt_ids) + list(r.token_ids) == whole[: len(r.prompt_ids) + len(r.token_ids)]
    assert sum(r.mask) == r.completion_tokens < len(r.token_ids)  # tool results are masked out
    # the stored columns keep the calls and their ids
    cols = episode_columns(r, EnvBinding("m", "1", spec))
    assert cols["messages"][1]["tool_calls"][0]["id"] == cols["messages"][2]["tool_call_id"] == "c00010000"


def test_a_wrong_submit_or_an_answer_without_a_call_is_wrong(renderer, mcp):
    spec = _spec(mcp, max_turns=4)
    r = _episode(renderer, spec, {}, _call("submit", {"answer": 7})).result()
    assert r.finish_reason == "env_done" and r.env_info["env_reward"] == 0.0
    (v,) = unverifiable(r, max_model_len=BUDGET)
    assert v.passed is False
    r = _episode(renderer, spec, {}, "390").result()  # the answer turn ends it; only submit scores
    assert r.finish_reason == "env_done" and r.env_info["env_reward"] == 0.0 and r.num_tool_calls == 0
    assert unverifiable(r, max_model_len=BUDGET)[0].passed is False


def test_reward_verifier_leaves_the_answer_to_the_tasks_verifier(renderer, mcp):
    spec = _spec(mcp, max_turns=4, reward="verifier")
    task = {"prompt": "What is 20+22?", "answer": "42"}
    ep = _episode(renderer, spec, task, _call("add", {"a": 20, "b": 22}), "42")
    assert "What is 20+22?" in renderer.tokenizer.decode(ep.prompt_ids)  # the task's question
    r = ep.result()
    assert r.finish_reason == "env_done" and r.text == "42"
    assert "env_reward" not in r.env_info and r.env_info["tool_calls"] == 1
    assert unverifiable(r, max_model_len=BUDGET) is None  # it goes to the task's verifier
    with pytest.raises(RldataError, match="verifier.*dataset"):
        OpenEnvMCPEnv.task_rows(spec, n=2)


def test_ingest_from_reset_and_the_cli(tmp_path, mcp, capsys):
    from rldata import open_store
    from rldata.cli import main

    st = str(tmp_path / "s")
    code = main(["--store", st, "env", "register", "mc", "--openenv", mcp, "--mcp", "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["kind"] == "openenv-mcp" and "submit" in row["spec"]
    code = main(["--store", st, "ingest", "--env", "mc", "--n", "3", "--seed", "1"])
    _, err = capsys.readouterr()
    assert code == 0 and "added 3" in err, err
    prompts = open_store(st).sql("SELECT prompt FROM tasks ORDER BY prompt").fetchall()
    assert prompts[0][0].startswith("What is 137+253?")
    code = main(["--store", st, "env", "register", "x", "--openenv", mcp, "--reward", "verifier"])
    _, err = capsys.readouterr()
    assert code != 0 and "add --mcp" in err and len(err.strip().splitlines()) == 1


def test_a_server_that_is_not_mcp_or_is_down_is_one_line(store):
    proc, url = serve("guess")
    try:
        with pytest.raises(RldataError, match=r"^OpenEnv server at .* did not list MCP tools: server error"):
            register_env(store, openenv_spec("g", url, mcp=True))
    finally:
        proc.kill()
        proc.wait()
    down = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RldataError, match=r"^OpenEnv server at .* is not reachable: .*running"):
        register_env(store, openenv_spec("d", down, mcp=True))
    assert store.count("environments") == 0


def test_tools_changed_since_registration_stop_a_job_before_any_work(mcp):
    config = dict(_spec(mcp).config)
    OpenEnvMCPEnv.preflight(config, timeout_s=5)  # as registered: fine
    config["tools"] = config["tools"][:2]
    with pytest.raises(RldataError, match="tools changed since .* registered .*: register it again"):
        OpenEnvMCPEnv.preflight(config, timeout_s=5)


def test_a_server_killed_mid_episode_is_an_env_error():
    proc, url = serve("mcp")
    try:
        env = OpenEnvMCPEnv(url=url, tools=list_tools(url))
        assert guarded_reset(env, {}, 0, timeout_s=5).finish_reason is None
        proc.kill()
        proc.wait()
        call = {"id": "c1", "name": "add", "arguments": '{"a": 1, "b": 2}'}
        g = guarded_step(env, {"role": "assistant", "content": "", "tool_calls": [call]}, timeout_s=5)
        assert g.finish_reason == "env_error" and g.error.startswith("step():")
    finally:
        proc.kill()


def test_a_slow_tool_hits_step_timeout():
    proc, url = serve("mcp", delay_s=3.0)  # add() sleeps 3 s
    try:
        env = make_env(_spec(url))
        assert guarded_reset(env, {}, 0, timeout_s=10).finish_reason is None
        call = {"id": "c1", "name": "add", "arguments": '{"a": 1, "b": 2}'}
        g = guarded_step(env, {"role": "assistant", "content": "", "tool_calls": [call]}, timeout_s=0.5)
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


TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize(
    "reply, why",
    [
        ("<html>502</html>", "not JSON"),
        (
            '{"type": "observation", "data": {"observation": {"prompt": "hi"}, "done": false}}',
            "not a tool result",
        ),
        ('{"type": "error", "data": {"message": "boom"}}', "server error: boom"),
        (
            '{"type": "observation", "data": {"observation": {"tool_name": "add"}, "reward": "x", "done": true}}',
            "finite",
        ),
    ],
)
def test_garbage_replies_to_a_call_are_env_errors(reply, why):
    opening = '{"type": "observation", "data": {"observation": {"prompt": "go"}, "done": false}}'
    server, url = _garbage_server([opening, reply])
    try:
        env = OpenEnvMCPEnv(url=url, tools=[TOOL])
        assert guarded_reset(env, {}, 0, timeout_s=5).messages == [{"role": "user", "content": "go"}]
        call = {"id": "c1", "name": "add", "arguments": "{}"}
        g = guarded_step(env, {"role": "assistant", "content": "", "tool_calls": [call]}, timeout_s=5)
        assert g.finish_reason == "env_error" and why in g.error
    finally:
        server.shutdown()


def test_tool_result_text():
    text = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "is_error": False}
    assert tool_result_text({"tool_name": "t", "result": text}) == ("a\nb", False)
    assert tool_result_text({"tool_name": "t", "result": {**text, "is_error": True}}) == ("error: a\nb", True)
    assert tool_result_text({"tool_name": "t", "result": {"content": [], "data": [1, 2]}}) == (
        "[1, 2]",
        False,
    )
    assert tool_result_text({"tool_name": "t", "result": "plain"}) == ("plain", False)
    assert tool_result_text({"tool_name": "t", "result": None}) == ("", False)
    err = {"error_type": "timeout", "message": "slow"}
    assert tool_result_text({"tool_name": "t", "error": err}) == ("error: timeout: slow", True)
    assert tool_result_text({"tool_name": "t", "result": "x" * 50_000})[0] == "x" * 20_000


def test_config_checks():
    with pytest.raises(RldataError, match="config key 'tools'"):
        OpenEnvMCPEnv(url="http://h:1")
    with pytest.raises(RldataError, match="config key 'tools'"):
        OpenEnvMCPEnv(url="http://h:1", tools=[{"name": "add"}])
    with pytest.raises(RldataError, match="config key 'reward'"):
        OpenEnvMCPEnv(url="http://h:1", tools=[TOOL], reward="judge")
    with pytest.raises(RldataError, match="action_field"):
        OpenEnvMCPEnv(url="http://h:1", tools=[TOOL], action_field="message")
    with pytest.raises(RldataError, match="max_calls"):
        OpenEnvMCPEnv(url="http://h:1", tools=[TOOL], max_calls=0)
