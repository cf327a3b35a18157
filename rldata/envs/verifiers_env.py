"""``verifiers``: a Prime Intellect verifiers environment (0.1.x line) driven as an rldata environment.

``rldata env register NAME --verifiers MODULE`` records ``{env: verifiers, config: {module: MODULE}}``;
MODULE is an installed environment package (what ``verifiers.load_environment(MODULE)`` imports:
a module with ``load_environment(**env_args)``).  Only the 0.1.x line's API is read (``SingleTurnEnv``,
``MultiTurnEnv``, ``ToolEnv``, ``Rubric``): 0.1.10 is the newest release that installs beside rldata's
pinned stack (docs/environments.md says which pins the later ones conflict with).

- **Tasks** (``rldata ingest --env NAME --n K``): the first K rows of the environment's dataset; the
  row's prompt messages, answer and info go in the task's metadata (``{"verifiers": {...}}``), the
  last user message's text is the task's prompt.
- **Turns** run inside rldata's batched rollout, not verifiers' OpenAI-client loop: ``reset`` builds
  the verifiers state from the task (its ``init_state`` and ``setup_state``), ``step`` appends the
  model's turn to the state's trajectory, asks the environment's stop conditions (``is_completed``)
  and otherwise its ``env_response`` for the observation messages.  A ``ToolEnv``'s ``oai_tools``
  become the episode's tool schemas, so the model's chat template lays them out and rldata's parser
  reads the calls, which reach ``env_response`` in OpenAI's form.
- **Reward**: when the episode ends, the environment's rubric scores the state (``score_rollout``);
  the reward goes in ``info["env_reward"]`` and the ``env-reward`` verifier makes it the verdict
  (``pass_reward``: the reward that counts as a pass, 1.0 by default).

verifiers' coroutines run on a private event loop per call (``asyncio.run``): each episode's calls
come from rldata's environment thread pool, never from a running loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from rldata.envs.base import BaseEnv, Message, StepResult, register
from rldata.errors import RldataError

__all__ = ["VerifiersEnv", "dataset_tasks", "load"]

_LOADED: dict[tuple[str, str], Any] = {}


def load(module: str, env_args: Mapping[str, Any] | None = None):
    """The verifiers environment ``module`` builds (cached per process: loading may read a dataset)."""
    key = (module, json.dumps(dict(env_args or {}), sort_keys=True))
    if key not in _LOADED:
        try:
            import verifiers as vf
        except ImportError:
            raise RldataError(
                "environment 'verifiers' needs the verifiers package: pip install 'verifiers==0.1.10'"
            ) from None
        try:
            _LOADED[key] = vf.load_environment(module, **dict(env_args or {}))
        except (ImportError, AttributeError, ValueError, TypeError) as e:
            raise RldataError(f"verifiers environment {module!r} does not load: {e}") from None
    return _LOADED[key]


def _text(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    users = [m for m in messages if m.get("role") == "user"]
    return str((users or list(messages))[-1].get("content") or "")


def _openai_form(msg: Mapping[str, Any]) -> dict[str, Any]:
    """A stored assistant message (tool calls as ``{id, name, arguments}``) as verifiers reads it."""
    out = {"role": msg["role"], "content": msg.get("content") or ""}
    if msg.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in msg["tool_calls"]
        ]
    return out


def dataset_tasks(spec, *, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``rldata ingest --env NAME --n K``: the first K rows of the environment's dataset (from row ``seed``)."""
    env = load(spec.config["module"], spec.config.get("env_args"))
    ds = env.get_dataset() if hasattr(env, "get_dataset") else env.dataset
    if ds is None:
        raise RldataError(f"verifiers environment {spec.config['module']!r} has no dataset")
    rows = []
    for i in range(seed, min(seed + n, len(ds))):
        r = ds[i]
        vf_row = {"prompt": r["prompt"], "answer": r.get("answer", ""), "info": r.get("info") or {}}
        rows.append(
            {
                "source": "verifiers",
                "domain": "env-reward",
                "prompt": _text(r["prompt"]),
                "answer": r.get("answer") or None,
                "metadata": json.dumps({"verifiers": vf_row}, default=str),
            }
        )
    return rows


