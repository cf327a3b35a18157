"""Exports of environment data: stored episodes as chat/SFT conversations (JSONL, HF datasets, read by
TRL's own helpers) and environment tasks for veRL with the tool settings it reads."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from rldata.envs.catalog import register_env
from rldata.errors import RldataError
from rldata.interop import ExportConfig, export_selection
from rldata.interop.chat_export import export_conversations
from rldata.verify.base import Verdict, verdict_rows

EPISODE = [
    {"role": "system", "content": "<tools>"},
    {"role": "user", "content": "37*8+5="},
    {"role": "assistant", "content": "<calc>37*8+5</calc>"},
    {"role": "tool", "content": "301"},
    {"role": "assistant", "content": "301"},
]


def _store(store):
    store.append(
        "tasks",
        [
            {"task_id": "a", "source": "arith", "domain": "math", "prompt": "37*8+5=", "answer": "301"},
            {"task_id": "b", "source": "arith", "domain": "math", "prompt": "2+2=", "answer": "4"},
        ],
    )
    base = {"run_id": "r1", "model": "tiny@x", "policy_version": 0, "params_hash": "p", "sample_idx": 0}
    store.append(
        "trajectories",
        [
            {
                **base,
                "traj_id": "t-ep",
                "task_id": "a",
                "prompt": "37*8+5=",
                "completion": "301",
                "messages": EPISODE,
                "num_turns": 2,
                "num_tool_calls": 1,
                "finish_reason": "env_done",
                "env_id": "calculator",
                "env_version": "1+abc",
                "reward": 1.0,
            },
            {
                **base,
                "traj_id": "t-plain",
                "task_id": "b",
                "prompt": "2+2=",
                "completion": "5",
                "num_turns": 1,
                "finish_reason": "stop",
                "reward": 0.0,
            },
        ],
    )
    store.append(
        "verifications",
        verdict_rows("a", "t-ep", "math", "1", [Verdict(True, 1.0, "301")])
        + verdict_rows("b", "t-plain", "math", "1", [Verdict(False, 0.0, "5")]),
    )
    return store


def test_conversations_as_jsonl_hold_the_whole_episode(store, tmp_path):
    _store(store)
    m = export_conversations(store, ExportConfig(rollouts=True, out=tmp_path / "chat", format="jsonl"))
    rows = [json.loads(x) for x in (tmp_path / "chat" / "train.jsonl").read_text().splitlines()]
    assert m["rows"] == 2 and [r["traj_id"] for r in rows] == ["t-ep", "t-plain"]
    assert rows[0]["messages"] == EPISODE and rows[0]["correct"] is True and rows[0]["num_tool_calls"] == 1
    assert rows[1]["messages"] == [{"role": "user", "content": "2+2="}, {"role": "assistant", "content": "5"}]
    assert rows[1]["correct"] is False
    from trl.data_utils import is_conversational

    assert all(is_conversational({"messages": r["messages"]}) for r in rows)


def test_conversations_as_an_hf_dataset_filtered_to_correct_ones(store, tmp_path):
    import datasets

    _store(store)
    export_conversations(
        store, ExportConfig(rollouts=True, out=tmp_path / "hf", format="hf", correct_only=True)
    )
    ds = datasets.load_from_disk(str(tmp_path / "hf" / "dataset"))
    assert ds.num_rows == 1 and ds[0]["messages"] == EPISODE
    from transformers import AutoTokenizer
    from trl.data_utils import maybe_apply_chat_template

    from rldata.engine.core import default_model_path
    from rldata.rollout import DEFAULT_TEMPLATE

    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    tok.chat_template = tok.chat_template or DEFAULT_TEMPLATE
    text = maybe_apply_chat_template({"messages": ds[0]["messages"]}, tok)["text"]
    assert "<tool>301</tool>" in text and text.startswith("<s><tools>37*8+5=")


def test_conversations_refuse_an_empty_selection_and_bad_sql(store, tmp_path):
    _store(store)
    with pytest.raises(RldataError, match="no trajectories to export for run 'nope'"):
        export_conversations(
            store, ExportConfig(rollouts=True, out=tmp_path / "x", run_id="nope", format="jsonl")
        )
    with pytest.raises(RldataError):
        export_conversations(
            store, ExportConfig(rollouts=True, out=tmp_path / "x", where="t.nope = 1", format="jsonl")
        )
    assert not (tmp_path / "x").exists()


def test_verl_export_of_environment_tasks_carries_tools_kwargs(store, tmp_path):
    _store(store)
    row, _ = register_env(store, {"env": "calculator", "system_prompt": "<tools>", "max_turns": 3})
    store.append(
        "selections",
        [
            {"selection": "s", "task_id": t, "decision": "keep", "reason": "in_band", "pass_rate": 0.5}
            for t in ("a", "b")
        ],
    )
    export_selection(store, ExportConfig(selection="s", format="verl", env="calculator", out=tmp_path / "v"))
    t = pq.read_table(tmp_path / "v" / "train.parquet").to_pylist()
    assert t[0]["prompt"] == [
        {"role": "system", "content": "<tools>"},
        {"role": "user", "content": "37*8+5="},
    ]
    ex = t[0]["extra_info"]
    assert ex["need_tools_kwargs"] is True and t[0]["agent_name"] == "tool_agent"
    (kw,) = ex["tools_kwargs"].values()
    assert list(ex["tools_kwargs"]) == ["calculator"]
    assert {k: kw["create_kwargs"][k] for k in ("ground_truth", "task_id")} == {
        "ground_truth": "301",
        "task_id": "a",
    }
    assert json.loads(kw["create_kwargs"]["task"])["answer"] == "301"
    assert ex["interaction_kwargs"]["name"] == "rldata" and ex["rldata_episode"] is True
    assert ex["env_id"] == "calculator" and ex["env_version"] == row["version"]
    assert json.loads(ex["env_spec"])["max_turns"] == 3
    # without an environment the layout is the plain one
    export_selection(store, ExportConfig(selection="s", format="verl", out=tmp_path / "plain"))
    assert (
        "tools_kwargs"
        not in pq.read_table(tmp_path / "plain" / "train.parquet").schema.field("extra_info").type.names
    )


TOOL_EPISODE = [
    {"role": "system", "content": "Use the tool."},
    {"role": "user", "content": "37*8+5="},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c00010000", "name": "calculate", "arguments": '{"expression": "37*8+5"}'}],
    },
    {"role": "tool", "content": "301", "tool_call_id": "c00010000"},
    {"role": "assistant", "content": "301"},
]


def _tool_store(store):
    _store(store)
    row, _ = register_env(store, {"env": "calculator-tools", "system_prompt": "Use the tool."})
    base = {"run_id": "r2", "model": "qwen@x", "policy_version": 0, "params_hash": "p", "sample_idx": 0}
    store.append(
        "trajectories",
        [
            {
                **base,
                "traj_id": "t-tool",
                "task_id": "a",
                "prompt": "37*8+5=",
                "completion": "301",
                "messages": TOOL_EPISODE,
                "num_turns": 2,
                "num_tool_calls": 1,
                "finish_reason": "env_done",
                "env_id": "calculator-tools",
                "env_version": row["version"],
                "reward": 1.0,
            }
        ],
    )
    store.append("verifications", verdict_rows("a", "t-tool", "math", "1", [Verdict(True, 1.0, "301")]))
    return store


def test_tool_episodes_export_tool_calls_and_a_tools_column_trl_renders(store, tmp_path, qwen_model):
    import datasets
    from transformers import AutoTokenizer
    from trl.data_utils import maybe_apply_chat_template

    from rldata.envs.calculator import calculate
    from rldata.envs.tools import tool
    from rldata.rollout import Renderer

    _tool_store(store)
    export_conversations(store, ExportConfig(rollouts=True, out=tmp_path / "hf", format="hf", run_id="r2"))
    (row,) = datasets.load_from_disk(str(tmp_path / "hf" / "dataset"))
    assert json.loads(row["tools"]) == [tool(calculate).schema]
    call = row["messages"][2]["tool_calls"][0]
    assert call == {
        "id": "c00010000",
        "type": "function",
        "function": {"name": "calculate", "arguments": '{"expression": "37*8+5"}'},
    }
    assert row["messages"][3]["tool_call_id"] == "c00010000"
    tok = AutoTokenizer.from_pretrained(str(qwen_model))
    text = maybe_apply_chat_template({"messages": row["messages"]}, tok, tools=json.loads(row["tools"]))[
        "text"
    ]
    # the schema, laid out by the template in the system turn
    assert text.index('{"type": "function", "function": {"name": "calculate"') < text.index(
        "<|im_start|>user"
    )
    assert '<tool_call>\n{"name": "calculate", "arguments": {"expression": "37*8+5"}}\n</tool_call>' in text
    assert "<tool_response>\n301\n</tool_response>" in text
    # the very text the rollout rendered the episode with
    assert text == Renderer(tok).text(TOOL_EPISODE, generation_prompt=False, tools=json.loads(row["tools"]))
    # JSONL: the other rows (no tool calls, no tools) have nulls in the new fields
    export_conversations(store, ExportConfig(rollouts=True, out=tmp_path / "j", format="jsonl"))
    rows = {
        r["traj_id"]: r for r in map(json.loads, (tmp_path / "j" / "train.jsonl").read_text().splitlines())
    }
    assert rows["t-plain"]["tools"] is None and rows["t-ep"]["tools"] is None
    assert rows["t-ep"]["messages"][2]["tool_calls"] is None and rows["t-tool"]["tools"] == row["tools"]


def test_verl_export_of_tool_env_tasks_carries_the_schemas_in_tools_kwargs(store, tmp_path):
    from rldata.envs.calculator import calculate
    from rldata.envs.tools import tool

    _store(store)
    register_env(store, {"env": "calculator-tools", "system_prompt": "Use the tool."})
    store.append(
        "selections",
        [{"selection": "s", "task_id": "a", "decision": "keep", "reason": "in_band", "pass_rate": 0.5}],
    )
    export_selection(
        store,
        ExportConfig(selection="s", format="verl", options={"env": "calculator-tools"}, out=tmp_path / "v"),
    )
    (t,) = pq.read_table(tmp_path / "v" / "train.parquet").to_pylist()
    kw = t["extra_info"]["tools_kwargs"]
    ck = kw["calculate"]["create_kwargs"]
    assert (ck["ground_truth"], ck["task_id"], json.loads(ck["env_spec"])["env"]) == (
        "301",
        "a",
        "calculator-tools",
    )
    assert json.loads(kw["calculate"]["tool_schema"]) == tool(calculate).schema
    assert json.loads(t["extra_info"]["tools"]) == [tool(calculate).schema]


def test_trl_export_of_tool_env_tasks_has_a_tools_column(store, tmp_path, qwen_model):
    import datasets
    from transformers import AutoTokenizer
    from trl.data_utils import maybe_apply_chat_template

    _store(store)
    row, _ = register_env(store, {"env": "calculator-tools", "system_prompt": "Use the tool."})
    (a,) = store.read("tasks").filter(task_id="a").to_dicts()
    store.upsert("tasks", [{**a, "env_id": "calculator-tools", "env_version": row["version"]}])
    store.append(
        "selections",
        [
            {"selection": "s", "task_id": t, "decision": "keep", "reason": "in_band", "pass_rate": 0.5}
            for t in ("a", "b")
        ],
    )
    # the default (prompt_style auto): environment tasks are templated, so messages and their tools
    export_selection(store, ExportConfig(selection="s", format="trl", out=tmp_path / "t"))
    ds = datasets.load_from_disk(str(tmp_path / "t" / "dataset"))
    by_id = {r["task_id"]: r for r in ds}
    assert (
        by_id["b"]["tools"] is None and json.loads(by_id["a"]["tools"])[0]["function"]["name"] == "calculate"
    )
    tok = AutoTokenizer.from_pretrained(str(qwen_model))
    prompt = maybe_apply_chat_template(
        {"prompt": by_id["a"]["prompt"]}, tok, tools=json.loads(by_id["a"]["tools"])
    )["prompt"]
    assert '"name": "calculate"' in prompt and prompt.endswith("<|im_start|>assistant\n")
    # the episode's opening: the spec's system prompt, then the task
    assert [m["role"] for m in by_id["a"]["prompt"]] == ["system", "user"]
    assert by_id["a"]["prompt"][0]["content"] == "Use the tool."
    # a text-prompt export stays as it was
    export_selection(
        store,
        ExportConfig(selection="s", format="trl", options={"prompt_style": "text"}, out=tmp_path / "plain"),
    )
    assert "tools" not in datasets.load_from_disk(str(tmp_path / "plain" / "dataset")).column_names
