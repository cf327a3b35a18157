"""Standard tool calling: tools declared as OpenAI-style function schemas or as plain Python callables.

A tool is a callable plus the JSON schema a chat template lays out (``apply_chat_template(...,
tools=schemas)``).  :func:`tool` builds one from either form:

- a typed function with a docstring: the schema is derived from its signature (``str``, ``int``,
  ``float``, ``bool``, ``list[...]``, ``dict``, ``Literal[...]``, ``X | None``) and its docstring
  (first paragraph: the description; ``name: text`` lines under ``Args:``: the parameters'), as
  verifiers' ``ToolEnv`` and transformers' ``get_json_schema`` do;
- an OpenAI function schema (``{"type": "function", "function": {name, description, parameters}}``,
  or the inner ``function`` object) with the callable that implements it.

:class:`ToolEnv` is an environment whose model calls tools the standard way: the rollout parses the
model's calls with the spec's ``tool_parser`` (:mod:`rldata.envs.tool_parsers`), hands the turn to
``step`` as an assistant message with ``tool_calls``, and each call's result comes back as a ``tool``
message naming its ``tool_call_id``.  A turn without calls ends the episode.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rldata.envs.base import BaseEnv, Message, StepResult, make_env
from rldata.envs.guard import guarded_close
from rldata.errors import RldataError

__all__ = ["Tool", "ToolEnv", "call_id", "env_tool_schemas", "schema_of", "tool", "tool_schemas"]

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


@dataclass(frozen=True)
class Tool:
    """A callable and its OpenAI function schema (``{"type": "function", "function": {...}}``)."""

    fn: Callable[..., Any]
    schema: Mapping[str, Any]

    @property
    def name(self) -> str:
        return self.schema["function"]["name"]


def _json_type(tp: Any, where: str) -> dict[str, Any]:
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        kinds = {_SCALARS.get(type(a)) for a in args}
        if None in kinds or len(kinds) != 1:
            raise RldataError(f"{where}: Literal values must be strings, numbers or booleans of one type")
        return {"type": kinds.pop(), "enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return {**_json_type(rest[0], where), "nullable": True}
        return {"anyOf": [_json_type(a, where) for a in rest]}
    if tp in (list, tuple) or origin in (list, tuple, Sequence):
        return {"type": "array", **({"items": _json_type(args[0], where)} if args else {})}
    if tp is dict or origin in (dict, Mapping):
        return {"type": "object"}
    if tp is Any:
        return {}
    raise RldataError(f"{where}: type {tp!r} has no JSON schema (use str, int, float, bool, list, dict)")


def _docstring(fn: Callable) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a Google-style docstring."""
    doc = inspect.getdoc(fn) or ""
    parts = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)
    description = " ".join(parts[0].split()) if parts and not parts[0].startswith("Args:") else ""
    params: dict[str, str] = {}
    section = None
    for line in doc.splitlines():
        head = line.strip()
        if head.endswith(":") and head[:-1] in ("Args", "Arguments", "Parameters", "Returns", "Raises"):
            section = head[:-1]
            continue
        if section in ("Args", "Arguments", "Parameters"):
            m = _ARG_LINE.match(line)
            if m and line.startswith((" ", "\t")):
                params[m.group(1).lstrip("*")] = m.group(2).strip()
    return description, params


def schema_of(fn: Callable) -> dict[str, Any]:
    """The OpenAI function schema of a typed, documented Python function."""
    try:
        text = _schema_text(fn)
    except TypeError:  # an unhashable callable: derived each time
        return _schema(fn)
    return json.loads(text)  # a fresh copy: callers may change theirs


@functools.lru_cache(maxsize=1024)  # every episode builds its environment's tools: derive once
def _schema_text(fn: Callable) -> str:
    return json.dumps(_schema(fn))


def _schema(fn: Callable) -> dict[str, Any]:
    name = getattr(fn, "__name__", None)
    if not name or not name.isidentifier():
        raise RldataError(f"tool {fn!r}: a tool function needs a name")
    where = f"tool {name!r}"
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # noqa: BLE001 - an unresolvable annotation
        raise RldataError(f"{where}: its type hints do not resolve: {e}") from None
    description, docs = _docstring(fn)
    if not description:
        raise RldataError(f"{where}: needs a docstring (the model reads it as the tool's description)")
    props, required = {}, []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise RldataError(f"{where}: *args and **kwargs have no schema")
        if p.name not in hints:
            raise RldataError(f"{where}: parameter {p.name!r} has no type hint")
        prop = _json_type(hints[p.name], f"{where}, parameter {p.name!r}")
        if p.name in docs:
            prop["description"] = docs[p.name]
        props[p.name] = prop
        if p.default is p.empty:
            required.append(p.name)
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


