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
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

from rldata.configs.fields import build, config, leaves, nested, param, validate
from rldata.envs.builtin import BUILTIN
from rldata.envs.tool_parsers import PARSERS
from rldata.errors import ConfigError, RldataError
from rldata.registry import Registry

__all__ = [
    "OBSERVATION_ROLES",
    "REGISTRY",
    "BaseEnv",
    "EnvSpec",
    "Environment",
    "EpisodeConfig",
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


# Built-ins are imported by name (rldata.envs.builtin.BUILTIN) and register themselves (``@register``).
REGISTRY: Registry = Registry(
    "environment", group="rldata.envs", builtin=BUILTIN, paths=True, check=_check_env_class
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


def _positive_int(v: int) -> str | None:
    return None if v >= 1 else f"expected a positive integer, got {v!r}"


def _seconds(v: float) -> str | None:
    return None if math.isfinite(v) and v > 0 else f"expected a positive number of seconds, got {v!r}"


def _env_path(v: str) -> str | None:
    if not v.strip():
        return "expected a registered name or 'module:Class'"
    mod, colon, attr = v.partition(":")
    if colon and (not mod or not attr.isidentifier()):
        return f"{v!r} is not a 'module:Class' path"
    return None


@config
class EpisodeConfig:
    """How an environment's episodes run: their limits, the system prompt and how the model's tool
    calls are read.  Declared once: a section of every environment spec (:class:`EnvSpec`, written
    flat beside ``env`` and ``config``), the options of ``rldata env register``, and the defaults the
    bundled environments and the OpenEnv / MCP / verifiers adapters take (``EpisodeConfig.max_turns``)."""

    max_turns: int = param(8, check=_positive_int, help="Assistant turns per episode at most.")
    max_total_tokens: int = param(
        4096, check=_positive_int, help="The prompt and every turn of an episode, in tokens, at most."
    )
    step_timeout_s: float = param(10.0, check=_seconds, help="Seconds per reset or step call at most.")
    system_prompt: str | None = param(None, help="A system message put before the task's prompt.")
    # None: the one the model's chat template names, picked when the episode runs (and recorded in
    # its env_info)
    tool_parser: str | None = param(
        None,
        choices=PARSERS,
        help="How the model's tool calls are read (default: the format its chat template names).",
    )

    def __post_init__(self):
        validate(self)


# The spec fields every stored spec has written since specs were stored: a field added since is
# written only when set, so the specs (and the versions hashed from them) of earlier releases stay
# as they were.
_ALWAYS_WRITTEN = ("env", "config", "max_turns", "max_total_tokens", "step_timeout_s", "system_prompt")


@config
class EnvSpec:
    """How to build an environment for one episode, and how its episodes run (the ``spec`` JSON of
    a row of ``environments``; a spec file writes the episode's fields flat, ``max_turns: 4``)."""

    env: str = param(check=_env_path, help="A registered environment name or 'module:Class'.")
    config: Mapping[str, Any] = param(
        default_factory=dict, check=json_mapping_problem, help="Keyword arguments of the class."
    )
    episode: EpisodeConfig = nested(EpisodeConfig)

    def __post_init__(self):
        validate(self)

    @classmethod
    def from_dict(cls, d: Any) -> EnvSpec:
        """A spec from its mapping (a spec file, a stored row); an RldataError naming the spec field."""
        if not isinstance(d, Mapping):
            raise RldataError(f"spec: expected a mapping, got {type(d).__name__}")
        if "env" not in d:
            raise RldataError("spec field 'env': missing")
        try:
            return build(cls, dict(d))
        except ConfigError as e:
            reason = e.reason.removeprefix(f"{e.field}: ")
            raise RldataError(f"spec field {e.field!r}: {reason}", field=e.field) from None

    def to_dict(self) -> dict[str, Any]:
        """The spec's fields, flat (the episode's beside ``env`` and ``config``)."""
        out = {}
        for leaf in leaves(type(self)):
            v = self
            for name in leaf.path:
                v = getattr(v, name)
            if leaf.name in _ALWAYS_WRITTEN or v != leaf.default:
                out[leaf.name] = dict(v) if leaf.name == "config" else v
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


# the episode settings a class may take as keyword arguments (``spec_fields``); the system prompt
# is always given
_PASSABLE = tuple(f.name for f in fields(EpisodeConfig) if f.name != "system_prompt")


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
    :class:`EpisodeConfig` fields: ``max_turns``, ``max_total_tokens``, ``step_timeout_s``...) and
    gets them as keyword arguments, so it can refuse limits it cannot live within when it is built
    (``rldata env register`` builds one).
    """
    cls = resolve(spec.env)
    kwargs = dict(spec.config)
    for f in getattr(cls, "spec_fields", ()):
        if f not in _PASSABLE:
            raise RldataError(f"environment {spec.env!r}: spec_fields names {f!r}, not one of {_PASSABLE}")
        if f in kwargs:
            raise RldataError(
                f"environment {spec.env!r}: config key {f!r} is a spec field; set it at the top level"
            )
        kwargs[f] = getattr(spec.episode, f)
    try:
        with keep_signal_handlers():  # built in worker threads; a library's handlers never land
            return cls(system_prompt=spec.episode.system_prompt, **kwargs)
    except RldataError:
        raise
    except Exception as e:  # noqa: BLE001 - a user's class may raise anything on bad config
        raise RldataError(f"environment {spec.env!r} rejected its config: {type(e).__name__}: {e}") from None


def env_key(env: Environment) -> str:
    """``name@version``: the value stored in passrates.env_version."""
    return f"{env.name}@{env.version}"
