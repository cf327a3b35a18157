"""Exports of environment data: stored episodes as chat/SFT conversations (JSONL, HF datasets, read by
TRL's own helpers) and environment tasks for veRL with the tool settings it reads."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from rldata.envs.catalog import register_env
from rldata.errors import RldataError
from rldata.interop.chat_export import export_conversations
from rldata.interop.export import ExportSpec, export_selection
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
    m = export_conversations(store, out=tmp_path / "chat", fmt="jsonl")
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
    export_conversations(store, out=tmp_path / "hf", fmt="hf", correct_only=True)
    ds = datasets.load_from_disk(str(tmp_path / "hf" / "dataset"))
    assert ds.num_rows == 1 and ds[0]["messages"] == EPISODE
    from transformers import AutoTokenizer
    from trl.data_utils import maybe_apply_chat_template

    from rldata.engine import default_model_path
    from rldata.rollout import DEFAULT_TEMPLATE

    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    tok.chat_template = tok.chat_template or DEFAULT_TEMPLATE
    text = maybe_apply_chat_template({"messages": ds[0]["messages"]}, tok)["text"]
    assert "<tool>301</tool>" in text and text.startswith("<s><tools>37*8+5=")


def test_conversations_refuse_an_empty_selection_and_bad_sql(store, tmp_path):
    _store(store)
    with pytest.raises(RldataError, match="no trajectories to export for run 'nope'"):
        export_conversations(store, out=tmp_path / "x", run_id="nope")
    with pytest.raises(RldataError):
        export_conversations(store, out=tmp_path / "x", where="t.nope = 1")
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
    export_selection(
        store, spec=ExportSpec(selection="s", format="verl", env="calculator"), out=tmp_path / "v"
    )
    t = pq.read_table(tmp_path / "v" / "train.parquet").to_pylist()
    assert t[0]["prompt"] == [
        {"role": "system", "content": "<tools>"},
        {"role": "user", "content": "37*8+5="},
    ]
    ex = t[0]["extra_info"]
    assert ex["need_tools_kwargs"] is True
    assert ex["tools_kwargs"] == {"calculator": {"create_kwargs": {"ground_truth": "301", "task_id": "a"}}}
    assert ex["env_id"] == "calculator" and ex["env_version"] == row["version"]
    assert json.loads(ex["env_spec"])["max_turns"] == 3
    # without an environment the layout is the plain one
    export_selection(store, spec=ExportSpec(selection="s", format="verl"), out=tmp_path / "plain")
    assert (
        "tools_kwargs"
        not in pq.read_table(tmp_path / "plain" / "train.parquet").schema.field("extra_info").type.names
    )
