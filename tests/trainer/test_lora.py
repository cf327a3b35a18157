"""LoRA learners (peft): only the adapters train, engines and checkpoints get the merged model, a
checkpoint holds the adapter, and a resumed LoRA run continues the uninterrupted one."""

from __future__ import annotations

import copy

import pytest
import torch
from trainer_helpers import bf16_copy, build_tiny_qwen2, make_rollouts

from rldata.cli import main
from rldata.trainer.checkpoint import ADAPTER_DIR, load_model, save_trainer_state
from rldata.trainer.config import TrainConfig
from rldata.trainer.learner import Learner, combine_stats
from rldata.trainer.policy import collate

LORA = {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj", "down_proj"]}


def _cfg(**kw):
    return TrainConfig(**{"prompts_per_step": 4, "n": 4, "micro_batch": 8, "lr": 1e-2, "lora": LORA, **kw})


def _batches():
    out = []
    for seed in (40, 41, 42):
        p, c, o, a = make_rollouts(seed, rows=16)
        out.append(collate(p, c, advantages=a, old_logps=o))
    return out


def _named(model, lora: bool):
    return {k: v.detach().clone() for k, v in model.state_dict().items() if ("lora_" in k) == lora}


def test_only_adapters_train_and_hold_optimizer_state(tiny_model_dir):
    lrn = Learner(tiny_model_dir, _cfg())
    base0, lora0 = _named(lrn.model, False), _named(lrn.model, True)
    assert len(lora0) == 2 * 3 * 2  # A and B for 3 module kinds in 2 layers
    for b in _batches()[:2]:
        lrn.step(b)
    base1, lora1 = _named(lrn.model, False), _named(lrn.model, True)
    assert base0.keys() == base1.keys() and all(
        torch.equal(base0[k], base1[k]) for k in base0
    )  # byte for byte
    assert any(not torch.equal(lora0[k], lora1[k]) for k in lora0)
    trained = {id(p) for g in lrn.optimizer.param_groups for p in g["params"]}
    names = {n for n, p in lrn.model.named_parameters() if id(p) in trained}
    assert names and all("lora_" in n for n in names)
    assert len(lrn.optimizer.state) == len(names)  # AdamW moments for the adapters only


def test_engines_get_the_merged_model(tiny_model_dir):
    lrn = Learner(tiny_model_dir, _cfg())
    lrn.step(_batches()[0])
    got = dict(lrn.get_weights())
    merged = copy.deepcopy(lrn.model).merge_and_unload().state_dict()  # peft's own merge
    assert got.keys() == merged.keys()
    assert all(torch.allclose(got[k], merged[k], rtol=0, atol=1e-6) for k in got)
    base = load_model(tiny_model_dir).state_dict()
    assert not torch.equal(
        got["model.layers.0.self_attn.q_proj.weight"], base["model.layers.0.self_attn.q_proj.weight"]
    )
    assert torch.equal(
        got["model.layers.0.self_attn.k_proj.weight"], base["model.layers.0.self_attn.k_proj.weight"]
    )
    flat = lrn.flat_weights()
    assert [n for n, _ in flat] == list(got) and all(torch.equal(t, got[n]) for n, t in flat)


@pytest.mark.slow
def test_checkpoint_holds_the_adapter_and_resume_continues(tiny_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    batches = _batches()
    full = Learner(tiny_model_dir, _cfg())
    losses = [combine_stats([full.step(b)])["loss"] for b in batches]

    first = Learner(tiny_model_dir, _cfg())
    for b in batches[:2]:
        first.step(b)
    ckpt = tmp_path / "runs" / "r1" / "checkpoints" / "step-000002"
    first.save(ckpt)
    save_trainer_state(ckpt, step=2, policy_version=2)
    merged_now = dict(first.get_weights())
    # The checkpoint root is the merged HF model; adapter/ is the adapter in peft's format.
    hf = AutoModelForCausalLM.from_pretrained(ckpt).state_dict()
    assert all(torch.allclose(hf[k], merged_now[k], rtol=0, atol=1e-6) for k in merged_now)
    peft = (
        PeftModel.from_pretrained(load_model(tiny_model_dir), ckpt / ADAPTER_DIR)
        .merge_and_unload()
        .state_dict()
    )
    assert all(torch.allclose(peft[k], merged_now[k], rtol=0, atol=1e-6) for k in merged_now)

    resumed = Learner(ckpt, _cfg(), ref_path=tiny_model_dir, resume=True)
    loss3 = combine_stats([resumed.step(batches[2])])["loss"]
    assert loss3 == pytest.approx(losses[2], rel=1e-6)
    after = dict(resumed.get_weights())
    assert all(torch.allclose(after[k], t, rtol=0, atol=1e-7) for k, t in full.get_weights())

    # rldata export-model: the merged HF model, or the adapter alone; nothing of the training state.
    out = tmp_path / "export"
    assert (
        main(["export-model", "r1", "--merged", "--out", str(out), "--runs-dir", str(tmp_path / "runs")]) == 0
    )
    assert {"optimizer.pt", "trainer_state.json", "dcp", "adapter"}.isdisjoint(p.name for p in out.iterdir())
    exported = AutoModelForCausalLM.from_pretrained(out).state_dict()
    assert all(torch.allclose(exported[k], merged_now[k], rtol=0, atol=1e-6) for k in merged_now)
    adapter = tmp_path / "adapter-only"
    assert main(["export-model", "r1", "--out", str(adapter), "--runs-dir", str(tmp_path / "runs")]) == 0
    again = PeftModel.from_pretrained(load_model(tiny_model_dir), adapter).merge_and_unload().state_dict()
    assert all(torch.allclose(again[k], merged_now[k], rtol=0, atol=1e-6) for k in merged_now)


def test_export_model_errors_are_one_line(capsys, tmp_path):
    code = main(
        ["export-model", "nope", "--merged", "--out", str(tmp_path / "o"), "--runs-dir", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert code == 1 and "nope" in err and "no checkpoint" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("arch", ["llama", "qwen2"])  # qwen2: q/k/v biases, the embedding tied to the head
def test_bf16_lora_keeps_a_bf16_base_in_bf16_and_trains_as_the_fp32_copy(
    arch, tiny_model_dir, tmp_path, monkeypatch
):
    import rldata.trainer.learner as learner_mod

    src = tiny_model_dir if arch == "llama" else build_tiny_qwen2(tmp_path / "qwen2")
    model = bf16_copy(src, tmp_path / "bf16")
    stored = load_model(model, dtype=torch.bfloat16).state_dict()
    batches = _batches()
    cfg = _cfg(mixed_precision="bf16")
    held = Learner(model, cfg)
    assert {p.dtype for p in held.model.parameters() if not p.requires_grad} == {torch.bfloat16}
    assert {p.dtype for p in held.model.parameters() if p.requires_grad} == {torch.float32}
    base = {
        k.removeprefix("base_model.model.").replace(".base_layer.", "."): v
        for k, v in _named(held.model, False).items()
    }
    assert all(torch.equal(base[k], stored[k]) for k in stored)  # the checkpoint's own values
    # The same run with the base upcast to fp32 (what an fp32 checkpoint gets, and the old path):
    # bf16 autocast reads the same bf16 values, so the steps and the weights out agree.
    with monkeypatch.context() as m:
        m.setattr(learner_mod, "frozen_dtype", lambda *_: torch.float32)
        upcast = Learner(model, cfg)
    assert {p.dtype for p in upcast.model.parameters()} == {torch.float32}
    # peft draws lora_A in the base layer's dtype (then casts it to fp32): start both from one draw
    upcast.model.load_state_dict(_named(held.model, True), strict=False)
    for b in batches:
        a, u = combine_stats([held.step(b)]), combine_stats([upcast.step(b)])
        assert a["loss"] == pytest.approx(u["loss"], rel=1e-6, abs=1e-9)
        assert a["logp_mean"] == pytest.approx(u["logp_mean"], rel=1e-6)
    got, want = dict(held.get_weights()), dict(upcast.get_weights())
    assert got.keys() == want.keys() and {t.dtype for t in got.values()} == {torch.float32}
    assert all(torch.allclose(got[k], want[k], rtol=0, atol=1e-6) for k in want)
    # the merged update is kept in fp32, not rounded away into the bf16 base
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(got[q], stored[q].float())
    held.save_hf(tmp_path / "out")
    import json

    assert json.loads((tmp_path / "out" / "config.json").read_text())["dtype"] == "float32"


def test_an_fp32_checkpoint_keeps_an_fp32_base_under_bf16(tiny_model_dir):
    lrn = Learner(tiny_model_dir, _cfg(mixed_precision="bf16"))
    assert {p.dtype for p in lrn.model.parameters()} == {torch.float32}  # rounding it would change the model
