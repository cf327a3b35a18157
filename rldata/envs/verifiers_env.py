"""``verifiers``: a Prime Intellect verifiers v1 environment (verifiers >= 0.4) as an rldata environment.

``rldata env register NAME --verifiers ID [--config JSON]`` records ``{env: verifiers, config: {id,
env_config, ...}}``.  ID is an installed v1 environment: a module, or a hub id ``owner/name[@version]``
(verifiers' own loader imports module ``name``: a package exporting one ``Taskset`` subclass in
``__all__``, optionally its ``Harness`` and ``Env``); ``env_config`` is the rest of its ``EnvConfig``
(``{"taskset": {...}, "agent": {"harness": {...}}}``), which ``verifiers.load_environment`` builds.

- **Tasks** (``rldata ingest --env NAME --n K``): the taskset's first K tasks (from task ``seed``).
  ``Task.key`` is the task's external id; the task data (``model_dump``) and the schema of the fields
  its ``TaskData`` class adds go in the task's metadata (``{"verifiers": {key, hash, type, data,
  schema}}``); the prompt's text is the task's prompt.
- **Turns** run in rldata's batched rollout; rldata plays the harness's chat loop (what verifiers'
  ``null`` harness does): the opening is the harness's ``resolve_prompt`` of the task, the tools are
  the task's (and taskset's) MCP ``Toolset``s, listed over MCP and laid out by the chat template's
  ``tools=``; each call of the model is an MCP ``call_tool`` (an error result answers ``error: ...``);
  a turn without calls is the answer, and the task's ``Trace`` stops (``@vf.stop``) are asked after
  each turn.  Toolsets run in-process, one MCP session each per episode (an in-memory transport), or
  at their ``config.url`` when they are served elsewhere.
- **Reward**: at the end the task scores a v1 ``Trace`` of the episode (``Task.score``: its
  ``@vf.reward`` and ``@vf.metric`` functions); the weighted total is ``info["env_reward"]`` (the
  ``env-reward`` verifier makes it the verdict, pass at ``pass_reward``) and the per-function scores
  are stored in ``env_info`` (``rewards``: {name: {score, weight}}, ``metrics``).  A rubric that raises
  or leaves a reward unscored is an error verdict, never a pass; an episode rldata cuts short
  (``max_turns``, ``length``) keeps reward 0: wrong.

What rldata cannot run is refused when the environment is registered or a job binds it, in one line:
a harness that runs its own program (``bash``, coding agents; the taskset's implicit default ``bash``
is played as the chat loop instead), multi-agent envs, tasks that need a runtime or a container
(``setup``/``finalize``, runtime-reading rewards), judges (they call a model endpoint), Request or
Response hooks (they need verifiers' interception server) and toolsets with a ``State`` channel.
verifiers 0.1.x (``SingleTurnEnv``, ``MultiTurnEnv``, ``ToolEnv``, ``Rubric``: removed in 0.4.0) is not
read any more: its specs and installs get a migration message.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import json
import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rldata.envs.base import BaseEnv, Message, StepResult, keep_signal_handlers, register
from rldata.errors import RldataError

__all__ = ["VerifiersEnv", "describe", "load", "migration_message", "task_rows"]

_MAX_RESULT = 20_000  # characters of one tool result
_HUB_ID = re.compile(
    r"^(?:(?P<owner>[A-Za-z0-9_.-]+)/)?(?P<name>[A-Za-z0-9_.-]+)(?:@(?P<version>[^@/\s]+))?$"
)
_MIGRATE = (
    "rldata reads verifiers >= 0.4 (its v1 API: Taskset, Task, Harness, Env); the 0.1.x API "
    "(SingleTurnEnv, MultiTurnEnv, ToolEnv, Rubric) was removed in verifiers 0.4.0"
)


def migration_message(what: str) -> str:
    return (
        f"{what}: {_MIGRATE}: pip install 'verifiers>=0.4,<0.5', port the environment to "
        "verifiers.v1 and register it again: rldata env register NAME --verifiers ID (docs/environments.md)"
    )


def _vf():
    """``verifiers.v1``, or one line saying what to install (or that 0.1.x is installed)."""
    try:
        import verifiers
    except ImportError:
        raise RldataError(
            "environment 'verifiers' needs the verifiers package: pip install 'verifiers>=0.4,<0.5'"
        ) from None
    try:
        import verifiers.v1 as vf
    except ImportError:
        raise RldataError(
            migration_message(f"verifiers {getattr(verifiers, '__version__', '?')} is installed")
        ) from None
    return vf


@dataclass(frozen=True)
class Loaded:
    """One loaded v1 environment (cached per process: loading may read a dataset)."""

    ident: str
    taskset: Any  # verifiers Taskset
    task_cls: type
    data_cls: type
    harness: Any  # the verifiers Harness whose chat loop rldata plays
    harness_id: str
    agent: Any  # the seat's AgentConfig (recorded on the traces rldata scores)
    package: str | None  # "dist==version" of the installed package, None for a loose module


_LOADED: dict[tuple[str, str], Loaded] = {}
_LOCK = threading.Lock()


def _package(module: str) -> str | None:
    top = module.split(".")[0]
    for dist in importlib.metadata.packages_distributions().get(top, []):
        try:
            return f"{dist}=={importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def load(ident: str, env_config: Mapping[str, Any] | None = None) -> Loaded:
    """The v1 environment ``ident`` (module or hub id) with ``env_config``, checked for what rldata
    runs (module docstring); one line naming the problem otherwise."""
    if not isinstance(ident, str) or not _HUB_ID.match(ident):
        raise RldataError(f"config key 'id': {ident!r} is not a module or hub id (owner/name[@version])")
    if env_config is not None and not isinstance(env_config, Mapping):
        raise RldataError("config key 'env_config': expected a mapping (the environment's EnvConfig)")
    key = (ident, json.dumps(dict(env_config or {}), sort_keys=True, default=str))
    with _LOCK:
        if key not in _LOADED:
            _LOADED[key] = _load(ident, dict(env_config or {}))
        return _LOADED[key]


def _load(ident: str, env_config: dict[str, Any]) -> Loaded:
    vf = _vf()
    from verifiers.v1.configs.agent import agent_config_fields

    taskset_cfg = env_config.get("taskset") or {}
    if not isinstance(taskset_cfg, Mapping) or "id" in taskset_cfg:
        raise RldataError("config key 'env_config': 'taskset' must be a mapping without 'id' (the id is ID)")
    data = {**env_config, "taskset": {**taskset_cfg, "id": ident}}
    try:
        with keep_signal_handlers():  # the main thread's handlers stay rldata's
            config = vf.resolve_env_config(data)
            env = vf.load_environment(config)
    except (ImportError, AttributeError, ValueError, TypeError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise RldataError(f"verifiers environment {ident!r} does not load: {msg}") from None
    name = f"verifiers environment {ident!r}"
    m = _HUB_ID.match(ident)
    taskset = env.taskset
    package = _package(type(taskset).__module__)
    if m["version"] and (package is None or package.rpartition("==")[2] != m["version"]):
        have = package or f"module {type(taskset).__module__!r} from no installed distribution"
        raise RldataError(f"{name}: asks for version {m['version']}, installed: {have}")
    roles = agent_config_fields(config)
    if len(roles) != 1:
        raise RldataError(f"{name}: a multi-agent environment ({', '.join(roles)}); rldata trains one policy")
    if type(env).run is not vf.SingleAgentEnv.run:
        raise RldataError(f"{name}: its Env ({type(env).__name__}) overrides run(); rldata plays one agent")
    (agent,) = roles.values()
    harness_cfg = config.agent_harnesses()[next(iter(roles))]
    harness = vf.load_harness(harness_cfg)
    harness_id = harness_cfg.id
    if harness.EXECUTES_CODE:
        if agent.harness is not None or harness_id != "bash":
            raise RldataError(
                f"{name}: harness {harness_id!r} runs its own agent program; rldata plays a chat loop with "
                "the environment's MCP toolsets: pin the null harness in its env config "
                '({"agent": {"harness": {"id": "null"}}})'
            )
        harness = vf.load_harness(vf.HarnessConfig(id="null"))  # the implicit default: played as a chat loop
        harness_id = "null"
    task_cls = type(taskset).task_type()
    loaded = Loaded(ident, taskset, task_cls, task_cls.data_type(), harness, harness_id, agent, package)
    first = next(iter(taskset.take(1)), None)
    if first is None:
        raise RldataError(f"{name}: its taskset yields no task")
    _check_task(vf, name, first, taskset)
    return loaded


def _check_task(vf, name: str, task, taskset) -> None:
    """Refuse, in one line, what rldata does not run (module docstring)."""
    from verifiers.v1.session import hook_boundary
    from verifiers.v1.utils.decorators import discover_decorated

    cls = type(task)
    if cls.NEEDS_CONTAINER:
        raise RldataError(f"{name}: task {cls.__name__} needs a container runtime, which rldata does not run")
    for hook in ("setup", "finalize", "stage_verifier"):
        if getattr(cls, hook) is not getattr(vf.Task, hook):
            raise RldataError(f"{name}: task {cls.__name__} has a {hook}() hook, which needs a runtime")
    for kind in ("reward", "metric"):
        for fn in task.hooks(kind):
            p = inspect.signature(fn).parameters.get("runtime")
            if p is not None and p.default is p.empty:
                raise RldataError(
                    f"{name}: @vf.{kind} {fn.__name__} reads the runtime, which rldata does not run"
                )
    if task.config.judges:
        raise RldataError(
            f"{name}: its judges call a model endpoint; rldata scores with @vf.reward functions"
        )
    for fn in task.hooks("stop"):
        if hook_boundary(fn, allow_trace=True) is not vf.Trace:
            raise RldataError(f"{name}: @vf.stop {fn.__name__} reads a Request/Response (needs interception)")
    if discover_decorated(task, "intercept"):
        raise RldataError(f"{name}: task {cls.__name__} has @vf.intercept hooks (needs interception)")
    from verifiers.v1.state import State

    for ts in [*cls.toolsets(task.config), *type(taskset).toolsets(taskset.config)]:
        if ts._state_cls is not State and not getattr(ts.config, "url", None):
            raise RldataError(f"{name}: toolset {type(ts).__name__} keeps a State (needs a state channel)")


def describe(ident: str, env_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a spec records beside the id: the installed package and the harness rldata plays."""
    got = load(ident, env_config)
    return {"package": got.package, "harness": got.harness_id}