def tool(obj: Any, fn: Callable[..., Any] | None = None) -> Tool:
    """A :class:`Tool` from a typed, documented function, or from an OpenAI schema and its ``fn``."""
    if isinstance(obj, Tool):
        return obj
    if isinstance(obj, Mapping):
        inner = obj.get("function", obj) if obj.get("type", "function") == "function" else None
        if not isinstance(inner, Mapping) or not isinstance(inner.get("name"), str):
            raise RldataError("tool schema: expected {'type': 'function', 'function': {'name': ...}}")
        params = inner.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, Mapping) or params.get("type") != "object":
            raise RldataError(f"tool {inner['name']!r}: 'parameters' must be a JSON schema of type object")
        if fn is None or not callable(fn):
            raise RldataError(f"tool {inner['name']!r}: a schema needs the callable that implements it")
        try:
            json.dumps(obj)
        except (TypeError, ValueError) as e:
            raise RldataError(f"tool {inner['name']!r}: schema is not JSON ({e})") from None
        return Tool(fn, {"type": "function", "function": {**inner, "parameters": dict(params)}})
    if callable(obj):
        return Tool(obj, schema_of(obj))
    raise RldataError(f"a tool is a typed function or an OpenAI function schema, got {type(obj).__name__}")


def tool_schemas(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(t.schema)) for t in tools]


def env_tool_schemas(spec) -> list[dict[str, Any]] | None:
    """The tool schemas of the environment an :class:`~rldata.envs.base.EnvSpec` builds (None: it
    declares no tools), read from a fresh instance that is closed again (exports use it)."""
    env = make_env(spec)
    try:
        schemas = getattr(env, "tool_schemas", None)
        return [json.loads(json.dumps(dict(t))) for t in schemas] if schemas else None
    finally:
        guarded_close(env, timeout_s=spec.episode.step_timeout_s)


def call_id(turn: int, index: int) -> str:
    """A tool call's id: 9 letters and digits (Mistral's templates insist), the same every run."""
    return f"c{turn % 10000:04d}{index % 10000:04d}"


def _result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


class ToolEnv(BaseEnv):
    """An environment whose model calls tools the standard way (the chat template's ``tools``).

    Subclasses set ``tools`` (functions or :class:`Tool` objects); the rollout reads the schemas from
    :attr:`tool_schemas`.  ``step`` runs each of the turn's ``tool_calls`` (at most ``max_calls``)
    and answers each with a ``tool`` message; a tool that raises answers ``error: ...`` and the
    episode goes on.  A turn with no calls ends the episode (its text is the answer).
    """

    name = "tool-env"
    version = "1"
    tools: Sequence[Any] = ()

    def __init__(self, *, system_prompt: str | None = None, max_calls: int = 4, **config: Any):
        super().__init__(system_prompt=system_prompt, **config)
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
            raise RldataError(f"max_calls must be a positive integer, got {max_calls!r}")
        self.max_calls = max_calls
        self._tools = {t.name: t for t in (tool(x) for x in self.tools)}
        self.calls = 0

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(list(self._tools.values()))

    def reset(self, task, seed):
        self.calls = 0
        return self.opening(task)

    def run_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        t = self._tools.get(name)
        if t is None:
            return f"error: unknown tool {name!r}; tools: {', '.join(sorted(self._tools))}"
        try:
            return _result_text(t.fn(**arguments))
        except TypeError as e:  # wrong or missing arguments: the model can fix that
            return f"error: bad arguments for {name}: {e}"
        except Exception as e:  # noqa: BLE001 - a tool's failure is the model's observation
            return f"error: {type(e).__name__}: {e}"

    def step(self, assistant_message: Message) -> StepResult:
        calls = list(assistant_message.get("tool_calls") or [])
        if not calls:
            return StepResult(observations=[], done=True, info={"tool_calls": self.calls})
        obs = []
        for c in calls[: self.max_calls]:
            try:
                args = json.loads(c.get("arguments") or "{}")
            except (TypeError, ValueError, RecursionError):
                args = None
            if not isinstance(args, dict):
                content = "error: arguments are not a JSON object"
            else:
                content = self.run_tool(str(c.get("name")), args)
            obs.append({"role": "tool", "content": content, "tool_call_id": c.get("id")})
        if len(calls) > self.max_calls:
            obs += [
                {
                    "role": "tool",
                    "content": f"error: at most {self.max_calls} calls per turn",
                    "tool_call_id": c.get("id"),
                }
                for c in calls[self.max_calls :]
            ]
        self.calls += min(len(calls), self.max_calls)
        return StepResult(observations=obs, done=False, info={"tool_calls": self.calls})
