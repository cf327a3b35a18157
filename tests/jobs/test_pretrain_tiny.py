"""The tiny-model pre-training job: tokenizer, chat template, loss mask, batches, a short real run,
and the bundled model's shape (context, tool tokens, size)."""

from __future__ import annotations

import json

import pytest

from rldata.engine.core import default_model_path
from rldata.jobs import pretrain_tiny as pt

CALL = "<s><tools>37*8+5=<calc>37*8+5</calc></s><tool>301</tool>301</s>"


def test_tokenizer_is_one_token_per_char_and_decodes_without_spaces():
    tok = pt.build_char_tokenizer()
    ids = tok.encode("(12+7)*3=").ids
    assert ids[0] == pt.BOS_ID and len(ids) == 1 + len("(12+7)*3=")
    assert pt.UNK_ID not in ids
    assert tok.decode(ids) == "(12+7)*3="  # no "1 2 + 7"
    assert tok.decode(tok.encode("57").ids[1:] + [pt.EOS_ID]) == "57"
    assert tok.decode(tok.encode(" 1 ").ids[1:]) == " 1 "  # a real space survives
    assert tok.encode("x").ids[1] == pt.UNK_ID
    assert (
        tok.get_vocab_size()
        == len(pt.SPECIALS) + len(pt.CHARS) + len(pt.TOOL_TOKENS)
        == pt.vocab_size()
        == 26
    )
    assert [tok.token_to_id(c) for c in pt.CHARS] == list(range(4, 21))  # the char ids of the first model


def test_tool_tokens_are_single_non_special_tokens_that_survive_decoding():
    tok = pt.build_char_tokenizer()
    assert [tok.token_to_id(t) for t in pt.TOOL_TOKENS] == [21, 22, 23, 24, 25]
    assert (pt.TOOLS_ID, pt.CALC_ID, pt.CALC_END_ID, pt.TOOL_ID, pt.TOOL_END_ID) == (21, 22, 23, 24, 25)
    for t in pt.TOOL_TOKENS:
        assert tok.encode(t, add_special_tokens=False).ids == [tok.token_to_id(t)]
    # longest match: <tools> is one token, not <tool> + "s>" (and "s", ">" are not in the vocabulary)
    assert tok.encode("<tools><tool>", add_special_tokens=False).ids == [21, 24]
    ids = tok.encode(CALL, add_special_tokens=False).ids
    assert pt.UNK_ID not in ids and ids.count(pt.EOS_ID) == 2
    # skip_special_tokens drops <s> and </s> only: the tool tokens are what the environment reads
    assert tok.decode(ids, skip_special_tokens=True) == "<tools>37*8+5=<calc>37*8+5</calc><tool>301</tool>301"
    assert tok.decode(ids, skip_special_tokens=False) == CALL


def test_chat_template_renders_the_three_formats_byte_exactly():
    tok = pt.build_tokenizer()
    expected = {"plain": "<s>12+7=19</s>", "direct": "<s><tools>12+7=19</s>"}
    for kind, text in expected.items():
        assert tok.apply_chat_template(pt.conversation("12+7=", "19", kind), tokenize=False) == text
    call = pt.conversation("37*8+5=", "301", "call")
    assert [m["role"] for m in call] == ["system", "user", "assistant", "tool", "assistant"]
    assert tok.apply_chat_template(call, tokenize=False) == CALL
    assert tok.apply_chat_template(call, tokenize=False, add_generation_prompt=True) == CALL  # adds nothing
    # the same text from a user message that carries <tools> itself
    msgs = [{"role": "user", "content": "<tools>37*8+5="}, *call[2:]]
    assert tok.apply_chat_template(msgs, tokenize=False) == CALL
    with pytest.raises(Exception, match="unknown role"):
        tok.apply_chat_template([{"role": "robot", "content": "1"}], tokenize=False)


