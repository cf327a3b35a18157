"""The environment contract: plain Python objects, registered by name or imported by ``module:Class``.

An environment drives one episode::

    env = make_env(spec)                    # a fresh object per episode
    messages = env.reset(task, seed)        # opening messages (system / user)
    result = env.step(assistant_message)    # StepResult(observations, done, info)
    env.close()                             # always, however the episode ended

``version`` (a string) is stored with every result, so a changed environment never mixes with the
old one in the pass-rate ledger.  The final verdict still comes from the task's verifier.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rldata.errors import RldataError
from rldata.registry import Registry

__all__ = [
    "OBSERVATION_ROLES",
    "REGISTRY",
    "BaseEnv",
    "EnvSpec",
    "Environment",
    "Message",
    "StepResult",
    "env_key",
    "json_mapping_problem",
    "keep_signal_handlers",
    "make_env",
    "register",
    "resolve",
]

Message = dict[str, str]  # {"role": ..., "content": ...}, the store's MESSAGE struct
OBSERVATION_ROLES = ("system", "user", "tool")  # what an environment may say; "assistant" is the model's


@dataclass(frozen=True)
class StepResult:
    observations: list[Message] = field(default_factory=list)
    done: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    name: str
    version: str

    def reset(self, task: Mapping[str, Any], seed: int | None) -> list[Message]: ...

    def step(self, assistant_message: Message) -> StepResult: ...

    def close(self) -> None: ...


class BaseEnv:
    """Optional base: keeps the spec's system prompt and opens with it and the task's prompt."""

    name = "base"
    version = "0"

    def __init__(self, *, system_prompt: str | None = None, **config: Any):
        if config:
            raise RldataError(
                f"environment {self.name!r} takes no config keys, got: {', '.join(sorted(config))}"
            )
        self.system_prompt = system_prompt

    def opening(self, task: Mapping[str, Any]) -> list[Message]:
        out = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        msgs = task.get("messages")
        if msgs:
            return out + [{"role": m["role"], "content": m["content"]} for m in msgs]
        return out + [{"role": "user", "content": str(task["prompt"])}]

    def reset(self, task: Mapping[str, Any], seed: int | None) -> list[Message]:
        return self.opening(task)

    def step(self, assistant_message: Message) -> StepResult:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _check_env_class(obj: Any, env: str) -> Any:
    for meth in ("reset", "step", "close"):
        if not callable(getattr(obj, meth, None)):
            raise RldataError(f"environment {env!r} has no {meth}() method")
    return obj


# Built-ins register themselves (``@register``) when rldata.envs.builtin imports their modules.
REGISTRY: Registry = Registry(
    "environment", group="rldata.envs", builtin="rldata.envs.builtin", paths=True, check=_check_env_class
)


def register(name: str):
    """Class decorator: ``@register("calculator")``."""
    return REGISTRY.register(name)


def resolve(env: str) -> Callable[..., Environment]:
    """The environment class for a registered name, an importable ``module:Class`` path, or the
    name of an installed package's ``rldata.envs`` entry point (loaded on first use)."""
    return REGISTRY.resolve(env)


def json_mapping_problem(value: Any) -> str | None:
    """Why ``value`` is not a JSON-serializable mapping (it is stored as JSON), or None."""
    if not isinstance(value, Mapping):
        return f"expected a mapping, got {type(value).__name__}"
    try:
        json.dumps(dict(value))
    except (TypeError, ValueError) as e:
        return f"not JSON-serializable ({e})"
    return None


_SPEC_KEYS = (
    "env",
    "config",
    "max_turns",
    "max_total_tokens",
    "step_timeout_s",
    "system_prompt",
    "tool_parser",
)


