"""veRL's side of ``rldata export --format verl``: a tool class, an interaction and a reward function
that run rldata's environments and verifiers inside a veRL job, so a veRL run trains on the episodes
and rewards rldata measured.

veRL's tool agent loop (``agent_name: tool_agent``, ``actor_rollout_ref.rollout.multi_turn``) loads
the tools of ``tool_config_path`` and the interactions of ``interaction_config_path`` by class path;
the export writes both files, generated from the environment's tools.  During an episode:

- a turn with tool calls: veRL calls :class:`RldataTool` once per call; the tool steps the episode's
  rldata environment with that call (the same ``step`` an rldata episode makes) and answers with the
  environment's tool message;
- a turn without tool calls: veRL hands the conversation to :class:`RldataInteraction`, which steps
  the environment with the assistant's message; the environment's observation goes back as the next
  user turn, and when the episode ends the interaction scores it as rldata does (the environment's
  reward where it owns one, else the task's verifier on that last assistant turn) and returns that
  score as the turn's score;
- :func:`compute_score` (``custom_reward_function``) gives an episode the interaction's final score
  (veRL passes the turn scores in ``extra_info``) and a plain task rldata's verifier on the response.

The tool and the interaction of one episode share its environment, keyed by veRL's request id (the
``agent_data`` veRL passes to a tool, and the interaction's instance id).  The classes follow veRL's
``BaseTool`` and ``BaseInteraction`` interfaces (read from veRL's source: ``verl/tools/base_tool.py``,
``verl/interactions/base.py``, ``verl/experimental/agent_loop/tool_agent_loop.py``) without importing
veRL, which is not an rldata dependency; a tool's answer is veRL's ``ToolResponse`` when veRL is
importable (it is inside a veRL job).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rldata.envs.base import EnvSpec, make_env
from rldata.envs.guard import guarded_close, guarded_reset, guarded_step
from rldata.verify.base import Verdict, all_passed
from rldata.verify.env_reward import reward_verdicts
from rldata.verify.run import verify_many

__all__ = [
    "INTERACTION_NAME",
    "RldataInteraction",
    "RldataTool",
    "compute_score",
    "interaction_config",
    "tool_config",
    "verl_schema_problem",
]

INTERACTION_NAME = "rldata"  # extra_info.interaction_kwargs.name: the interaction veRL looks up
_KEPT = 4096  # open episodes a worker keeps; the oldest are closed beyond (veRL never says an episode ended)


# ---- the files the export writes ------------------------------------------------------------
def tool_config(schemas: list[dict]) -> dict:
    """veRL's ``tool_config_path`` YAML (as a mapping): one native :class:`RldataTool` per tool, with
    its OpenAI schema (``verl.tools.utils.tool_registry.initialize_tools_from_config`` reads
    ``tools[].class_name``, ``config.type`` and ``tool_schema``)."""
    return {
        "tools": [
            {"class_name": f"{__name__}.RldataTool", "config": {"type": "native"}, "tool_schema": dict(s)}
            for s in schemas
        ]
    }


def interaction_config() -> dict:
    """veRL's ``interaction_config_path`` YAML (as a mapping): :class:`RldataInteraction` under
    :data:`INTERACTION_NAME` (``initialize_interactions_from_config`` reads ``interaction[].name``,
    ``class_name`` and ``config``)."""
    return {
        "interaction": [
            {"name": INTERACTION_NAME, "class_name": f"{__name__}.RldataInteraction", "config": {}}
        ]
    }


def verl_schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why veRL's ``OpenAIFunctionToolSchema`` (a pydantic model) would refuse a tool schema, or None:
    a function needs a name and a description, its parameters an object of properties each with one
    ``type`` (a string) and an optional description and string ``enum``, and a ``required`` list."""
    fn = schema.get("function") if isinstance(schema, Mapping) else None
    if schema.get("type") != "function" or not isinstance(fn, Mapping):
        return "not a function tool"
    name = fn.get("name", "?")
    if not isinstance(fn.get("name"), str) or not isinstance(fn.get("description"), str):
        return f"tool {name}: veRL needs a name and a description"
    params = fn.get("parameters") or {"type": "object", "properties": {}, "required": []}
    props = params.get("properties")
    if not isinstance(params.get("type"), str) or not isinstance(props, Mapping):
        return f"tool {name}: parameters must be an object with properties"
    if not isinstance(params.get("required", []), list):
        return f"tool {name}: required must be a list"
    for p, spec in props.items():
        if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
            return f"tool {name}: parameter {p} must have one type (veRL takes a single type name)"
        enum = spec.get("enum")
        if enum is not None and not (isinstance(enum, list) and all(isinstance(e, str) for e in enum)):
            return f"tool {name}: parameter {p}: veRL takes string enums only"
        extra = set(spec) - {"type", "description", "enum"}
        if extra:
            return f"tool {name}: parameter {p}: veRL's schema has no {', '.join(sorted(extra))}"
    return None


