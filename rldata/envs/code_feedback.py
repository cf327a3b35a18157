"""``code-feedback``: the model gets up to ``max_attempts`` tries at a code task, with the failures of
the task's PUBLIC tests after each wrong try.

One step is one attempt.  The code is pulled out of the assistant message by the code verifier's
own ``extract`` (one extraction rule in the project), checked by the verifier's rule layer (unless
``rules: false``) and run against the public tests in the real sandbox.  A wrong attempt gets one
``user`` message naming the first failing test(s): input, expected, got or the error line, each
value cut to ``VALUE_CHARS``; the whole message is at most ``MAX_OBSERVATION_CHARS``.  It holds no
timings, so the same code gets the same message.  The episode ends (``done``, no observation) when
an attempt passes or the last attempt is used; its verdict is then the task's verifier's, on the
last assistant message, hidden tests included.

The hidden tests never get past :meth:`CodeFeedbackEnv.reset`: they are dropped from the test
spec before anything runs, so no sandbox sees them and no message can hold them.

Time: every step must end within the spec's ``step_timeout_s`` (``rldata.envs.guard`` abandons a
call that does not).  The sandbox's wall limit, which includes its start-up, is at most
``WALL_SHARE`` of it; the rest is left for the kill and clean-up of what the program started
and for checking the code.  ``close()`` (also called by the guard on a timeout) kills a run in
flight and waits for its clean-up.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rldata.envs.base import BaseEnv, EpisodeConfig, Message, StepResult, register
from rldata.errors import RldataError
from rldata.verify.code import CodeVerifier, check_rules, parse_tests, run_tests

__all__ = ["MAX_OBSERVATION_CHARS", "MIN_WALL_S", "VALUE_CHARS", "WALL_SHARE", "CodeFeedbackEnv"]

WALL_SHARE = 0.5  # sandbox wall limit <= this share of step_timeout_s (kill + clean-up take the rest)
MIN_WALL_S = 1.0  # below this the sandbox hardly starts (start-up measured at ~0.1 s here)
MAX_ATTEMPTS = 20  # a bound on the config, not a recommendation
VALUE_CHARS = 120  # one input / expected / got / error value in an observation
MAX_OBSERVATION_CHARS = 2000
CLOSE_WAIT_S = 3.0  # how long close() waits for a killed run's clean-up (uid sweep, temp dir)
_MAX_SHOWN = 5


def _positive_int(name: str, v: Any, top: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
        raise RldataError(f"code-feedback: config {name!r} must be an integer in 1..{top}, got {v!r}")
    return v


@register("code-feedback")
class CodeFeedbackEnv(BaseEnv):
    """Config: ``max_attempts`` (3), ``max_failures_shown`` (2), ``rules`` (true), ``sandbox_wall_s``
    (default ``WALL_SHARE * step_timeout_s``).  ``step_timeout_s`` and ``max_turns`` come from the spec."""

    name = "code-feedback"
    version = "1"
    spec_fields = ("step_timeout_s", "max_turns")

    def __init__(
        self,
        *,
        system_prompt: str | None = None,
        max_attempts: int = 3,
        max_failures_shown: int = 2,
        rules: bool = True,
        sandbox_wall_s: float | None = None,
        step_timeout_s: float = EpisodeConfig.step_timeout_s,
        max_turns: int = EpisodeConfig.max_turns,
        **config: Any,
    ):
        super().__init__(system_prompt=system_prompt, **config)
        self.max_attempts = _positive_int("max_attempts", max_attempts, MAX_ATTEMPTS)
        self.max_failures_shown = _positive_int("max_failures_shown", max_failures_shown, _MAX_SHOWN)
        if max_attempts > max_turns:
            raise RldataError(
                f"code-feedback: max_attempts {max_attempts} exceeds the spec's max_turns {max_turns} "
                "(the episode would be cut before its last attempt)"
            )
        if not isinstance(rules, bool):
            raise RldataError(f"code-feedback: config 'rules' must be true or false, got {rules!r}")
        self.rules = rules
        cap = WALL_SHARE * float(step_timeout_s)
        if sandbox_wall_s is None:
            sandbox_wall_s = cap
        if isinstance(sandbox_wall_s, bool) or not isinstance(sandbox_wall_s, (int, float)):
            raise RldataError(
                f"code-feedback: config 'sandbox_wall_s' must be a number, got {sandbox_wall_s!r}"
            )
        if sandbox_wall_s > cap:
            raise RldataError(
                f"code-feedback: sandbox_wall_s {sandbox_wall_s:g} exceeds {WALL_SHARE:g} x the spec's "
                f"step_timeout_s ({step_timeout_s:g} s): a slow submission would hang the step"
            )
        if sandbox_wall_s < MIN_WALL_S:
            raise RldataError(
                f"code-feedback: the sandbox needs at least {MIN_WALL_S:g} s, at most {WALL_SHARE:g} x "
                f"step_timeout_s; step_timeout_s {step_timeout_s:g} s allows {cap:g} s "
                f"(raise step_timeout_s to at least {MIN_WALL_S / WALL_SHARE:g})"
            )
        self.verifier = CodeVerifier()  # its extract() and rule layer: the ones the final verdict uses
        self.limits = replace(self.verifier.limits, wall_s=float(sandbox_wall_s), cpu_s=float(sandbox_wall_s))
        self._tests = None  # the task's tests with the hidden ones removed
        self._task: Mapping[str, Any] = {}
        self.attempts = 0
        self.done = False
        self.closed = False
        self.last_sandbox_pid: int | None = None  # the last sandbox started (close() kills it if running)
        self._lock = threading.Lock()
        self._proc = None
        self._idle = threading.Event()
        self._idle.set()

    # ---- episode -------------------------------------------------------------------------------
    def reset(self, task: Mapping[str, Any], seed: int | None) -> list[Message]:
        if self.closed:
            raise RldataError("code-feedback: reset() after close()")
        tid = task.get("task_id") or "(no task_id)"
        raw = task.get("tests")
        try:
            obj = json.loads(raw) if isinstance(raw, str) and raw else raw
            if isinstance(obj, Mapping) and not obj.get("public"):  # before parse_tests' own complaint
                raise ValueError("no public tests to give feedback from")
            tests = parse_tests(obj)
        except (ValueError, TypeError, RecursionError) as e:
            raise RldataError(f"code-feedback: task {tid}: field 'tests': {e}"[:500]) from None
        self._tests = replace(tests, hidden=())  # the hidden tests go no further than this line
        self._task = {k: v for k, v in task.items() if k != "tests"}
        self.attempts, self.done = 0, False
        return self.opening(task)

    def step(self, assistant_message: Message) -> StepResult:
        if self._tests is None:
            raise RldataError("code-feedback: step() before reset()")
        if self.done or self.closed:
            raise RldataError("code-feedback: step() after the episode ended")
        self.attempts += 1
        text = assistant_message.get("content")
        code = self.verifier.extract(text if isinstance(text, str) else "", self._task)
        total = len(self._tests.public)
        info = {
            "attempt": self.attempts,
            "max_attempts": self.max_attempts,
            "public_passed": 0,
            "public_total": total,
            "rules_ok": None,
            "sandbox": None,
            "sandbox_error": False,
        }
        if code is None:
            return self._end_or_retry({**info, "status": "no_code"}, "no Python code found in your reply.")
        rule = check_rules(code, self._tests, self.verifier.rules)
        checks = dict(rule.detail["checks"])
        for k in ("format", "syntax"):  # nothing runnable: say why, skip the sandbox
            if checks.get(k, "ok") != "ok":
                return self._end_or_retry(
                    {**info, "status": "not_runnable"}, f"the code does not run: {checks[k]}."
                )
        problems = [f"{k}: {v}" for k, v in checks.items() if v != "ok"] if self.rules else []
        pub = self._run(code)
        if pub.passed is None:  # the sandbox itself failed: no feedback is honest, end the episode
            info.update(
                status="sandbox_error",
                sandbox="setup_error",
                sandbox_error=True,
                error=(pub.error or "")[:300],
            )
            self.done = True
            return StepResult(observations=[], done=True, info=info)
        d = pub.detail
        info.update(
            public_passed=d["passed"], sandbox=d["sandbox"], rules_ok=(rule.passed if self.rules else None)
        )
        if pub.passed and not problems:
            self.done = True
            return StepResult(observations=[], done=True, info={**info, "status": "passed"})
        head = f"{d['passed']} of {total} public tests passed."
        return self._end_or_retry({**info, "status": "failed"}, head, problems, d["failures"])

    def _end_or_retry(self, info, head, problems=(), failures=()) -> StepResult:
        if self.attempts >= self.max_attempts:
            self.done = True
            return StepResult(observations=[], done=True, info=info)
        return StepResult(
            observations=[{"role": "user", "content": self._feedback(head, problems, failures)}],
            done=False,
            info=info,
        )

    # ---- the observation -----------------------------------------------------------------------
    def _feedback(self, head: str, problems, failures) -> str:
        lines = [f"Attempt {self.attempts} of {self.max_attempts}: {head}"]
        for p in problems[:3]:
            lines.append(f"Rule broken: {_clip(p, 2 * VALUE_CHARS)}")
        total = len(self._tests.public)
        load = next((f["reason"] for f in failures if str(f["reason"]).startswith("load error:")), None)
        if load is not None:  # every test failed the same way: say it once
            lines.append(f"The code failed while loading: {_clip(load[len('load error:') :].strip())}")
            failures = ()
        stopped = next((i for i, f in enumerate(failures) if str(f["reason"]).startswith("not run:")), None)
        if stopped is not None:  # the whole run was cut (wall, output cap): the rest share one reason
            f = failures[stopped]
            why = f["reason"][len("not run:") :].strip()
            which = (
                f"Test {total} of {total}"
                if f["index"] + 1 == total
                else f"Tests {f['index'] + 1} to {total}"
            )
            lines_after = [f"{which} did not run: the sandbox stopped the run: {_clip(why)}"]
            failures = failures[:stopped]
        else:
            lines_after = []
        for f in failures[: self.max_failures_shown]:
            case = self._tests.public[f["index"]]
            lines.append(f"Failed test {f['index'] + 1} of {total}:")
            lines.append(f"  input: {_clip(json.dumps(case['input']))}")
            lines.append(f"  expected: {_clip(json.dumps(case['output']))}")
            if "got" in f:
                lines.append(f"  got: {_clip(f['got'])}")
            if f["reason"] != "wrong answer":
                lines.append(f"  error: {_clip(f['reason'])}")
        if len(failures) > self.max_failures_shown:
            lines.append(f"({len(failures) - self.max_failures_shown} more failing public test(s) not shown)")
        lines += lines_after
        left = self.max_attempts - self.attempts
        lines.append(
            f"Reply with the complete, corrected program in one ```python block. Attempts left: {left}."
        )
        text = "\n".join(lines)
        return text if len(text) <= MAX_OBSERVATION_CHARS else text[: MAX_OBSERVATION_CHARS - 6] + " (cut)"

    # ---- the sandbox run, and close ------------------------------------------------------------
    def _run(self, code: str):
        def started(proc):
            with self._lock:
                self._proc, self.last_sandbox_pid = proc, proc.pid
                if self.closed:  # close() came first: this run must not outlive it
                    _kill(proc)

        with self._lock:
            if self.closed:
                raise RldataError("code-feedback: closed while stepping")
            self._idle.clear()
        try:
            pub, _ = run_tests(code, self._tests, limits=self.limits, on_start=started)
        finally:
            with self._lock:
                self._proc = None
                self._idle.set()
        return pub

    def close(self) -> None:
        """Kill a sandbox run in flight (a step the guard abandoned) and wait for its clean-up."""
        with self._lock:
            self.closed = True
            if self._proc is not None:
                _kill(self._proc)
        self._idle.wait(CLOSE_WAIT_S)


def _kill(proc) -> None:
    if proc.returncode is None:  # not reaped yet: its pid (the group's id) is still its own
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _clip(s: str, n: int = VALUE_CHARS) -> str:
    s = "".join(c if c.isprintable() else " " for c in str(s))  # one line, no control characters
    return s if len(s) <= n else s[:n] + "... (cut)"
