"""``single-turn``: today's rollouts made explicit — the task's prompt, one assistant turn, done."""

from __future__ import annotations

from rldata.envs.base import BaseEnv, Message, StepResult, register

__all__ = ["SingleTurnEnv"]


@register("single-turn")
class SingleTurnEnv(BaseEnv):
    name = "single-turn"
    version = "1"

    def step(self, assistant_message: Message) -> StepResult:
        return StepResult(observations=[], done=True, info={})