@register("verifiers")
class VerifiersEnv(BaseEnv):
    """One verifiers state per episode (module docstring)."""

    name = "verifiers"
    version = "1"
    needs_config = True  # no default spec: not listed as a bundled environment before it is registered

    def __init__(
        self,
        *,
        system_prompt: str | None = None,
        module: str | None = None,
        env_args: Mapping[str, Any] | None = None,
        pass_reward: float = 1.0,
        **config: Any,
    ):
        super().__init__(system_prompt=system_prompt, **config)
        if not isinstance(module, str) or not module:
            raise RldataError("config key 'module': expected the verifiers environment's module name")
        if isinstance(pass_reward, bool) or not isinstance(pass_reward, (int, float)):
            raise RldataError("config key 'pass_reward': expected a number")
        self.vf_env = load(module, env_args)
        self.pass_reward = float(pass_reward)
        self.state = None
        self.messages: list[dict] = []
        self.initial_info = {"pass_reward": self.pass_reward}
        tools = getattr(self.vf_env, "oai_tools", None)
        self.tool_schemas = [dict(t) for t in tools] if tools else None

    @classmethod
    def task_rows(cls, spec, *, n: int, seed: int = 0) -> list[dict[str, Any]]:
        return dataset_tasks(spec, n=n, seed=seed)

    def reset(self, task: Mapping[str, Any], seed: int | None) -> list[Message]:
        meta = task.get("metadata")
        meta = json.loads(meta) if isinstance(meta, str) else dict(meta or {})
        row = meta.get("verifiers") or {}
        prompt = row.get("prompt") or [{"role": "user", "content": task["prompt"]}]
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
        if self.system_prompt and not any(m["role"] == "system" for m in prompt):
            prompt = [{"role": "system", "content": self.system_prompt}, *prompt]
        rollout_input = {
            "prompt": prompt,
            "answer": row.get("answer", task.get("answer") or ""),
            "info": row.get("info") or {},
            "example_id": 0,
        }
        env = self.vf_env

        async def start():
            state = await env.init_state(rollout_input, None, "rldata", None)
            return await env.setup_state(state)

        self.state = asyncio.run(start())
        self.messages = [dict(m) for m in prompt]
        return [dict(m) for m in prompt]

    def step(self, assistant_message: Message) -> StepResult:
        env, state = self.vf_env, self.state
        turn = _openai_form(assistant_message)

        async def advance():
            await env.add_trajectory_step(
                state,
                {
                    "prompt": list(self.messages),
                    "completion": [turn],
                    "response": None,
                    "tokens": None,
                    "reward": None,
                    "advantage": None,
                    "is_truncated": False,
                    "trajectory_id": state["trajectory_id"],
                    "extras": {},
                },
            )
            self.messages.append(turn)
            if await env.is_completed(state):
                return [], True
            said = await env.env_response(list(self.messages), state)
            said = [dict(m) for m in ([{"role": "user", "content": said}] if isinstance(said, str) else said)]
            self.messages += said
            if state.get("final_env_response") is not None or await env.is_completed(state):
                return said, True
            return said, False

        said, done = asyncio.run(advance())
        calls = sum(len(m.get("tool_calls") or []) for m in self.messages if m.get("role") == "assistant")
        info: dict[str, Any] = {"tool_calls": calls}
        if done:
            info["env_reward"] = self._score()
        obs = [{"role": m["role"], "content": str(m.get("content") or "")} for m in said]
        for o, m in zip(obs, said):
            if m.get("tool_call_id"):
                o["tool_call_id"] = m["tool_call_id"]
        return StepResult(observations=obs, done=done, info=info)

    def _score(self) -> float:
        env, state = self.vf_env, self.state

        async def score():
            await env.render_completion(state)
            state.setdefault("timing", {"total_ms": 0.0})
            state["timing"].setdefault("total_ms", 0.0)
            await env.rubric.score_rollout(state)
            return state["reward"]

        reward = asyncio.run(score())
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise RldataError(f"the rubric's reward {reward!r} is not a number")
        return float(reward)
