"""guarded_reset / guarded_step: raising, hanging and garbage-returning environments become env_error,
and close() is called after success, after an error and after a timeout."""

from __future__ import annotations

import threading
import time

import pytest

from rldata.envs import BaseEnv, EnvSpec, StepResult, guarded_reset, guarded_step, make_env

TASK = {"task_id": "t", "prompt": "What is 2+2?"}


class Probe(BaseEnv):
    name, version = "probe", "1"

    def __init__(self, behaviour="ok", **kw):
        super().__init__(**kw)
        self.behaviour, self.closed = behaviour, 0
        self.release = threading.Event()

    def reset(self, task, seed):
        if self.behaviour == "reset-raises":
            raise RuntimeError("boom in reset")
        if self.behaviour == "reset-garbage":
            return "not a list"
        return self.opening(task)

    def step(self, msg):
        b = self.behaviour
        if b == "raises":
            raise ValueError("boom in step")
        if b == "hangs":
            self.release.wait(30)
        if b == "exits":
            raise SystemExit(3)
        if b == "garbage":
            return {"observations": [], "done": True}
        if b == "bad-role":
            return StepResult([{"role": "assistant", "content": "x"}], False, {})
        if b == "bad-info":
            return StepResult([], True, {"x": object()})
        if b == "bad-call-id":
            return StepResult([{"role": "user", "content": "x", "tool_call_id": "c1"}], False, {})
        if b == "tool-result":
            return StepResult([{"role": "tool", "content": "4", "tool_call_id": "c00010000"}], False, {})
        if b == "continue":
            return StepResult([{"role": "tool", "content": "4"}], False, {"k": 1})
        return StepResult([], True, {"k": 2})

    def close(self):
        self.closed += 1
        if self.behaviour == "close-raises":
            raise OSError("close failed")


def test_success_closes_once_and_reports_env_done():
    env = Probe()
    opened = guarded_reset(env, TASK, 0, timeout_s=5)
    assert opened.messages == [{"role": "user", "content": "What is 2+2?"}] and not opened.done
    g = guarded_step(env, {"role": "assistant", "content": "4"}, timeout_s=5)
    assert (g.done, g.finish_reason, g.error, env.closed) == (True, "env_done", None, 1)
    assert g.info == {"k": 2}


def test_a_tool_result_keeps_the_id_of_its_call():
    g = guarded_step(Probe("tool-result"), {"role": "assistant", "content": ""}, timeout_s=5)
    assert g.messages == [{"role": "tool", "content": "4", "tool_call_id": "c00010000"}]


def test_a_continuing_step_does_not_close():
    env = Probe("continue")
    g = guarded_step(env, {"role": "assistant", "content": "<calc>2+2</calc>"}, timeout_s=5)
    assert (g.done, g.finish_reason, env.closed) == (False, None, 0)
    assert g.messages == [{"role": "tool", "content": "4"}]


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        ("raises", "step(): ValueError: boom in step"),
        ("exits", "step(): RuntimeError: SystemExit: 3"),
        ("garbage", "step(): expected a StepResult, got dict"),
        ("bad-role", "role 'assistant' is not one of system, user, tool"),
        ("bad-info", "step(): info: not JSON-serializable"),
        ("bad-call-id", "tool_call_id must be a string, on a tool message"),
    ],
)
def test_a_failing_step_is_an_env_error_and_closes(behaviour, message):
    env = Probe(behaviour)
    g = guarded_step(env, {"role": "assistant", "content": "4"}, timeout_s=5)
    assert (g.done, g.finish_reason, env.closed) == (True, "env_error", 1)
    assert message in g.error
    assert g.messages == []


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        ("reset-raises", "reset(): RuntimeError: boom in reset"),
        ("reset-garbage", "reset(): expected a list of messages, got str"),
    ],
)
def test_a_failing_reset_is_an_env_error_and_closes(behaviour, message):
    env = Probe(behaviour)
    g = guarded_reset(env, TASK, 0, timeout_s=5)
    assert (g.finish_reason, g.error, env.closed) == ("env_error", message, 1)


def test_a_hanging_step_times_out_and_closes():
    env = Probe("hangs")
    t0 = time.monotonic()
    g = guarded_step(env, {"role": "assistant", "content": "4"}, timeout_s=0.3)
    took = time.monotonic() - t0
    env.release.set()  # let the abandoned worker thread finish
    assert (g.finish_reason, env.closed) == ("env_error", 1)
    assert "TimeoutError: no answer within 0.3 s" in g.error
    assert took < 5


def test_a_failing_close_is_reported_not_hidden():
    env = Probe("close-raises")
    g = guarded_step(env, {"role": "assistant", "content": "4"}, timeout_s=5)
    assert g.finish_reason == "env_done" and g.info["close_error"] == "OSError: close failed"


def test_make_env_passes_the_system_prompt():
    env = make_env(EnvSpec("single-turn", system_prompt="Be brief."))
    assert guarded_reset(env, TASK, 0, timeout_s=5).messages[0] == {"role": "system", "content": "Be brief."}


def test_worker_threads_are_reused_and_a_hung_one_is_not():
    """Calls run on reused daemon threads (one thread per call cost more than a calculator step);
    a hung call keeps its thread, the next call gets another and is not held up."""
    env = Probe("continue")
    for _ in range(5):  # warm: leaves an idle worker
        guarded_step(env, {"role": "assistant", "content": "4"}, timeout_s=5)
    before = {t.ident for t in threading.enumerate() if t.name == "rldata-env-call"}
    for _ in range(200):
        assert guarded_step(env, {"role": "assistant", "content": "4"}, timeout_s=5).finish_reason is None
    after = {t.ident for t in threading.enumerate() if t.name == "rldata-env-call"}
    assert after == before  # 200 calls, no new thread

    hung = Probe("hangs")
    g = guarded_step(hung, {"role": "assistant", "content": "4"}, timeout_s=0.2)
    assert g.finish_reason == "env_error"
    t0 = time.monotonic()
    assert guarded_step(env, {"role": "assistant", "content": "4"}, timeout_s=5).finish_reason is None
    assert time.monotonic() - t0 < 2  # served by another worker while the hung one is parked
    hung.release.set()
