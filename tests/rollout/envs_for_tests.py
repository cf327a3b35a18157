"""Environments written for the rollout tests: real implementations of the contract that behave
in one chosen way each (go on for k turns, raise, hang, return garbage), registered by name.
Each records what it opened and closed in a directory, so a test can see every close."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from rldata.envs.base import BaseEnv, StepResult, register

LEDGER = Path(os.environ.get("RLDATA_TEST_ENV_DIR", "/tmp/rldata-test-envs"))


class _Tracked(BaseEnv):
    def __init__(self, *, system_prompt=None, turns: int = 2, ledger: str | None = None, **config):
        super().__init__(system_prompt=system_prompt, **config)
        self.turns, self.n = turns, 0
        self.dir = Path(ledger) if ledger else LEDGER
        self.dir.mkdir(parents=True, exist_ok=True)
        self.token = self.dir / f"open-{uuid.uuid4().hex}"

    def reset(self, task, seed):
        self.token.touch()  # a "resource": exists from reset until close
        self.n = 0
        return self.opening(task)

    def close(self):
        self.token.unlink(missing_ok=True)
        (self.dir / f"closed-{self.token.name[5:]}").touch()


@register("test-turns")
class Turns(_Tracked):
    """Answers every turn with a new question (a user message) and ends after ``turns`` turns."""

    name, version = "test-turns", "1"

    def step(self, assistant_message):
        self.n += 1
        if self.n >= self.turns:
            return StepResult(done=True, info={"tool_calls": self.n})
        return StepResult(observations=[{"role": "user", "content": "1+1="}], info={"tool_calls": self.n})


@register("test-raise")
class Raises(_Tracked):
    name, version = "test-raise", "1"

    def step(self, assistant_message):
        raise RuntimeError("the tool server is down")


@register("test-hang")
class Hangs(_Tracked):
    name, version = "test-hang", "1"

    def step(self, assistant_message):
        time.sleep(30)
        return StepResult(done=True)


@register("test-garbage")
class Garbage(_Tracked):
    name, version = "test-garbage", "1"

    def step(self, assistant_message):
        return {"observations": "not a StepResult"}


@register("test-reset-raise")
class ResetRaises(_Tracked):
    name, version = "test-reset-raise", "1"

    def reset(self, task, seed):
        raise ValueError("no such task in the simulator")
