"""A small verifiers v1 environment package for rldata's tests (verifiers >= 0.4), loaded as
``vf1_sums`` or a hub id ``someone/vf1-sums`` with tests/envs on ``sys.path``.

- ``Sums`` (the taskset): ``A+B=`` questions, ``SumData`` with the answer; config ``size`` (how many),
  ``start`` (the first A), ``raise_in_reward`` (the rubric raises: an error, never a pass).
- ``SumTask``: one MCP ``Toolset`` with one tool, ``add(a, b)`` (it raises on a negative number: a tool
  error); rewards ``correct`` (the last reply is the sum) and ``used_tool`` (weight 0), a metric, and a
  ``Trace`` stop after two tool results.
- ``Chat``: the harness bundled with the taskset, a chat loop (no code execution): rldata plays it.

Building the taskset installs a SIGTERM handler, as verifiers 0.1.x environments did when built:
rldata must neither crash in a worker thread nor lose its own handler.
"""

from __future__ import annotations

import signal

import verifiers.v1 as vf


class SumsConfig(vf.TasksetConfig):
    size: int = 9
    start: int = 1
    raise_in_reward: bool = False


class SumData(vf.TaskData):
    answer: str
    raise_in_reward: bool = False


class CalcConfig(vf.ToolsetConfig):
    pass


class Calculator(vf.Toolset[CalcConfig]):
    TOOL_PREFIX = None  # the tool is called `add`, not `calculator_add`

    @vf.tool
    def add(self, a: int, b: int) -> int:
        """Add two non-negative integers."""
        if a < 0 or b < 0:
            raise ValueError("add takes non-negative integers")
        return a + b


class SumTask(vf.Task[SumData]):
    @classmethod
    def toolsets(cls, config):
        return [Calculator(CalcConfig())]

    @vf.reward
    async def correct(self, trace: vf.Trace) -> float:
        if self.data.raise_in_reward:
            raise RuntimeError("the rubric broke")
        return float(trace.last_reply.strip() == self.data.answer)

    @vf.reward(weight=0.0)
    async def used_tool(self, trace: vf.Trace) -> float:
        return float(bool(trace.tool_messages))

    @vf.metric
    async def turns(self, trace: vf.Trace) -> float:
        return trace.num_turns

    @vf.stop
    async def two_tool_results(self, trace: vf.Trace) -> bool:
        return len(trace.tool_messages) >= 2


class Sums(vf.Taskset[SumTask, SumsConfig]):
    def __init__(self, config):
        super().__init__(config)
        signal.signal(signal.SIGTERM, lambda *_: None)  # what verifiers 0.1.x did when built

    def load(self):
        for i in range(self.config.size):
            a, b = self.config.start + i % 9, 1 + i // 9 % 9 + 7 * (i % 3)
            data = SumData(prompt=f"{a}+{b}=", answer=str(a + b), raise_in_reward=self.config.raise_in_reward)
            yield SumTask(data, self.config.task)


class Chat(vf.Harness[vf.HarnessConfig]):
    """A chat loop with MCP tools and no code execution (what rldata's rollout plays)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_MCP = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        raise NotImplementedError("rldata plays this chat loop itself")


__all__ = ["Chat", "Sums"]
