"""The tiny-model pre-training job: tokenizer, batches, and a short real training run."""

from __future__ import annotations

import json

import pytest
from rldata.jobs import pretrain_tiny as pt


def test_tokenizer_is_one_token_per_char_and_decodes_without_spaces():
    tok = pt.build_char_tokenizer()
    ids = tok.encode("(12+7)*3=").ids
    assert ids[0] == pt.BOS_ID and len(ids) == 1 + len("(12+7)*3=")
    assert pt.UNK_ID not in ids
    assert tok.decode(ids) == "(12+7)*3="  # no "1 2 + 7"
    assert tok.decode(tok.encode("57").ids[1:] + [pt.EOS_ID]) == "57"
    assert tok.decode(tok.encode(" 1 ").ids[1:]) == " 1 "  # a real space survives
    assert tok.encode("x").ids[1] == pt.UNK_ID
    assert tok.get_vocab_size() == len(pt.SPECIALS) + len(pt.CHARS)


def test_encode_batch_puts_loss_on_answer_and_eos_only():
    ids, mask, lab = pt.encode_batch([("1+2=", "3"), ("10*10=", "100")])
    assert ids.shape == lab.shape == mask.shape == (2, 1 + 6 + 3 + 1)
    first = [t for t in lab[0].tolist() if t != -100]
    assert len(first) == 2 and first[-1] == pt.EOS_ID  # "3" then </s>
    assert [t for t in lab[1].tolist() if t != -100][-1] == pt.EOS_ID
    assert mask[0].sum() == 1 + 4 + 2 and ids[0, 7:].eq(pt.PAD_ID).all()


def test_problem_stream_skips_excluded_prompts():
    stream = pt.problem_stream({1: 1.0}, seed=0, exclude={"1+1=", "2*3="})
    pairs = [next(stream) for _ in range(2000)]
    assert all(p not in {"1+1=", "2*3="} for p, _ in pairs)
    assert all(str(eval(p[:-1])) == a for p, a in pairs)
    assert len({p for p, _ in pairs}) > 200  # level 1 has 255 prompts, two of them excluded


@pytest.mark.slow
def test_short_training_run_lowers_loss_and_saves_a_loadable_model(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "m"
    model_cfg = pt.TinyConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
    train_cfg = pt.TrainConfig(steps=40, batch_size=32, lr=3e-3, warmup=5, level_weights={1: 1.0}, threads=1)
    losses = pt.train(out, model_cfg=model_cfg, train_cfg=train_cfg, exclude=set(), log_every=0)
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5

    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "generation_config.json", "training.json"} <= names
    assert json.loads((out / "training.json").read_text())["train"]["steps"] == 40
    tok = AutoTokenizer.from_pretrained(out)
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (pt.BOS_ID, pt.EOS_ID, pt.PAD_ID)
    assert tok("12+7=").input_ids == pt.build_char_tokenizer().encode("12+7=").ids
    assert tok.decode(tok("(1+2)*3=").input_ids, skip_special_tokens=True) == "(1+2)*3="
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.num_hidden_layers == 2 and model.config.eos_token_id == pt.EOS_ID
    enc = tok(["3+4="], return_tensors="pt")
    with torch.no_grad():
        gen = model.generate(**enc, max_new_tokens=4, do_sample=False)
    assert gen.shape[1] > enc.input_ids.shape[1]
    assert " " not in tok.decode(gen[0, enc.input_ids.shape[1]:], skip_special_tokens=True)