def test_loss_mask_covers_exactly_the_assistant_turns():
    ids, labels = pt.encode_conversation(pt.conversation("37*8+5=", "301", "call"))
    c = {ch: 4 + i for i, ch in enumerate(pt.CHARS)}
    expr = [c[x] for x in "37*8+5"]
    three01 = [c["3"], c["0"], c["1"]]
    prompt = [pt.BOS_ID, pt.TOOLS_ID, *expr, c["="]]
    turn1 = [pt.CALC_ID, *expr, pt.CALC_END_ID, pt.EOS_ID]
    tool = [pt.TOOL_ID, *three01, pt.TOOL_END_ID]
    turn2 = [*three01, pt.EOS_ID]
    assert ids == prompt + turn1 + tool + turn2
    assert labels == [-100] * len(prompt) + turn1 + [-100] * len(tool) + turn2
    ids, labels = pt.encode_conversation(pt.conversation("12+7=", "19", "plain"))
    assert ids == [pt.BOS_ID, c["1"], c["2"], c["+"], c["7"], c["="], c["1"], c["9"], pt.EOS_ID]
    assert labels == [-100] * 6 + [c["1"], c["9"], pt.EOS_ID]
    ids, labels = pt.encode_conversation(pt.conversation("12+7=", "19", "direct"))
    assert ids[:2] == [pt.BOS_ID, pt.TOOLS_ID] and labels == [-100] * 7 + [c["1"], c["9"], pt.EOS_ID]


def test_encoded_ids_are_the_tokenizers_encoding_of_the_template():
    tok = pt.build_tokenizer()
    for kind in pt.KINDS:
        msgs = pt.conversation("(1+2)*3=", "9", kind)
        text = tok.apply_chat_template(msgs, tokenize=False)
        assert tok(text, add_special_tokens=False).input_ids == pt.encode_conversation(msgs)[0]
    with pytest.raises(ValueError, match="unknown conversation kind"):
        pt.conversation("1+1=", "2", "chat")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        pt.encode_conversation([{"role": "user", "content": "1/2="}])


def test_encode_batch_pads_right_with_no_loss_on_padding():
    ex = [
        pt.encode_conversation(pt.conversation("1+2=", "3", "plain")),
        pt.encode_conversation(pt.conversation("10*10=", "100", "call")),
    ]
    ids, mask, lab = pt.encode_batch(ex)
    assert ids.shape == lab.shape == mask.shape == (2, len(ex[1][0]))
    assert [t for t in lab[0].tolist() if t != -100] == [7, pt.EOS_ID]  # "3" then </s>
    assert mask[0].sum() == 1 + 4 + 2 and ids[0, 7:].eq(pt.PAD_ID).all() and lab[0, 7:].eq(-100).all()
    assert int(lab[1].ne(-100).sum()) == (1 + 5 + 1 + 1) + (3 + 1)  # <calc>10*10</calc></s> and 100</s>


def test_grouped_batch_loss_equals_one_padded_batch():
    import torch

    model = pt.build_model(
        pt.TinyConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2),
        seed=0,
    )
    stream = pt.example_stream(pt.TrainConfig(), exclude=set())
    ex = [next(stream) for _ in range(20)]
    ids, mask, lab = pt.encode_batch(ex)
    with torch.no_grad():
        whole = model(input_ids=ids, attention_mask=mask, labels=lab).loss
        grouped = pt._batch_loss(model, ex)
    assert float(grouped) == pytest.approx(float(whole), rel=1e-5)


def test_example_stream_mixes_the_kinds_by_the_shares_and_skips_excluded_prompts():
    def kinds(cfg, n=4000):
        stream = pt.example_stream(cfg, exclude={"1+1=", "2*3="})
        out = []
        for _ in range(n):
            ids, _labels = next(stream)
            out.append("call" if pt.CALC_ID in ids else "direct" if ids[1] == pt.TOOLS_ID else "plain")
            text = "".join(pt.CHARS[i - 4] for i in ids[1 if out[-1] == "plain" else 2 :] if 4 <= i < 21)
            assert not text.startswith(("1+1=", "2*3="))
        return out

    k = kinds(pt.TrainConfig(level_weights={1: 1.0}))
    share = {x: k.count(x) / len(k) for x in pt.KINDS}
    assert share["plain"] == pytest.approx(0.5, abs=0.03)
    assert share["call"] / (share["call"] + share["direct"]) == pytest.approx(0.3, abs=0.03)
    assert set(kinds(pt.TrainConfig(tool_share=0.0), 500)) == {"plain", "direct"}
    assert set(kinds(pt.TrainConfig(plain_share=0.0, tool_share=1.0), 500)) == {"call"}
    with pytest.raises(ValueError, match="tool_share"):
        pt.TrainConfig(tool_share=1.5)


def test_problem_stream_skips_excluded_prompts():
    stream = pt.problem_stream({1: 1.0}, seed=0, exclude={"1+1=", "2*3="})
    pairs = [next(stream) for _ in range(2000)]
    assert all(p not in {"1+1=", "2*3="} for p, _ in pairs)
    assert all(str(eval(p[:-1])) == a for p, a in pairs)
    assert len({p for p, _ in pairs}) > 200  # level 1 has 255 prompts, two of them excluded