# ---- one rldata episode inside a veRL rollout -----------------------------------------------
@dataclass
class _Episode:
    spec: EnvSpec
    task: dict
    env: Any
    info: dict = field(default_factory=dict)
    turns: int = 0
    calls: int = 0
    closed: bool = False
    error: str | None = None


_EPISODES: dict[str, _Episode] = {}
_LOCK = threading.Lock()


def _open(key: str, kwargs: Mapping[str, Any]) -> _Episode:
    """The episode of ``key`` (veRL's request id), opened with the environment of ``kwargs`` (the
    export's ``env_spec`` and ``task``, JSON text) when it is not open yet."""
    with _LOCK:
        ep = _EPISODES.get(key)
        if ep is not None:
            return ep
    spec = EnvSpec.from_dict(json.loads(kwargs["env_spec"]))
    task = json.loads(kwargs["task"])
    env = make_env(spec)
    ep = _Episode(spec, task, env)
    g = guarded_reset(env, task, None, timeout_s=spec.episode.step_timeout_s)
    if g.finish_reason == "env_error":
        ep.closed, ep.error = True, g.error
    ep.info.update(g.info)
    start = getattr(env, "initial_info", None)
    if isinstance(start, Mapping):
        ep.info.update(start)
    with _LOCK:
        if len(_EPISODES) >= _KEPT:  # veRL never says an episode ended without an interaction
            old = next(iter(_EPISODES))
            _close(_EPISODES.pop(old))
        return _EPISODES.setdefault(key, ep)


def _close(ep: _Episode) -> None:
    if not ep.closed:
        ep.closed = True
        ep.info.update(guarded_close(ep.env, timeout_s=ep.spec.episode.step_timeout_s))


def _finish(key: str) -> None:
    with _LOCK:
        ep = _EPISODES.pop(key, None)
    if ep is not None:
        _close(ep)


def _verdicts(ep: _Episode, text: str) -> list[Verdict]:
    """The episode's verdict as rldata scores it: an environment error is an error; the environment's
    reward where it reports one (rldata.verify.env_reward); else the task's verifier on the last
    assistant turn."""
    if ep.error:
        return [Verdict.failure(f"env_error: {ep.error}")]
    if "env_reward" in ep.info:
        return reward_verdicts(ep.info)

    t = ep.task
    item = {
        "answer": t.get("answer"),
        "tests": t.get("tests"),
        "metadata": t.get("metadata"),
        "prompt": t.get("prompt"),
    }
    return verify_many(
        [(t.get("domain") or "math", text, item)], timeout_s=float(t.get("verify_timeout_s") or 10.0)
    )[0]


def _tool_response(text: str):
    """veRL's ToolResponse inside a veRL job; a plain stand-in with the same fields elsewhere."""
    try:
        from verl.tools.schemas import ToolResponse
    except ImportError:
        return _Response(text)
    return ToolResponse(text=text)


@dataclass
class _Response:
    text: str | None = None
    image: list | None = None
    video: list | None = None