def _schema(data_cls: type, base: type) -> dict[str, Any]:
    """The JSON schema of the fields ``data_cls`` adds to verifiers' ``TaskData``."""
    full = data_cls.model_json_schema()
    own = {k: v for k, v in full.get("properties", {}).items() if k not in base.model_fields}
    out = {"title": full.get("title", data_cls.__name__), "type": "object", "properties": own}
    req = [k for k in full.get("required", []) if k in own]
    if req:
        out["required"] = req
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content or []
    return "\n".join(str(getattr(p, "text", "") or "") for p in parts if getattr(p, "type", "") == "text")


def _messages(prompt: Any) -> list[dict[str, Any]]:
    if prompt is None:
        return []
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    out = []
    for m in prompt:
        msg = {"role": m.role, "content": _text(getattr(m, "content", None))}
        if getattr(m, "tool_call_id", None):
            msg["tool_call_id"] = m.tool_call_id
        out.append(msg)
    return out


def task_rows(spec, *, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``rldata ingest --env NAME --n K``: the taskset's tasks ``seed .. seed+K-1`` (module docstring)."""
    got = load(spec.config.get("id"), spec.config.get("env_config"))
    vf = _vf()
    schema = _schema(got.data_cls, vf.TaskData)
    rows = []
    for task in got.taskset.skip(seed).take(n):
        data = task.data.model_dump(mode="json", exclude_none=True)
        msgs = _messages(task.data.prompt)
        answer = getattr(task.data, "answer", None)
        meta = {
            "key": task.key,
            "hash": task.hash,
            "type": type(task).__name__,
            "data": data,
            "schema": schema,
        }
        rows.append(
            {
                "source": "verifiers",
                "domain": "env-reward",
                "prompt": task.data.prompt_text,
                "answer": answer if isinstance(answer, str) and answer else None,
                "metadata": json.dumps({"verifiers": meta}, sort_keys=True),
                **({"messages": msgs} if len(msgs) > 1 else {}),
            }
        )
    return rows


class _Loop:
    """One episode's event loop, in a thread of its own: verifiers and MCP are async, and an
    episode's calls come from rldata's environment threads, one at a time."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="rldata-verifiers")
        self.thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


async def _session(server) -> tuple[Any, asyncio.Event, asyncio.Task]:
    """An MCP client session held open by a task of its own (MCP's contexts enter and exit in one task)."""
    from mcp import Client

    ready = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold():
        try:
            async with Client(server) as client:
                ready.set_result(client)
                await stop.wait()
        except BaseException as e:  # noqa: BLE001 - delivered to the caller
            if not ready.done():
                ready.set_exception(e)

    task = asyncio.create_task(hold())
    return await ready, stop, task


def _result_text(result) -> str:
    parts = []
    for block in result.content or []:
        parts.append(block.text if getattr(block, "type", "") == "text" else block.model_dump_json())
    text = "\n".join(parts)
    return text if len(text) <= _MAX_RESULT else text[:_MAX_RESULT] + " ... (cut)"


def _finite(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


@register("verifiers")
class VerifiersEnv(BaseEnv):
    """One v1 task per episode, its toolsets' MCP sessions and a Trace scored at the end."""

    name = "verifiers"
    version = "2"  # 1: the 0.1.x adapter
    needs_config = True  # no default spec: not listed as a bundled environment before it is registered

    def __init__(
        self,
        *,
        system_prompt: str | None = None,
        id: str | None = None,
        env_config: Mapping[str, Any] | None = None,
        pass_reward: float = 1.0,
        max_calls: int = 4,
        package: str | None = None,
        harness: str | None = None,
        **config: Any,
    ):
        if "module" in config:  # a spec registered for the 0.1.x adapter
            raise RldataError(migration_message("this environment was registered for verifiers 0.1.x"))
        super().__init__(system_prompt=system_prompt, **config)
        if not _finite(pass_reward):
            raise RldataError("config key 'pass_reward': expected a finite number")
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
            raise RldataError("config key 'max_calls': expected an integer >= 1")
        self.got = load(id, env_config)
        self.pass_reward, self.max_calls = float(pass_reward), max_calls
        self.initial_info = {"env_reward": 0.0, "pass_reward": self.pass_reward, "scored": False}
        self.tool_schemas: list[dict] | None = None
        self.loop: _Loop | None = None
        self.sessions: list[tuple[asyncio.Event, asyncio.Task]] = []
        self.dispatch: dict[str, tuple[Any, str]] = {}
        self.nodes: list[Any] = []
        self.calls = self.tool_errors = 0

    @classmethod
    def preflight(cls, config: Mapping[str, Any], *, timeout_s: float = 10.0) -> None:
        """Load it once per process (so episodes share it) and check that the installed package is
        the one registered."""
        if "module" in config:
            raise RldataError(migration_message("this environment was registered for verifiers 0.1.x"))
        got = load(config.get("id"), config.get("env_config"))
        if "package" in config and config["package"] != got.package:
            raise RldataError(
                f"verifiers environment {config.get('id')!r}: installed {got.package or 'a loose module'}, "
                f"registered with {config['package'] or 'a loose module'}: register it again"
            )

    @classmethod
    def task_rows(cls, spec, *, n: int, seed: int = 0) -> list[dict[str, Any]]:
        return task_rows(spec, n=n, seed=seed)

    # --- the episode --------------------------------------------------------------------------------

    def _task(self, task: Mapping[str, Any]):
        meta = task.get("metadata")
        meta = json.loads(meta) if isinstance(meta, str) else dict(meta or {})
        row = meta.get("verifiers")
        if not isinstance(row, Mapping) or "data" not in row:
            raise RldataError(
                f"task {task.get('task_id')}: no verifiers task data in its metadata (tasks come from "
                "rldata ingest --env NAME)"
            )
        got = self.got
        vtask = got.task_cls(got.data_cls.model_validate(row["data"]), got.taskset.config.task)
        if row.get("key") is not None and vtask.key != row["key"]:
            raise RldataError(
                f"task {task.get('task_id')}: its key {row['key'][:12]} is not the installed taskset's "
                f"({vtask.key[:12]}): the environment changed since the task was ingested"
            )
        return vtask

    def reset(self, task: Mapping[str, Any], seed: int | None) -> list[Message]:
        vf = _vf()
        from verifiers.v1.graph import MessageNode
        from verifiers.v1.state import state_cls

        self.task = self._task(task)
        system, prompt = self.got.harness.resolve_prompt(self.task.data)
        system = system or self.system_prompt
        opening = ([{"role": "system", "content": system}] if system else []) + _messages(prompt)
        self.state = state_cls(self.got.task_cls)()
        typed = {"system": vf.SystemMessage, "user": vf.UserMessage, "tool": vf.ToolMessage}
        for m in opening:
            self._node(MessageNode, typed.get(m["role"], vf.UserMessage)(**m))
        self.loop = _Loop()
        self.loop.run(self._open_tools())
        return [dict(m) for m in opening]

    def _node(self, node_cls, message, sampled: bool = False) -> None:
        parent = len(self.nodes) - 1 if self.nodes else None
        self.nodes.append(node_cls(parent=parent, message=message, sampled=sampled))

    async def _open_tools(self) -> None:
        from mcp.server.mcpserver import MCPServer

        taskset = self.got.taskset
        toolsets = [*self.task.toolsets(self.task.config), *type(taskset).toolsets(taskset.config)]
        disabled = set(self.got.harness.config.disabled_tools or ())
        schemas = []
        for ts in toolsets:
            url = getattr(ts.config, "url", None)
            if url:  # served elsewhere: MCP over streamable HTTP
                server = url
            else:
                await ts.setup()
                await ts.setup_task(self.task)
                server = MCPServer(ts.server_name or type(ts).__name__)
                ts.register(server)
            client, stop, holder = await _session(server)
            self.sessions.append((stop, holder))
            for tool in (await client.list_tools()).tools:
                full = f"{ts.server_name}_{tool.name}" if ts.server_name else tool.name
                if full in disabled:
                    continue
                if full in self.dispatch:
                    raise RldataError(f"two toolsets declare the tool {full!r}")
                self.dispatch[full] = (client, tool.name)
                schemas.append(
                    {
                        "type": "function",
                        "function": {
                            "name": full,
                            "description": tool.description or "",
                            "parameters": tool.input_schema,
                        },
                    }
                )
        self.tool_schemas = schemas or None

    def step(self, assistant_message: Message) -> StepResult:
        vf = _vf()
        from verifiers.v1.graph import MessageNode

        calls = list(assistant_message.get("tool_calls") or [])
        typed_calls = [vf.ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in calls]
        content = assistant_message.get("content") or ""
        self._node(MessageNode, vf.AssistantMessage(content=content, tool_calls=typed_calls or None), True)
        if not calls:  # the answer: the rubric scores the episode
            return StepResult(done=True, info={**self._counts(), **self._score()})
        observations = []
        for i, c in enumerate(calls):
            if i >= self.max_calls:
                text = f"error: not run: at most {self.max_calls} tool calls per turn"
            else:
                text = self.loop.run(self._call(c))
            observations.append({"role": "tool", "content": text, "tool_call_id": c["id"]})
            self._node(MessageNode, vf.ToolMessage(tool_call_id=c["id"], content=text, name=c["name"]))
        stop = self.loop.run(self._stopped())
        if stop is not None:
            return StepResult(observations, done=True, info={**self._counts(), **self._score(stop)})
        return StepResult(observations, info={**self._counts(), **self.initial_info})

    async def _call(self, call: Mapping[str, Any]) -> str:
        client, raw = self.dispatch.get(call["name"], (None, None))
        if client is None:
            self.tool_errors += 1
            return f"error: unknown tool {call['name']!r}"
        try:
            args = json.loads(call["arguments"] or "{}")
        except json.JSONDecodeError as e:
            self.tool_errors += 1
            return f"error: arguments are not JSON: {e}"
        self.calls += 1
        result = await client.call_tool(raw, args if isinstance(args, dict) else {})
        text = _result_text(result)
        if result.is_error:
            self.tool_errors += 1
            return f"error: {text}"
        return text

    def _counts(self) -> dict[str, Any]:
        return {"tool_calls": self.calls, "tool_errors": self.tool_errors}

    def _trace(self):
        vf = _vf()

        t = self.task
        return vf.Trace(
            task=vf.TraceTask(type=type(t).__name__, data=t.data, key=t.key, hash=t.hash),
            agent=vf.AgentInfo(config=self.got.agent),
            state=self.state,
            nodes=list(self.nodes),
            tools=[vf.Tool(name=n, **_tool_fields(s)) for n, s in self._schemas_by_name().items()],
        )

    def _schemas_by_name(self) -> dict[str, dict]:
        return {s["function"]["name"]: s["function"] for s in self.tool_schemas or []}

    async def _stopped(self) -> str | None:
        from verifiers.v1.session import call_hook

        trace = self._trace()
        for fn in self.task.hooks("stop"):
            fired = await call_hook(fn, {_vf().Trace: trace})
            if not isinstance(fired, bool):
                raise RldataError(f"@vf.stop {fn.__name__} returned {type(fired).__name__}, not a bool")
            if fired:
                return fn.__name__
        return None

    def _score(self, stop: str | None = None) -> dict[str, Any]:
        """The rubric's verdict on the episode: the weighted total and each function's score; a
        rubric that raises, or leaves a reward unscored or not finite, is an error (no reward)."""
        trace = self._trace()
        if stop is not None:
            trace.stop(stop)
        out: dict[str, Any] = {"pass_reward": self.pass_reward, "scored": True, "task_key": self.task.key}
        try:
            self.loop.run(self.task.score(trace))
        except Exception as e:  # noqa: BLE001 - a rubric may raise anything: an error verdict
            return {**out, "env_reward": None, "reward_error": f"the rubric raised: {e}"[:2000]}
        rewards = {
            k: (None if r is None else {"score": r.score, "weight": r.weight})
            for k, r in trace.rewards.items()
        }
        out["rewards"], out["metrics"] = rewards, dict(trace.metrics)
        bad = [
            k for k, r in rewards.items() if r is None or not (_finite(r["score"]) and _finite(r["weight"]))
        ]
        if bad:
            return {**out, "env_reward": None, "reward_error": f"reward {bad[0]!r} gave no finite score"}
        return {**out, "env_reward": float(trace.reward)}

    def close(self) -> None:
        loop, self.loop = self.loop, None
        if loop is None:
            return
        try:

            async def shut():
                for stop, _ in self.sessions:
                    stop.set()
                await asyncio.wait_for(asyncio.gather(*(t for _, t in self.sessions)), timeout=5)

            if self.sessions:
                loop.run(shut())
        finally:
            loop.stop()


def _tool_fields(fn: Mapping[str, Any]) -> dict[str, Any]:
    return {"description": fn.get("description") or "", "parameters": fn.get("parameters") or {}}
