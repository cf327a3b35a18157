"""The Qwen2-architecture fixture: deterministic bytes, a byte-level BPE that round-trips, and the
ChatML template with its tools branch, read back through transformers as a user's model would be."""

from __future__ import annotations

import json

import pytest

from rldata.errors import ConfigError
from rldata.models.fixture import SIZES, make_qwen2_fixture

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def tok(qwen_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen_model)


def test_files_and_config(qwen_model):
    names = {p.name for p in qwen_model.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= names
    cfg = json.loads((qwen_model / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen2ForCausalLM"] and cfg["model_type"] == "qwen2"
    assert cfg["hidden_size"] // cfg["num_attention_heads"] == 32
    gen = json.loads((qwen_model / "generation_config.json").read_text())
    # generation stops at the end of a turn and at end of text, as in Qwen's instruct models
    assert len(gen["eos_token_id"]) == 2 and cfg["eos_token_id"] == gen["eos_token_id"][0]
    assert (qwen_model / "model.safetensors").stat().st_size < 4_000_000


def test_loads_as_qwen2(qwen_model, tok):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(qwen_model)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert type(tok).__name__ == "Qwen2Tokenizer"
    assert model.config.vocab_size == len(tok)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>" and tok.bos_token is None


@pytest.mark.parametrize(
    "text",
    [
        "12+7=19",
        "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72",
        "def f(x):\n    return x  # tabs\tand  spaces  ",
        "Ünïcode: 日本語, emoji 😀, ascii ~`^",
        '<tool_call>\n{"name": "calculate", "arguments": {"expression": "1+2"}}\n</tool_call>',
    ],
)
def test_tokenizer_round_trips(tok, text):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text


def test_tokens_special_and_not(tok):
    enc = tok("<|im_start|>user\n1+2<|im_end|><tool_call>x</tool_call>", add_special_tokens=False)[
        "input_ids"
    ]
    for t in ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"):
        assert tok.convert_tokens_to_ids(t) in enc  # each one token, never split into bytes
    assert len(tok("3+4", add_special_tokens=False)["input_ids"]) == 3  # digits one by one, as in Qwen
    # skip_special_tokens (what vLLM does) drops the ChatML markers but keeps the tool-call tags
    assert tok.decode(enc, skip_special_tokens=True) == "user\n1+2<tool_call>x</tool_call>"


def test_chat_template_tools_and_calls(tok):
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "37*8+5="},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": {"expression": "37*8+5"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "301"},
        {"role": "assistant", "content": "301"},
    ]
    text = tok.apply_chat_template(msgs, tools=TOOLS, tokenize=False)
    system, rest = text.split("<|im_end|>\n", 1)
    assert system.startswith("<|im_start|>system\nBe brief.\n\n")
    assert "<tools>\n" + json.dumps(TOOLS[0], ensure_ascii=False) + "\n</tools>" in system
    assert rest == (
        "<|im_start|>user\n37*8+5=<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "37*8+5"}}\n'
        "</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n301\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n301<|im_end|>\n"
    )
    # the system message appears once, inside the tools block
    assert text.count("Be brief.") == 1


def test_chat_template_plain_and_generation_prompt(tok):
    msgs = [{"role": "user", "content": "12+7="}]
    assert tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>user\n12+7=<|im_end|>\n<|im_start|>assistant\n"
    )
    sys_msgs = [{"role": "system", "content": "S"}, *msgs]
    assert tok.apply_chat_template(sys_msgs, tokenize=False).startswith("<|im_start|>system\nS<|im_end|>\n")
    assert "<tools>" not in tok.apply_chat_template(sys_msgs, tokenize=False)


def test_two_tool_calls_and_tool_results_share_a_user_turn(tok):
    calls = [
        {"type": "function", "function": {"name": "calculate", "arguments": '{"expression": "1+1"}'}},
        {"type": "function", "function": {"name": "calculate", "arguments": {"expression": "2*3"}}},
    ]
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": calls},
        {"role": "tool", "content": "2"},
        {"role": "tool", "content": "6"},
    ]
    text = tok.apply_chat_template(msgs, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert (
        "<|im_start|>assistant\nLet me check.\n<tool_call>\n"
        '{"name": "calculate", "arguments": {"expression": "1+1"}}\n</tool_call>\n<tool_call>\n'
        '{"name": "calculate", "arguments": {"expression": "2*3"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n2\n</tool_response>\n<tool_response>\n6\n</tool_response>"
        "<|im_end|>\n<|im_start|>assistant\n"
    ) in text


@pytest.mark.slow
def test_same_seed_same_bytes_other_seed_other_weights(qwen_model, tmp_path):
    again = make_qwen2_fixture(tmp_path / "again", size="tiny", seed=0)
    for p in qwen_model.iterdir():
        assert (again / p.name).read_bytes() == p.read_bytes(), p.name
    other = make_qwen2_fixture(tmp_path / "other", size="tiny", seed=1)
    assert (other / "model.safetensors").read_bytes() != (qwen_model / "model.safetensors").read_bytes()
    assert (other / "tokenizer.json").read_bytes() == (qwen_model / "tokenizer.json").read_bytes()


def test_bad_sizes(tmp_path):
    with pytest.raises(ConfigError, match="head size"):
        make_qwen2_fixture(tmp_path, size={"hidden": 96, "heads": 2})  # head_dim 48
    with pytest.raises(ConfigError, match="kv_heads"):
        make_qwen2_fixture(tmp_path, size={"kv_heads": 3})
    with pytest.raises(ConfigError, match="size must be"):
        make_qwen2_fixture(tmp_path, size="huge")
    assert set(SIZES) == {"tiny", "small", "bench"}
