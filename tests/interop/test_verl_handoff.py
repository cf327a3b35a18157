"""The veRL handoff trains (issue 43 §5): the export of environment tasks runs in veRL's multi-turn tool
agent loop (agent_name, a tool class and tool_config generated from the environment's tools, an
interaction, a reward function), and environment-reward tasks export with a reward that asks the
environment.

veRL is not installed here (it is not an rldata dependency), so the files are read the way veRL's own
loaders read them, as its source shows: ``tool_registry.initialize_tools_from_config`` (OmegaConf, the
class by its dotted path, ``config.type``, ``tool_schema``), ``interaction_registry`` (``interaction[]``:
name, class_name, config), ``RLHFDataset.__getitem__`` (``datasets`` parquet rows: the prompt messages,
``extra_info.tools_kwargs`` / ``interaction_kwargs``, ``agent_name``) and ``ToolAgentLoop`` (which calls
a tool's ``create(create_kwargs=...)``, ``execute(instance_id, args, agent_data=...)``, ``release``, and
the interaction's ``start_interaction`` / ``generate_response``); then an episode is driven through the
classes as ToolAgentLoop drives them."""

from __future__ import annotations

import asyncio
import importlib
import json
from types import SimpleNamespace

import pytest

# rldata.envs.register is shadowed by the submodule rldata.envs.register once that is imported: take
# the decorator from its own module
from rldata.envs.base import BaseEnv, StepResult, register
from rldata.envs.catalog import register_env
from rldata.interop import ExportConfig, export_selection
from rldata.interop.verl import compute_score, verl_schema_problem


@register("test-judged")
class Judged(BaseEnv):
    """Owns its reward: the episode's answer must be "yes" (no verifier could tell)."""

    name, version = "test-judged", "1"

    def reset(self, task, seed):
        self.turns = 0
        return self.opening(task)

    def step(self, assistant_message):
        self.turns += 1
        if assistant_message["content"].strip() == "maybe" and self.turns < 3:
            return StepResult([{"role": "user", "content": "Decide."}])
        ok = assistant_message["content"].strip() == "yes"
        return StepResult(done=True, info={"env_reward": 1.0 if ok else 0.0, "pass_reward": 1.0})


def _store(store, env_spec: dict, *, answer: str | None):
    row, _ = register_env(store, env_spec)
    store.append(
        "tasks",
        [
            {
                "task_id": "a",
                "source": "arith",
                "domain": "math",
                "prompt": "37*8+5=",
                "answer": answer,
                "env_id": row["env_id"],
                "env_version": row["version"],
            }
        ],
    )
    store.append(
        "selections",
        [{"selection": "s", "task_id": "a", "decision": "keep", "reason": "in_band", "pass_rate": 0.5}],
    )
    return row


def _load_like_verl(d):
    """The four files as veRL's loaders read them (module docstring)."""
    from datasets import load_dataset
    from omegaconf import OmegaConf

    def cls(dotted):  # verl.tools.utils.tool_registry.get_tool_class / get_interaction_class
        module, name = dotted.rsplit(".", 1)
        return getattr(importlib.import_module(module), name)

    tools = []
    if (d / "tool_config.yaml").exists():
        for tc in OmegaConf.load(d / "tool_config.yaml").tools:
            assert tc.config.type == "native"  # ToolType(tool_config.config.type)
            schema = OmegaConf.to_container(tc.tool_schema, resolve=True)
            assert verl_schema_problem(schema) is None
            tools.append(
                cls(tc.class_name)(config=OmegaConf.to_container(tc.config, resolve=True), tool_schema=schema)
            )
    interactions = {}
    for item in OmegaConf.load(d / "interaction_config.yaml").interaction:
        config = {**OmegaConf.to_container(item.config, resolve=True), "name": item.name}
        interactions[item.name] = cls(item.class_name)(config=config)
    (row,) = load_dataset("parquet", data_files=str(d / "train.parquet"))["train"]
    overrides = OmegaConf.from_dotlist((d / "verl_overrides.txt").read_text().split())
    return {t.name: t for t in tools}, interactions, row, overrides


def _episode(tools, interactions, row, turns: list):
    """Drive one episode as veRL's ToolAgentLoop does: a turn with a tool call goes to the tool
    (create with the row's create_kwargs, execute with agent_data, release); a turn without goes to the
    interaction, until it says the sequence ends.  Returns (tool answers, final score, turns scored)."""

    async def run():
        request_id = "req-1"
        ik = row["extra_info"]["interaction_kwargs"]
        inter = interactions[ik["name"]]
        await inter.start_interaction(request_id, **ik)
        messages = list(row["prompt"])
        answers, scores = [], []
        for kind, payload in turns:
            if kind == "call":
                name, args = payload
                tool = tools[name]
                kw = row["extra_info"]["tools_kwargs"][name]
                instance_id, _ = await tool.create(create_kwargs=kw["create_kwargs"])
                resp, _, _ = await tool.execute(
                    instance_id, args, agent_data=SimpleNamespace(request_id=request_id)
                )
                await tool.release(instance_id)
                answers.append(resp.text)
                messages.append({"role": "tool", "content": resp.text})
            else:
                messages.append({"role": "assistant", "content": payload})
                end, text, score, _ = await inter.generate_response(request_id, messages, **ik)
                scores.append(score)
                if end:
                    return answers, score, scores
                messages.append({"role": "user", "content": text})
        return answers, None, scores

    return asyncio.run(run())


