"""``rldata export --rollouts --format trl|verl`` (issue 43 §5): stored episodes and samples in the
layouts TRL's SFTTrainer and veRL's multi-turn SFT dataset read, rendered by the model's template to
the conversation the model saw."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rldata.cli import main
from rldata.configs.sampling import SamplingSpec
from rldata.errors import RldataError
from rldata.interop import ExportConfig
from rldata.interop.chat_export import export_conversations

EPISODE = [
    {"role": "user", "content": "37*8+5="},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c00000000", "name": "calculate", "arguments": '{"expression": "37*8+5"}'}],
    },
    {"role": "tool", "content": "301", "tool_call_id": "c00000000"},
    {"role": "assistant", "content": "301"},
]


def _store(store, *, plain_template: str):
    from rldata.envs.catalog import register_env

    row, _ = register_env(store, {"env": "calculator-tools"})
    store.append(
        "tasks",
        [
            {"task_id": "a", "source": "arith", "domain": "math", "prompt": "37*8+5=", "answer": "301"},
            {"task_id": "b", "source": "arith", "domain": "math", "prompt": "2+2=", "answer": "4"},
        ],
    )
    base = {"run_id": "r1", "model": "m@x", "policy_version": 0, "sample_idx": 0}
    on = SamplingSpec(chat_template="on")
    plain = SamplingSpec(chat_template=plain_template)
    store.append(
        "trajectories",
        [
            {
                **base,
                "traj_id": "t-ep",
                "task_id": "a",
                "params_hash": on.params_hash,
                "sampling_params": on.to_json(),
                "prompt": "37*8+5=",
                "completion": "301",
                "messages": EPISODE,
                "num_turns": 2,
                "num_tool_calls": 1,
                "finish_reason": "env_done",
                "env_id": "calculator-tools",
                "env_version": row["version"],
                "reward": 1.0,
            },
            {
                **base,
                "traj_id": "t-plain",
                "task_id": "b",
                "params_hash": plain.params_hash,
                "sampling_params": plain.to_json(),
                "prompt": "2+2=",
                "completion": "4",
                "num_turns": 1,
                "finish_reason": "stop",
                "reward": 1.0,
            },
        ],
    )


def _stored(ms: list) -> list:
    """Stored turns in the form chat templates read (rldata.rollout.render.chat_form): the reference."""
    from rldata.rollout.render import chat_form

    return chat_form(ms)


def _env_tools(store) -> list:
    from rldata.envs.base import EnvSpec
    from rldata.envs.tools import env_tool_schemas

    ((spec,),) = store.sql("SELECT spec FROM environments WHERE env_id = 'calculator-tools'").fetchall()
    return env_tool_schemas(EnvSpec.from_dict(json.loads(spec)))


def clean(ms: list) -> list:
    """Exported turns as a consumer hands them to the template (null fields left out)."""
    return [{k: v for k, v in m.items() if v is not None} for m in ms]


def test_trl_rollouts_render_to_the_conversation(capsys, store, tmp_path, qwen_model):
    """Prompt-completion rows: TRL's SFT tokenization (prompt with the generation prompt, then
    prompt + completion) renders exactly the stored episode with its tools."""
    from datasets import load_dataset
    from transformers import AutoTokenizer

    _store(store, plain_template="on")
    assert main(["--store", store.root, "export", "--rollouts", "-f", "trl", "-o", str(tmp_path / "t")]) == 0
    capsys.readouterr()
    ds = load_dataset(str(tmp_path / "t"))["train"]
    rows = {r["traj_id"]: r for r in ds}
    ep = rows["t-ep"]
    assert [m["role"] for m in ep["prompt"]] == ["user"]
    assert [m["role"] for m in ep["completion"]] == ["assistant", "tool", "assistant"]
    assert json.loads(ep["tools"])[0]["function"]["name"] == "calculate"
    assert rows["t-plain"]["prompt"] == [
        {"role": "user", "content": "2+2=", "tool_calls": None, "tool_call_id": None}
    ]
    tok = AutoTokenizer.from_pretrained(str(qwen_model))
    tools = json.loads(ep["tools"])
    assert tools == _env_tools(store)
    whole = tok.apply_chat_template(_stored(EPISODE), tools=tools, tokenize=False)
    prompt = tok.apply_chat_template(
        clean(ep["prompt"]), tools=tools, tokenize=False, add_generation_prompt=True
    )
    both = tok.apply_chat_template(clean(ep["prompt"] + ep["completion"]), tools=tools, tokenize=False)
    assert both == whole and whole.startswith(prompt)
    assert '"name": "calculate"' in whole and "<tool_response>\n301\n</tool_response>" in whole
    manifest = json.loads((tmp_path / "t" / "rldata-manifest.json").read_text())
    assert manifest["format"] == "chat-trl" and manifest["chat_template"] == "on"


def test_trl_rollouts_of_raw_samples_are_text_and_mixed_ones_are_refused(store, tmp_path):
    _store(store, plain_template="off")
    with pytest.raises(RldataError, match="export them separately"):
        export_conversations(store, ExportConfig(rollouts=True, format="trl", out=tmp_path / "x"))
    assert not (tmp_path / "x").exists()
    m = export_conversations(
        store, ExportConfig(rollouts=True, format="trl", where="t.env_id IS NULL", out=tmp_path / "raw")
    )
    assert m["chat_template"] == "off"
    import datasets

    (row,) = datasets.load_from_disk(str(tmp_path / "raw" / "dataset"))
    assert row["prompt"] == "2+2=" and row["completion"] == "4"  # what the model saw and wrote


def _read_like_verl(path) -> tuple[list, list]:
    """What veRL's MultiTurnSFTDataset reads (verl/utils/dataset/multiturn_sft_dataset.py, read from
    its source): pandas.read_parquet, then ``messages_key`` and ``tools_key`` through its recursive
    numpy-to-list conversion."""

    def convert(x):
        if isinstance(x, dict):
            return {k: convert(v) for k, v in x.items()}
        if isinstance(x, list):
            return [convert(v) for v in x]
        if isinstance(x, np.ndarray):
            return convert(x.tolist())
        return x

    df = pd.read_parquet(path)
    tools = df["tools"].apply(convert).tolist() if "tools" in df.columns else None
    return df["messages"].apply(convert).tolist(), tools


def test_verl_rollouts_read_as_verl_reads_them(capsys, store, tmp_path, qwen_model):
    """messages and tools as veRL's multi-turn SFT dataset reads them: the tools a list of schema
    objects (handed to the chat template as they are), the episode rendering as stored."""
    from transformers import AutoTokenizer

    _store(store, plain_template="on")
    assert main(["--store", store.root, "export", "--rollouts", "-f", "verl", "-o", str(tmp_path / "v")]) == 0
    capsys.readouterr()
    messages, tools = _read_like_verl(tmp_path / "v" / "train.parquet")
    assert tools[0] == _env_tools(store) and tools[1] is None
    tok = AutoTokenizer.from_pretrained(str(qwen_model))
    assert tok.apply_chat_template(
        clean(messages[0]), tools=tools[0], tokenize=False
    ) == tok.apply_chat_template(_stored(EPISODE), tools=tools[0], tokenize=False)
    # raw samples: veRL would template them, so they are refused with the layouts that keep them
    from rldata import open_store

    s2 = open_store(tmp_path / "s2")
    _store(s2, plain_template="off")
    with pytest.raises(RldataError, match="raw text"):
        export_conversations(
            s2, ExportConfig(rollouts=True, format="verl", where="t.env_id IS NULL", out=tmp_path / "w")
        )
