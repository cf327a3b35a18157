"""Small OpenEnv environments served by openenv's own server, for the OpenEnv tests.

Run as ``python tests/envs/openenv_server.py PORT ENV [STEP_DELAY_S]`` (ENV: ``guess``, ``calc`` or
``mcp``);
:func:`serve` starts one in a subprocess and waits for its ``/health``.

- ``guess``: a two-turn game.  The secret is a sum shown as ``A+B=`` (A = 1 + seed % 9, B = 1 +
  seed // 9 % 9: the bundled arithmetic model can play it); the model answers a number, gets
  "higher"/"lower" after a miss, and has one more try; reward 1 for a hit, 0 otherwise.
- ``calc``: a tool env.  The question is the sum of two numbers; ``CALC: EXPR`` gets the value back
  as a tool observation, ``ANSWER: N`` ends the episode with reward 1 when N is the sum.
- ``mcp``: the same question as an MCP tool env (openenv's ``MCPEnvironment`` with FastMCP
  tools, served for ``CallToolAction``): ``add(a, b)``, ``divide(a, b)`` (raises on b = 0),
  ``submit(answer)``, which ends the episode with reward 1 when the answer is the sum.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State

DELAY_S = float(sys.argv[3]) if __name__ == "__main__" and len(sys.argv) > 3 else 0.0
# while this file exists, every step fails (the server answers an error): an outage, then a recovery
FAIL_FLAG = os.environ.get("OPENENV_TEST_FAIL_FLAG")


class TextAction(Action):
    message: str


class TextObservation(Observation):
    prompt: str = ""


class GuessEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id="", step_count=0)
        self.secret = 1

    def reset(self, seed=None, episode_id=None, **kwargs):
        a, b = 1 + (seed or 0) % 9, 1 + (seed or 0) // 9 % 9
        self.secret = a + b
        self._state = State(episode_id=episode_id or "", step_count=0)
        return TextObservation(prompt=f"{a}+{b}=")

    def step(self, action, timeout_s=None, **kwargs):
        time.sleep(DELAY_S)
        if FAIL_FLAG and os.path.exists(FAIL_FLAG):
            raise RuntimeError("the game backend is down")
        self._state.step_count += 1
        m = re.search(r"-?\d+", action.message)
        guess = int(m.group()) if m else None
        if guess == self.secret:
            return TextObservation(prompt="Right.", reward=1.0, done=True)
        if self._state.step_count >= 2:
            return TextObservation(prompt=f"No, it was {self.secret}.", reward=0.0, done=True)
        hint = "higher" if guess is None or guess < self.secret else "lower"
        return TextObservation(prompt=f"No, {hint}. One more try.", reward=0.0, done=False)

    @property
    def state(self):
        return self._state


class CalcEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id="", step_count=0)
        self.a = self.b = 0

    def reset(self, seed=None, episode_id=None, **kwargs):
        s = seed or 0
        self.a, self.b = 100 + 37 * s % 900, 200 + 53 * s % 700
        self._state = State(episode_id=episode_id or "", step_count=0)
        return TextObservation(
            prompt=f"What is {self.a}+{self.b}? Write CALC: EXPR to use the calculator, ANSWER: N to answer."
        )

    def step(self, action, timeout_s=None, **kwargs):
        time.sleep(DELAY_S)
        self._state.step_count += 1
        text = action.message
        ans = re.search(r"ANSWER:\s*(-?\d+)", text)
        if ans:
            ok = int(ans.group(1)) == self.a + self.b
            return TextObservation(prompt="", reward=1.0 if ok else 0.0, done=True)
        calc = re.search(r"CALC:\s*(\d+)\s*\+\s*(\d+)", text)
        if calc:
            return TextObservation(prompt=str(int(calc.group(1)) + int(calc.group(2))), reward=0.0)
        return TextObservation(prompt="error: write CALC: A+B or ANSWER: N", reward=0.0)

    @property
    def state(self):
        return self._state


class McpCalcEnv(MCPEnvironment):
    """The calc question with MCP tools.  ``submit`` ends the episode: MCP tool results carry no
    reward of their own, so the environment puts its reward and done on the submit call's result."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        from fastmcp import FastMCP

        mcp = FastMCP("calc")
        env = self

        @mcp.tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            time.sleep(DELAY_S)
            return a + b

        @mcp.tool
        def divide(a: float, b: float) -> float:
            """Divide a by b."""
            return a / b  # b = 0 raises: the tool fails on the server

        @mcp.tool
        def submit(answer: int) -> str:
            """Submit the final answer; this ends the episode."""
            env.reward, env.done = (1.0 if answer == env.a + env.b else 0.0), True
            return "submitted"

        super().__init__(mcp)
        self._state = State(episode_id="", step_count=0)
        self.a = self.b = 0
        self.reward, self.done = 0.0, False

    def reset(self, seed=None, episode_id=None, **kwargs):
        s = seed or 0
        self.a, self.b = 100 + 37 * s % 900, 200 + 53 * s % 700
        self.reward, self.done = 0.0, False
        self._state = State(episode_id=episode_id or "", step_count=0)
        return TextObservation(prompt=f"What is {self.a}+{self.b}? Use the tools, then submit the answer.")

    async def step_async(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        obs = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if isinstance(action, CallToolAction) and self.done:
            obs = obs.model_copy(update={"done": True, "reward": self.reward})
        return obs

    def _step_impl(self, action, timeout_s=None, **kwargs):
        raise ValueError("this environment takes MCP tool calls only")

    @property
    def state(self):
        return self._state


ENVS = {"guess": GuessEnv, "calc": CalcEnv, "mcp": McpCalcEnv}
# the action and observation classes each is served with: an MCP env takes CallToolAction
PROTOCOL = {"mcp": (CallToolAction, CallToolObservation)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen | None = None, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the test server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(url)


def serve(
    env: str, *, delay_s: float = 0.0, port: int | None = None, fail_flag: str | None = None
) -> tuple[subprocess.Popen, str]:
    """Start ``env``'s server in a subprocess on 127.0.0.1; (process, url) once it answers.
    ``fail_flag``: a path; while that file exists, every step fails."""
    port = port or free_port()
    cmd = [sys.executable, str(Path(__file__)), str(port), env, str(delay_s)]
    environ = dict(os.environ) | ({"OPENENV_TEST_FAIL_FLAG": fail_flag} if fail_flag else {})
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc)
    except BaseException:
        proc.kill()
        raise
    return proc, url


if __name__ == "__main__":
    import uvicorn

    port, name = int(sys.argv[1]), sys.argv[2]
    action, observation = PROTOCOL.get(name, (TextAction, TextObservation))
    app = create_app(ENVS[name], action, observation, env_name=name, max_concurrent_envs=256)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