def test_tool_env_export_runs_in_verls_tool_agent_loop(store, tmp_path):
    row = _store(
        store, {"env": "calculator-tools", "system_prompt": "Use the tool.", "max_turns": 3}, answer="301"
    )
    export_selection(store, ExportConfig(selection="s", format="verl", out=tmp_path / "v"))
    tools, interactions, data, over = _load_like_verl(tmp_path / "v")
    assert data["agent_name"] == "tool_agent" and list(tools) == ["calculate"]
    assert [m["role"] for m in data["prompt"]] == ["system", "user"]
    # the tool's schema is the environment's, as rldata lays it out in the chat template
    assert tools["calculate"].tool_schema == json.loads(data["extra_info"]["tools"])[0]
    mt = over.actor_rollout_ref.rollout.multi_turn  # what ToolAgentLoop.__init__ reads
    assert mt.enable and mt.tool_config_path == "tool_config.yaml" and mt.format == "hermes"
    assert mt.interaction_config_path == "interaction_config.yaml" and mt.max_assistant_turns == 3
    assert over.custom_reward_function.path == "pkg://rldata.interop.verl"
    assert over.custom_reward_function.name == "compute_score" and over.data.train_files == "train.parquet"
    assert json.loads(data["extra_info"]["env_spec"])["env"] == "calculator-tools" == row["env_id"]

    # right: a call, then the answer
    answers, score, _ = _episode(
        tools, interactions, data, [("call", ("calculate", {"expression": "37*8+5"})), ("say", "301")]
    )
    assert answers == ["301"] and score == 1.0
    # wrong final answer after a right call: the verifier reads the last turn, not the tool's reply
    _, score, _ = _episode(
        tools, interactions, data, [("call", ("calculate", {"expression": "37*8+5"})), ("say", "")]
    )
    assert score == 0.0
    # a bad call is the environment's error message, and the episode goes on
    answers, score, _ = _episode(
        tools, interactions, data, [("call", ("calculate", {"expression": "37*"})), ("say", "301")]
    )
    assert answers[0].startswith("error:") and score == 1.0
    # veRL's reward function: the interaction's score of the last turn
    extra = {**data["extra_info"], "turn_scores": [0.0, 1.0], "tool_rewards": [0.0]}
    assert compute_score(data["data_source"], "anything", "301", extra) == 1.0
    assert compute_score(data["data_source"], "301", "301", {**data["extra_info"], "turn_scores": []}) == 0.0


def test_env_reward_tasks_export_with_a_reward_that_asks_the_environment(store, tmp_path):
    """A task without an answer whose environment owns the reward: refused before ("veRL's rule
    reward needs a ground_truth"), now exported; the interaction scores it with the environment's reward."""
    _store(store, {"env": "test-judged", "max_turns": 4}, answer=None)
    export_selection(store, ExportConfig(selection="s", format="verl", out=tmp_path / "v"))
    tools, interactions, data, over = _load_like_verl(tmp_path / "v")
    assert tools == {} and not (tmp_path / "v" / "tool_config.yaml").exists()
    assert data["reward_model"]["ground_truth"] is None and data["agent_name"] == "tool_agent"
    assert "tool_config_path" not in over.actor_rollout_ref.rollout.multi_turn
    _, score, scores = _episode(tools, interactions, data, [("say", "maybe"), ("say", "yes")])
    assert score == 1.0 and scores == [0.0, 1.0]
    _, score, _ = _episode(tools, interactions, data, [("say", "no")])
    assert score == 0.0
    # still undecided at the environment's third turn: its reward is 0
    _, score, scores = _episode(tools, interactions, data, [("say", "maybe")] * 4)
    assert score == 0.0 and len(scores) == 3
    assert compute_score("x", "yes", None, {**data["extra_info"], "turn_scores": [0.0, 1.0]}) == 1.0


def test_plain_tasks_score_with_rldatas_verifier():
    """veRL's custom reward on a plain task: rldata's verifier of the task's domain, so the rewards are
    the verdicts the selection was made from (a hedge is wrong, a written-out answer is read)."""
    assert compute_score("arith", "19", "19", {"domain": "math"}) == 1.0
    assert compute_score("arith", "19 or 20", "19", {"domain": "math"}) == 0.0
    assert compute_score("arith", "The answer is $19$.", "19", {"domain": "math"}) == 1.0
    assert compute_score("arith", "18", "19", None) == 0.0


def test_plain_verl_export_names_the_domain_and_the_reward(store, tmp_path):
    store.append(
        "tasks", [{"task_id": "b", "source": "arith", "domain": "math", "prompt": "2+2=", "answer": "4"}]
    )
    store.append(
        "selections",
        [{"selection": "s", "task_id": "b", "decision": "keep", "reason": "in_band", "pass_rate": 0.5}],
    )
    export_selection(store, ExportConfig(selection="s", format="verl", out=tmp_path / "p"))
    import pyarrow.parquet as pq

    (row,) = pq.read_table(tmp_path / "p" / "train.parquet").to_pylist()
    assert row["extra_info"]["domain"] == "math" and "agent_name" not in row
    lines = (tmp_path / "p" / "verl_overrides.txt").read_text().split()
    assert "custom_reward_function.path=pkg://rldata.interop.verl" in lines


@pytest.mark.parametrize(
    "schema, problem",
    [
        (
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "d",
                    "parameters": {
                        "type": "object",
                        "properties": {"x": {"type": ["string", "null"]}},
                        "required": [],
                    },
                },
            },
            "one type",
        ),
        (
            {
                "type": "function",
                "function": {"name": "f", "parameters": {"type": "object", "properties": {}, "required": []}},
            },
            "description",
        ),
        (
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "d",
                    "parameters": {
                        "type": "object",
                        "properties": {"x": {"type": "array", "items": {"type": "string"}}},
                        "required": [],
                    },
                },
            },
            "items",
        ),
    ],
)
def test_schemas_verl_cannot_load_are_named(schema, problem):
    assert problem in verl_schema_problem(schema)