@dataclass(frozen=True)
class EnvSpec:
    """How to build an environment for one episode, and its limits (the ``spec`` JSON of a row)."""

    env: str  # registered name or "module:Class"
    config: Mapping[str, Any] = field(default_factory=dict)  # keyword arguments of the class
    max_turns: int = 8  # assistant turns per episode
    max_total_tokens: int = 4096  # prompt + every turn, in tokens
    step_timeout_s: float = 10.0  # per reset/step call
    system_prompt: str | None = None
    # how the model's tool calls are read (rldata.envs.tool_parsers); None: the one the model's chat
    # template names, picked when the episode runs (and recorded in its env_info)
    tool_parser: str | None = None

    def __post_init__(self):
        if not isinstance(self.env, str) or not self.env.strip():
            raise RldataError("spec field 'env': expected a registered name or 'module:Class'")
        if ":" in self.env:
            mod, _, attr = self.env.partition(":")
            if not mod or not attr.isidentifier():
                raise RldataError(f"spec field 'env': {self.env!r} is not a 'module:Class' path")
        problem = json_mapping_problem(self.config)
        if problem:
            raise RldataError(f"spec field 'config': {problem}")
        for name in ("max_turns", "max_total_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise RldataError(f"spec field {name!r}: expected a positive integer, got {v!r}")
        t = self.step_timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise RldataError(
                f"spec field 'step_timeout_s': expected a positive number of seconds, got {t!r}"
            )
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise RldataError("spec field 'system_prompt': expected a string")
        if self.tool_parser is not None:
            from rldata.envs.tool_parsers import PARSERS, parser_names

            if self.tool_parser not in PARSERS:
                raise RldataError(
                    f"spec field 'tool_parser': unknown parser {self.tool_parser!r}; "
                    f"parsers: {', '.join(parser_names())}"
                )

    @classmethod
    def from_dict(cls, d: Any) -> EnvSpec:
        if not isinstance(d, Mapping):
            raise RldataError(f"spec: expected a mapping, got {type(d).__name__}")
        unknown = [k for k in d if k not in _SPEC_KEYS]
        if unknown:
            raise RldataError(f"spec field {unknown[0]!r}: unknown (fields: {', '.join(_SPEC_KEYS)})")
        if "env" not in d:
            raise RldataError("spec field 'env': missing")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        # tool_parser only when set: specs written before it existed keep their JSON, hence their version
        return {
            k: (dict(v) if k == "config" else v)
            for k in _SPEC_KEYS
            for v in [getattr(self, k)]
            if k != "tool_parser" or v is not None
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


_PASSABLE_LIMITS = ("max_turns", "max_total_tokens", "step_timeout_s")


_log = logging.getLogger(__name__)
_REAL_SIGNAL = signal.signal
_signal_lock = threading.Lock()
_signal_guards = 0  # guards open in any thread; signal.signal is wrapped while there is one
_in_guard = threading.local()


def _guarded_signal(signum, handler):
    if getattr(_in_guard, "on", False):  # this thread is building an environment: keep rldata's
        _log.debug("an environment tried to install a handler for signal %s: ignored", signum)
        return signal.getsignal(signum)
    return _REAL_SIGNAL(signum, handler)


@contextlib.contextmanager
def keep_signal_handlers() -> Iterator[None]:
    """While the block runs, ``signal.signal`` called from this thread does nothing.

    Environment libraries install handlers when an environment is built (verifiers 0.1.x: SIGINT
    and SIGTERM, ending with ``exit(143)``).  rldata builds environments in worker threads, where
    ``signal.signal`` raises ``ValueError: signal only works in main thread``, and in the main
    thread such a handler would replace the job's own (a killed job must stop the rldata way).
    Other threads' calls go through: only the threads inside the block are affected."""
    global _signal_guards
    with _signal_lock:
        if _signal_guards == 0:
            signal.signal = _guarded_signal
        _signal_guards += 1
    before, _in_guard.on = getattr(_in_guard, "on", False), True
    try:
        yield
    finally:
        _in_guard.on = before
        with _signal_lock:
            _signal_guards -= 1
            if _signal_guards == 0:
                signal.signal = _REAL_SIGNAL


def make_env(spec: EnvSpec) -> Environment:
    """A fresh environment object for one episode (RldataError if the class or its config is bad).

    A class that sizes its own work by the spec's limits names them in ``spec_fields`` (a tuple of
    ``max_turns``, ``max_total_tokens``, ``step_timeout_s``) and gets them as keyword arguments, so
    it can refuse limits it cannot live within when it is built (``rldata env register`` builds one).
    """
    cls = resolve(spec.env)
    kwargs = dict(spec.config)
    for f in getattr(cls, "spec_fields", ()):
        if f not in _PASSABLE_LIMITS:
            raise RldataError(
                f"environment {spec.env!r}: spec_fields names {f!r}, not one of {_PASSABLE_LIMITS}"
            )
        if f in kwargs:
            raise RldataError(
                f"environment {spec.env!r}: config key {f!r} is a spec field; set it at the top level"
            )
        kwargs[f] = getattr(spec, f)
    try:
        with keep_signal_handlers():  # built in worker threads; a library's handlers never land
            return cls(system_prompt=spec.system_prompt, **kwargs)
    except RldataError:
        raise
    except Exception as e:  # noqa: BLE001 - a user's class may raise anything on bad config
        raise RldataError(f"environment {spec.env!r} rejected its config: {type(e).__name__}: {e}") from None


def env_key(env: Environment) -> str:
    """``name@version``: the value stored in passrates.env_version."""
    return f"{env.name}@{env.version}"
