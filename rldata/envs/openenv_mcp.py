"""``openenv-mcp``: an OpenEnv MCP tool environment, driven through standard tool calls.

openenv's ``MCPEnvironment`` serves its tools through two actions on the ordinary step path
(``openenv.core.env_server.mcp_types``): ``{"type": "list_tools"}`` answers
``{"tools": [{name, description, input_schema}]}`` and ``{"type": "call_tool", "tool_name",
"arguments"}`` answers ``{"tool_name", "result", "error"}``, where ``result`` is FastMCP's
``CallToolResult`` (``content`` blocks, ``data``, ``is_error``) and ``error`` a framework error
(``error_type``: ``tool_not_found``, ``invalid_args``, ``execution_error``, ``timeout``).  Such a
server is created with ``create_app(Env, CallToolAction, CallToolObservation)``.

Here:

- :func:`list_tools` asks a server for its tools (``rldata env register NAME --openenv URL --mcp``)
  and turns each into an OpenAI function schema (``input_schema`` is already a JSON schema); the
  schemas go in the spec's ``config.tools``, so the row records them and a server whose tools
  change is a new version; :meth:`OpenEnvMCPEnv.preflight` refuses a job whose server lists other
  tools than the row's;
- the environment has ``tool_schemas``, so the rollout lays them out with the chat template's
  ``tools`` and parses the model's calls (unknown names and unparsable calls never reach the
  server: they are ``tool_parse_fail``); each call becomes one ``call_tool`` step, and its result a
  ``tool`` message with the call's ``tool_call_id``; a tool that fails on the server answers
  ``error: <error_type>: <message>`` and the episode goes on;
- the episode ends when the server says done (typically a submit tool) or at a turn without calls;
  ``reward: server`` (default): the return (the sum of the server's rewards) is the env-reward
  verdict, as for ``openenv``; ``reward: verifier``: the server only lends tools and the task's own
  verifier judges the last assistant turn, as for a single-turn task (tasks from a dataset).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rldata.envs.base import EpisodeConfig, Message, StepResult, register
from rldata.envs.openenv import (
    OpenEnvEnv,
    OpenEnvError,
    connect_session,
    exchange,
    probe,
    reset_tasks,
    step_reward,
)
from rldata.errors import RldataError

__all__ = ["REWARD_MODES", "OpenEnvMCPEnv", "list_tools", "tool_result_text"]

REWARD_MODES = ("server", "verifier")
MAX_RESULT_CHARS = 20_000  # a tool result longer than this is cut: it goes into the model's context


def _schema(t: Any, url: str) -> dict[str, Any]:
    """One MCP tool (``{name, description, input_schema}``) as an OpenAI function schema."""
    if not isinstance(t, Mapping) or not isinstance(t.get("name"), str) or not t["name"]:
        raise RldataError(f"OpenEnv server at {url}: a listed tool has no name: {str(t)[:120]}")
    params = t.get("input_schema", t.get("inputSchema"))
    if params is None:
        params = {"type": "object", "properties": {}}
    if not isinstance(params, Mapping) or params.get("type", "object") != "object":
        raise RldataError(f"OpenEnv server at {url}: tool {t['name']!r}: its input schema is not an object")
    description = t.get("description")
    return {
        "type": "function",
        "function": {
            "name": t["name"],
            "description": description if isinstance(description, str) else "",
            "parameters": {"type": "object", **dict(params)},
        },
    }


def list_tools(url: str, *, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """The MCP tools the server at ``url`` lists, as OpenAI function schemas in its order; one
    RldataError line when it is down, is not an MCP environment, or lists none."""
    probe(url, timeout_s=min(timeout_s, 10.0))
    conn = None
    try:
        conn = connect_session(url, timeout_s=timeout_s)
        data = exchange(conn, {"type": "step", "data": {"type": "list_tools"}}, timeout_s=timeout_s)
    except Exception as e:  # noqa: BLE001 - a refused handshake, a closed socket, a bad reply: one line
        raise RldataError(
            f"OpenEnv server at {url} did not list MCP tools: {' '.join(str(e).split())} (an MCP "
            "environment is served with "
            "create_app(Env, CallToolAction, CallToolObservation))"
        ) from None
    finally:
        if conn is not None:
            conn.close()
    tools = data["observation"].get("tools")
    if not isinstance(tools, list) or not tools:
        raise RldataError(f"OpenEnv server at {url} lists no MCP tools")
    schemas = [_schema(t, url) for t in tools]
    names = [s["function"]["name"] for s in schemas]
    if len(set(names)) != len(names):
        raise RldataError(f"OpenEnv server at {url} lists a tool name twice: {', '.join(names)}")
    return json.loads(json.dumps(schemas))


def _content_text(block: Any) -> str:
    if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return block["text"]
    return json.dumps(block, sort_keys=True, default=str)  # an image or resource: what it is, as JSON


def tool_result_text(obs: Mapping[str, Any]) -> tuple[str, bool]:
    """(the text the model reads, whether the call failed) of a ``call_tool`` observation."""
    if "tool_name" not in obs:
        raise OpenEnvError(f"reply is not a tool result: {json.dumps(dict(obs), default=str)[:80]!r}")
    err = obs.get("error")
    if err:
        if isinstance(err, Mapping):
            return f"error: {err.get('error_type', 'error')}: {err.get('message', '')}"[
                :MAX_RESULT_CHARS
            ], True
        return f"error: {err}"[:MAX_RESULT_CHARS], True
    result = obs.get("result")
    failed = False
    if isinstance(result, Mapping) and isinstance(result.get("content"), list):
        failed = result.get("is_error") is True
        text = "\n".join(_content_text(b) for b in result["content"])
        if not result["content"] and result.get("data") is not None:
            text = json.dumps(result["data"], default=str)
    elif isinstance(result, str):
        text = result
    elif result is None:
        text = ""
    else:
        text = json.dumps(result, sort_keys=True, default=str)
    if failed:
        text = f"error: {text}"
    return text[:MAX_RESULT_CHARS], failed


@register("openenv-mcp")
class OpenEnvMCPEnv(OpenEnvEnv):
    """One WebSocket session per episode against an OpenEnv MCP server (module docstring)."""

    name = "openenv-mcp"
    version = "1"

    def __init__(
        self,
        *,
        system_prompt: str | None = None,
        url: str | None = None,
        tools: list | None = None,
        reward: str = "server",
        pass_reward: float = 1.0,
        max_calls: int = 4,
        observation_field: str | None = None,
        step_timeout_s: float = EpisodeConfig.step_timeout_s,
        image: str | None = None,
        **config: Any,
    ):
        for key in ("action_field", "observation_role"):  # the MCP protocol fixes both
            if key in config:
                raise RldataError(
                    f"config key {key!r}: not used by an MCP environment (its calls are tool calls)"
                )
        super().__init__(
            system_prompt=system_prompt,
            url=url,
            observation_field=observation_field,
            observation_role="tool",
            pass_reward=pass_reward,
            step_timeout_s=step_timeout_s,
            image=image,
            **config,
        )
        if not isinstance(tools, list) or not tools:
            raise RldataError(
                "config key 'tools': expected the server's tool schemas (rldata env register NAME "
                "--openenv URL --mcp lists them)"
            )
        self.tool_schemas = [_schema_checked(t) for t in tools]
        if reward not in REWARD_MODES:
            raise RldataError(
                f"config key 'reward': expected one of {', '.join(REWARD_MODES)}, got {reward!r}"
            )
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
            raise RldataError(f"config key 'max_calls': expected a positive integer, got {max_calls!r}")
        self.reward_mode, self.max_calls = reward, max_calls
        self.calls = self.errors = 0

    @classmethod
    def task_rows(cls, spec, *, n: int, seed: int = 0) -> list[dict[str, Any]]:
        if spec.config.get("reward") == "verifier":
            raise RldataError(
                "this MCP environment's verdict is the task's verifier (reward: verifier): its tasks "
                "come from a dataset (rldata ingest FILE), not from the server's reset"
            )
        return reset_tasks(spec, n=n, seed=seed)

    @classmethod
    def preflight(cls, config: Mapping[str, Any], *, timeout_s: float) -> None:
        """The server is up and lists the tools this version was registered with."""
        super().preflight(config, timeout_s=timeout_s)
        url = str(config.get("url") or "")
        now = list_tools(url, timeout_s=min(timeout_s, 10.0))
        if now != config.get("tools"):
            names = [t["function"]["name"] for t in now]
            old = [
                t.get("function", {}).get("name") for t in config.get("tools") or [] if isinstance(t, Mapping)
            ]
            raise RldataError(
                f"OpenEnv server at {url}: its MCP tools changed since this environment was registered "
                f"(now {', '.join(names)}; registered {', '.join(map(str, old))}): register it again"
            )

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"tool_calls": self.calls, "tool_errors": self.errors}
        if self.reward_mode == "server":
            info.update(env_reward=self.total or 0.0, pass_reward=self.pass_reward)
        return info

    def reset(self, task: Mapping[str, Any], seed: int | None) -> list[Message]:
        opening = super().reset(task, seed)
        self.calls = self.errors = 0
        if self.reward_mode != "server":
            self.initial_info = {}  # no env_reward: the task's verifier judges the answer
        if task.get("prompt") or task.get("messages"):
            # the task is the question (a dataset row, or one ingested from this reset); an MCP
            # server's reset observation is often only a "ready"
            return self.opening(task)
        return opening

    def _call(self, call: Mapping[str, Any]) -> tuple[str, bool, bool]:
        """Run one call on the server: (result text, whether it failed, done)."""
        try:
            args = json.loads(call.get("arguments") or "{}")
        except (TypeError, ValueError, RecursionError):
            args = None
        if not isinstance(args, dict):
            return "error: arguments are not a JSON object", True, False
        msg = {"type": "call_tool", "tool_name": str(call.get("name")), "arguments": args}
        data = exchange(self.conn, {"type": "step", "data": msg}, timeout_s=self.timeout)
        self.calls += 1
        r = step_reward(data.get("reward"))
        if r is not None:
            self.total = r if self.total is None else self.total + r
        text, failed = tool_result_text(data["observation"])
        return text, failed, bool(data.get("done", False))

    def step(self, assistant_message: Message) -> StepResult:
        if self.conn is None:
            raise OpenEnvError("step() before reset()")
        calls = list(assistant_message.get("tool_calls") or [])
        if not calls:  # the answer turn: the episode ends with it
            return StepResult(observations=[], done=True, info=self._info())
        obs, done = [], False
        for i, c in enumerate(calls):
            if done:
                text, failed = "error: not run: the episode ended at an earlier call", True
            elif i >= self.max_calls:
                text, failed = f"error: at most {self.max_calls} calls per turn", True
            else:
                text, failed, done = self._call(c)
            self.errors += failed
            obs.append({"role": "tool", "content": text, "tool_call_id": c.get("id")})
        return StepResult(observations=obs, done=done, info=self._info())


def _schema_checked(t: Any) -> dict[str, Any]:
    fn = t.get("function") if isinstance(t, Mapping) and t.get("type") == "function" else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise RldataError(f"config key 'tools': expected OpenAI function schemas, got {str(t)[:120]}")
    params = fn.get("parameters")
    if not isinstance(params, Mapping) or params.get("type") != "object":
        raise RldataError(f"config key 'tools': tool {fn['name']!r}: 'parameters' must be an object schema")
    return json.loads(json.dumps(dict(t)))
