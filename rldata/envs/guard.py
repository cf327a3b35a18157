"""Calling an environment safely: an env that raises, hangs or returns garbage becomes an ``env_error``.

Each call runs in a daemon worker thread with the spec's ``step_timeout_s``.  A Python thread
cannot be killed, so a hung call is abandoned (its thread stays parked) and the episode ends with
``env_error``; the caller never waits longer than the timeout.  Worker threads are reused: starting
one per call cost more than a calculator's whole step, thousands of times per batch.  Whenever an
episode ends here (the environment says done, or errs) ``close()`` is called, also under the
timeout, and a failing close is reported in ``info`` without hiding the original outcome.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rldata.envs.base import OBSERVATION_ROLES, Environment, Message, StepResult, json_mapping_problem

__all__ = ["Guarded", "guarded_close", "guarded_reset", "guarded_step"]

_MAX_MESSAGE_CHARS = 1_000_000  # an observation bigger than this is garbage, not a tool result


@dataclass(frozen=True)
class Guarded:
    """What one guarded call gave: messages to append, whether the episode ended, and why."""

    messages: list[Message] = field(default_factory=list)
    done: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None  # None: go on; "env_done" | "env_error" when the episode ended
    error: str | None = None


class _Garbage(Exception):
    pass


_MAX_IDLE = 64  # idle workers kept; a burst beyond that lets its extra threads end
_idle: list[queue.SimpleQueue] = []  # the inboxes of idle workers
_idle_lock = threading.Lock()


def _worker(inbox: queue.SimpleQueue) -> None:
    while True:
        fn, box, done = inbox.get()
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - everything an env raises becomes its error verdict
            box["error"] = e
        done.set()
        # a call that outlived its caller's timeout lands here too, late: the worker is free again
        with _idle_lock:
            if len(_idle) >= _MAX_IDLE:
                return
            _idle.append(inbox)


def _forget_workers() -> None:  # a forked child has none of its parent's threads
    global _idle_lock
    _idle.clear()
    _idle_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def _call(fn: Callable[[], Any], timeout_s: float) -> Any:
    box: dict[str, Any] = {}
    done = threading.Event()
    with _idle_lock:
        inbox = _idle.pop() if _idle else None
    if inbox is None:
        inbox = queue.SimpleQueue()
        threading.Thread(target=_worker, args=(inbox,), daemon=True, name="rldata-env-call").start()
    inbox.put((fn, box, done))
    if not done.wait(timeout_s):
        raise TimeoutError(f"no answer within {timeout_s:g} s")
    if "error" in box:
        e = box["error"]
        if not isinstance(e, Exception):  # SystemExit etc. from the env's thread: still the env's error
            raise RuntimeError(f"{type(e).__name__}: {e}")
        raise e
    return box.get("value")


def _messages(value: Any, what: str, *, roles=OBSERVATION_ROLES) -> list[Message]:
    if not isinstance(value, list):
        raise _Garbage(f"{what}: expected a list of messages, got {type(value).__name__}")
    out = []
    for i, m in enumerate(value):
        # a tool result may name the call it answers (standard tool calls)
        if not isinstance(m, Mapping) or not {"role", "content"} <= set(m) <= {
            "role",
            "content",
            "tool_call_id",
        }:
            raise _Garbage(f"{what}[{i}]: expected {{'role', 'content'}}, got {str(m)[:80]!r}")
        if m["role"] not in roles:
            raise _Garbage(f"{what}[{i}]: role {m['role']!r} is not one of {', '.join(roles)}")
        if not isinstance(m["content"], str) or len(m["content"]) > _MAX_MESSAGE_CHARS:
            raise _Garbage(f"{what}[{i}]: content must be a string of at most {_MAX_MESSAGE_CHARS} chars")
        call = m.get("tool_call_id")
        if call is not None and (m["role"] != "tool" or not isinstance(call, str) or len(call) > 200):
            raise _Garbage(f"{what}[{i}]: tool_call_id must be a string, on a tool message")
        out.append(
            {"role": m["role"], "content": m["content"]}
            | ({"tool_call_id": call} if "tool_call_id" in m else {})
        )
    return out


def _error(env: Environment, what: str, e: Exception, timeout_s: float) -> Guarded:
    msg = str(e) if isinstance(e, _Garbage) else f"{what}: {type(e).__name__}: {e}"  # garbage names its call
    info = guarded_close(env, timeout_s=timeout_s)
    return Guarded(done=True, info=info, finish_reason="env_error", error=msg[:2000])


def guarded_close(env: Environment, *, timeout_s: float) -> dict[str, Any]:
    """Call ``env.close()``; return ``{}`` or ``{"close_error": message}``."""
    try:
        _call(env.close, timeout_s)
    except Exception as e:  # noqa: BLE001
        return {"close_error": f"{type(e).__name__}: {e}"[:2000]}
    return {}


def guarded_reset(
    env: Environment, task: Mapping[str, Any], seed: int | None, *, timeout_s: float
) -> Guarded:
    """The opening messages, or an ``env_error`` (and the env closed)."""
    try:
        msgs = _messages(_call(lambda: env.reset(task, seed), timeout_s), "reset()", roles=("system", "user"))
        if not msgs:
            raise _Garbage("reset(): returned no messages")
    except Exception as e:  # noqa: BLE001 - Ctrl-C in the caller still propagates
        return _error(env, "reset()", e, timeout_s)
    return Guarded(messages=msgs)


def guarded_step(env: Environment, assistant_message: Message, *, timeout_s: float) -> Guarded:
    """One step: observations and done, or an ``env_error``; the env is closed when the episode ends."""
    try:
        res = _call(lambda: env.step(dict(assistant_message)), timeout_s)
        if not isinstance(res, StepResult):
            raise _Garbage(f"step(): expected a StepResult, got {type(res).__name__}")
        if not isinstance(res.done, bool):
            raise _Garbage(f"step(): done must be a bool, got {type(res.done).__name__}")
        problem = json_mapping_problem(res.info)
        if problem:
            raise _Garbage(f"step(): info: {problem}")
        obs = _messages(res.observations, "step() observations")
    except Exception as e:  # noqa: BLE001 - Ctrl-C in the caller still propagates
        return _error(env, "step()", e, timeout_s)
    if not res.done:
        return Guarded(messages=obs, info=dict(res.info))
    info = {**res.info, **guarded_close(env, timeout_s=timeout_s)}
    return Guarded(messages=obs, done=True, info=info, finish_reason="env_done")