def test_bundled_model_has_256_positions_the_tool_tokens_and_the_template():
    from transformers import AutoConfig, AutoTokenizer

    path = default_model_path()
    names = {p.name for p in path.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
        "training.json",
        "README.md",
    } <= names
    assert sum(p.stat().st_size for p in path.iterdir()) <= 20 * 1024 * 1024
    cfg = AutoConfig.from_pretrained(path)
    assert cfg.max_position_embeddings == 256 and cfg.vocab_size == 26
    tok_cfg = json.loads((path / "tokenizer_config.json").read_text())
    assert tok_cfg["chat_template"] == pt.CHAT_TEMPLATE and tok_cfg["model_max_length"] == 256
    meta = json.loads((path / "training.json").read_text())
    assert 0 < meta["train"]["tool_share"] < 0.5 and meta["model"]["max_position_embeddings"] == 256
    tok = AutoTokenizer.from_pretrained(path)
    assert tok.model_max_length == 256
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id) == (1, 2, 0, 3)
    assert [tok.convert_tokens_to_ids(t) for t in pt.TOOL_TOKENS] == [21, 22, 23, 24, 25]
    assert set(tok.all_special_ids) == {0, 1, 2, 3}
    ids = tok(CALL, add_special_tokens=False).input_ids
    assert ids == pt.encode_conversation(pt.conversation("37*8+5=", "301", "call"))[0]
    assert tok.decode(ids, skip_special_tokens=True) == "<tools>37*8+5=<calc>37*8+5</calc><tool>301</tool>301"
    assert tok.apply_chat_template(pt.conversation("37*8+5=", "301", "call"), tokenize=False) == CALL


@pytest.mark.slow
def test_short_training_run_lowers_loss_and_saves_a_loadable_model(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "m"
    model_cfg = pt.TinyConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2
    )
    train_cfg = pt.TrainConfig(
        steps=40, batch_size=32, lr=3e-3, warmup=5, level_weights={1: 1.0}, threads=1, tool_share=0.25
    )
    losses = pt.train(out, model_cfg=model_cfg, train_cfg=train_cfg, exclude=set(), log_every=0)
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5

    names = {p.name for p in out.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
        "training.json",
    } <= names
    assert "chat_template.jinja" not in names  # the template is in tokenizer_config.json
    meta = json.loads((out / "training.json").read_text())
    assert meta["train"]["steps"] == 40 and meta["train"]["tool_share"] == 0.25
    tok = AutoTokenizer.from_pretrained(out)
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (pt.BOS_ID, pt.EOS_ID, pt.PAD_ID)
    assert tok("12+7=").input_ids == pt.build_char_tokenizer().encode("12+7=").ids
    assert tok.decode(tok("(1+2)*3=").input_ids, skip_special_tokens=True) == "(1+2)*3="
    assert tok.apply_chat_template(pt.conversation("37*8+5=", "301", "call"), tokenize=False) == CALL
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.num_hidden_layers == 2 and model.config.eos_token_id == pt.EOS_ID
    assert model.config.max_position_embeddings == 256
    enc = tok(["3+4="], return_tensors="pt")
    with torch.no_grad():
        gen = model.generate(**enc, max_new_tokens=4, do_sample=False)
    assert gen.shape[1] > enc.input_ids.shape[1]
    assert " " not in tok.decode(gen[0, enc.input_ids.shape[1] :], skip_special_tokens=True)


@pytest.mark.slow
def test_training_is_byte_reproducible(tmp_path):
    import hashlib

    model_cfg = pt.TinyConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2
    )
    train_cfg = pt.TrainConfig(steps=12, batch_size=16, warmup=2, threads=1)
    digests = []
    for name in ("a", "b"):
        pt.train(tmp_path / name, model_cfg=model_cfg, train_cfg=train_cfg, exclude=set(), log_every=0)
        digests.append(hashlib.sha256((tmp_path / name / "model.safetensors").read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    other = pt.TrainConfig(steps=12, batch_size=16, warmup=2, threads=1, tool_share=0.9)
    pt.train(tmp_path / "c", model_cfg=model_cfg, train_cfg=other, exclude=set(), log_every=0)
    assert hashlib.sha256((tmp_path / "c" / "model.safetensors").read_bytes()).hexdigest() != digests[0]
