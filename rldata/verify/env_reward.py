"""``env-reward``: the environment's own reward is the verdict (OpenEnv and verifiers environments).

Such an environment scores its episode itself and reports the return in ``info["env_reward"]``
(with ``info["pass_reward"]``, the return that counts as a pass).  The episode runner stores that
``info`` with the trajectory; :func:`rldata.rollout.score.unverifiable` hands it to
:func:`reward_verdicts` instead of checking the completion text.  The rules, so a reward can never
rank a broken episode above a wrong answer:

- a missing, boolean, non-numeric or non-finite reward (or pass mark) is an error verdict (passed
  None, score 0), never a pass; an environment that says why it has no reward (``info["reward_error"]``:
  a verifiers rubric that raised) gets that message;
- passed = return >= pass_reward; score = the return clipped to [0, 1]; the per-function scores an
  environment reports (``info["rewards"]``: a verifiers rubric's) go in the verdict's detail.

Offline (``rldata verify`` of a stored trajectory) there is no episode to read the reward from:
the verifier says so with an error verdict rather than guessing from the text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rldata.verify.base import Verdict

__all__ = ["EnvRewardVerifier", "reward_verdicts"]


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def reward_verdicts(info: Mapping[str, Any]) -> list[Verdict]:
    """The verdict of an episode whose environment reported its reward (module docstring)."""
    raw, mark = info.get("env_reward"), info.get("pass_reward", 1.0)
    r, t = _number(raw), _number(mark)
    if r is None:
        why = info.get("reward_error")
        if isinstance(why, str) and why:
            return [Verdict.failure(f"env-reward: {why[:500]}")]
        return [
            Verdict.failure(f"env-reward: the environment's reward {str(raw)[:80]!r} is not a finite number")
        ]
    if t is None:
        return [Verdict.failure(f"env-reward: pass_reward {str(mark)[:80]!r} is not a finite number")]
    detail = {"reward": r, "pass_reward": t}
    if isinstance(info.get("rewards"), Mapping):
        detail["rewards"] = dict(info["rewards"])
    return [Verdict(r >= t, min(max(r, 0.0), 1.0), extracted=f"{r:g}", detail=detail)]


class EnvRewardVerifier:
    name = "env-reward"
    version = "1"
    cheap = True

    def verify(self, completion: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        info = task.get("env_info")
        if isinstance(info, Mapping) and "env_reward" in info:
            return reward_verdicts(info)
        return [
            Verdict.failure(
                "env-reward: the reward comes from the environment during the episode; "
                "a completion alone cannot be re-verified"
            )
        ]
