"""Verify rollouts and turn them into trajectory columns: the part ``rldata sample`` and the trainer
share after generation.

Every verdict is looked up by the sample's own key, never by position, so a check that fails or
times out mid-batch cannot shift verdicts between samples.  A rollout that never produced an answer
to check (the prompt did not fit, or its environment failed) gets an error verdict: counted as an
error in the ledger and scored like a wrong answer, never as a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rldata.rollout.bind import EnvBinding
from rldata.rollout.episodes import Rollout, info_json
from rldata.verify.base import Verdict
from rldata.verify.env_reward import reward_verdicts
from rldata.verify.parallel import verify_on_ray

__all__ = ["episode_columns", "unverifiable", "verify_rollouts"]


def unverifiable(r: Rollout, *, max_model_len: int) -> list[Verdict] | None:
    """The verdict of a rollout the verifier does not see, or None when it goes to the verifier: an
    error verdict when there is nothing to verify, the environment's reward when it gave one
    (OpenEnv and verifiers environments: ``env_info["env_reward"]``, see rldata.verify.env_reward)."""
    if r.finish_reason == "prompt_too_long":
        return [
            Verdict.failure(
                f"prompt_too_long: the prompt has {r.prompt_tokens} tokens, the engine's "
                f"context (max_model_len) is {max_model_len}"
            )
        ]
    if r.finish_reason == "env_error":
        return [Verdict.failure(f"env_error: {getattr(r, 'env_error', None) or 'the environment failed'}")]
    info = getattr(r, "env_info", None)
    if info and "env_reward" in info:
        return reward_verdicts(info)
    return None


def verify_rollouts(
    keys: Sequence[str],
    tasks: Sequence[Mapping[str, Any]],
    rollouts: Sequence[Rollout],
    verifier_for: Callable[[str], tuple[str, str]],
    *,
    timeout_s: float | None,
    max_model_len: int,
) -> dict[str, list[Verdict]]:
    """key -> the sample's verdicts (one per layer)."""
    items, out = [], {}
    for key, task, r in zip(keys, tasks, rollouts, strict=True):
        bad = unverifiable(r, max_model_len=max_model_len)
        if bad is not None:
            out[key] = bad
            continue
        items.append(
            {
                "key": key,
                "verifier": verifier_for(task["domain"])[0],
                "domain": task["domain"],
                "completion": r.text,
                "answer": task["answer"],
                "tests": task["tests"],
                "metadata": task.get("metadata"),
                "prompt": task.get("prompt"),
            }
        )
    if items:
        out.update(verify_on_ray(items, timeout_s=timeout_s))
    return out


def episode_columns(r: Rollout, binding: EnvBinding | None) -> dict[str, Any]:
    """The trajectory columns that describe what was generated (the caller adds identity columns)."""
    if not isinstance(r, Rollout):  # an engine Sample (a plain completion)
        r = Rollout.from_sample(r)
    return {
        "completion": r.text,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cumulative_logprob": r.cumulative_logprob,
        "finish_reason": r.finish_reason,
        "messages": [dict(m) for m in r.messages] if r.messages is not None else None,
        "num_turns": r.num_turns,
        "num_tool_calls": r.num_tool_calls,
        "env_info": info_json(r),
        "env_id": binding.env_id if binding else None,
        "env_version": binding.version if binding else None,
    }