async def _in_thread(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


class RldataTool:
    """A veRL native tool that runs one of an rldata environment's tools through the environment's
    ``step`` (veRL's ``BaseTool`` interface: ``create``, ``execute``, ``calc_reward``, ``release``)."""

    def __init__(self, config: dict, tool_schema: Any):
        self.config = config
        self.tool_schema = tool_schema
        fn = tool_schema["function"] if isinstance(tool_schema, Mapping) else tool_schema.function
        self.name = fn["name"] if isinstance(fn, Mapping) else fn.name
        self._kwargs: dict[str, dict] = {}

    def get_openai_tool_schema(self):
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs) -> tuple[str, Any]:
        instance_id = instance_id or str(uuid.uuid4())
        self._kwargs[instance_id] = dict(kwargs.get("create_kwargs") or kwargs)
        return instance_id, _tool_response("")

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs
    ) -> tuple[Any, float, dict]:
        agent = kwargs.get("agent_data")
        key = getattr(agent, "request_id", None) or instance_id
        ep = await _in_thread(_open, key, self._kwargs.get(instance_id, {}))
        if ep.closed:
            return _tool_response(f"error: the environment is closed ({ep.error or 'episode over'})"), 0.0, {}
        ep.calls += 1
        call = {
            "id": f"c{ep.turns % 10000:04d}{ep.calls % 10000:04d}",
            "name": self.name,
            "arguments": json.dumps(parameters),
        }
        msg = {"role": "assistant", "content": "", "tool_calls": [call]}
        g = await _in_thread(lambda: guarded_step(ep.env, msg, timeout_s=ep.spec.episode.step_timeout_s))
        ep.info.update(g.info)
        if g.finish_reason == "env_error":
            ep.closed, ep.error = True, g.error
            return _tool_response(f"error: {g.error}"), 0.0, {}
        if g.done:
            ep.closed = True
        text = "\n".join(m.get("content") or "" for m in g.messages if m.get("role") == "tool") or "\n".join(
            m.get("content") or "" for m in g.messages
        )
        return _tool_response(text), 0.0, {}

    async def calc_reward(self, instance_id: str, **kwargs) -> float:
        return 0.0  # the episode is scored once, at its end (RldataInteraction)

    async def release(self, instance_id: str, **kwargs) -> None:
        self._kwargs.pop(instance_id, None)
        if instance_id in _EPISODES:  # a call without veRL's agent_data opened an episode of its own
            await _in_thread(_finish, instance_id)


class RldataInteraction:
    """A veRL interaction that steps an rldata environment with each assistant turn that calls no tool
    (veRL's ``BaseInteraction`` interface) and scores the episode when it ends."""

    def __init__(self, config: dict):
        self.config = config
        self.name = config.get("name", INTERACTION_NAME)

    async def start_interaction(self, instance_id: str | None = None, **kwargs) -> str:
        instance_id = instance_id or str(uuid.uuid4())
        await _in_thread(_open, instance_id, kwargs)
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs
    ) -> tuple[bool, str, float, dict[str, Any]]:
        ep = await _in_thread(_open, instance_id, kwargs)
        text = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"), "")
        if isinstance(text, list):  # multimodal content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, Mapping))
        ep.turns += 1
        done, said = ep.closed, []
        if not ep.closed:
            g = await _in_thread(
                lambda: guarded_step(
                    ep.env, {"role": "assistant", "content": text}, timeout_s=ep.spec.episode.step_timeout_s
                )
            )
            ep.info.update(g.info)
            if g.finish_reason == "env_error":
                ep.closed, ep.error = True, g.error
            done = g.finish_reason is not None
            said = list(g.messages)
        if done or ep.turns >= ep.spec.episode.max_turns:
            verdicts = await _in_thread(_verdicts, ep, text)
            await _in_thread(_finish, instance_id)
            score = 1.0 if all_passed(verdicts) else 0.0  # an error scores as a wrong answer
            return True, "", score, {"rldata_passed": all_passed(verdicts), "rldata_turns": ep.turns}
        return False, "\n".join(m.get("content") or "" for m in said), 0.0, {}

    async def calculate_score(self) -> float:
        return 0.0

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs) -> None:
        if instance_id is not None:
            await _in_thread(_finish, instance_id)


# ---- the reward function (custom_reward_function) -------------------------------------------
def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs
) -> float:
    """veRL's ``custom_reward_function`` (``path: pkg://rldata.interop.verl``, ``name: compute_score``).

    An environment task (``extra_info.rldata_episode``): the score :class:`RldataInteraction` gave the
    episode's last turn (veRL passes the turn scores in ``extra_info``), 0.0 when the episode ended
    before the environment could score it (veRL's turn or length limit), as rldata scores an episode it
    cut short.  A plain task: rldata's verifier for ``extra_info.domain`` on the response against the
    ground truth (a code task's is its test spec), 1.0 when every layer passed, else 0.0."""
    info = extra_info or {}
    if info.get("rldata_episode"):
        scores = info.get("turn_scores")
        scores = list(scores) if scores is not None else []
        return float(scores[-1]) if len(scores) else 0.0

    domain = info.get("domain") or "math"
    task = (
        {"answer": None, "tests": ground_truth}
        if domain == "code"
        else {"answer": ground_truth, "tests": None}
    )
    (v,) = verify_many([(domain, solution_str, task)], timeout_s=10.0)
    return 1.0 if all_passed(v) else 0.0
