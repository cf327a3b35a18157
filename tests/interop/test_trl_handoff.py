"""The TRL handoff trains (issue 43 §5): a selection sampled with a chat model through rldata, exported
for TRL, and one real GRPOTrainer step whose rewards come from rldata.interop.trl.reward_fn.

The rewards must be rldata's verdicts on TRL's own completions (checked against the verifier called
directly, completion by completion), with nonzero variance, and TRL must tokenize the exported prompt
exactly as rldata sampled it (the same chat template, the same ids)."""

from __future__ import annotations

import json

import pytest

from rldata import api, open_store
from rldata.engine.core import chat_model_path
from rldata.interop.trl import completion_text, reward_fn
from rldata.verify import for_domain
from rldata.verify.base import Verdict, all_passed


def test_reward_fn_reads_text_and_conversational_completions():
    r = reward_fn()
    msgs = [{"role": "user", "content": "12+7="}]
    got = r(
        prompts=[msgs, msgs, "3+4=", "3+4="],
        completions=[
            [{"role": "assistant", "content": "19"}],
            [{"role": "assistant", "content": "18"}],
            "7",
            "7 or 8",  # a hedge is wrong
        ],
        solution=["19", "19", "7", "7"],
        domain=["math"] * 4,
        trainer_state=None,
    )
    assert got == [1.0, 0.0, 1.0, 0.0]
    assert completion_text([{"role": "assistant", "content": "a"}, {"role": "tool", "content": "b"}]) == "a"
    with pytest.raises(Exception, match="answer"):
        r(prompts=["1+1="], completions=["2"], ground_truth=["2"])


def test_a_verifier_error_scores_as_wrong(monkeypatch):
    import importlib

    trl = importlib.import_module("rldata.interop.trl")  # the reward function's module, where it looks up
    monkeypatch.setattr(trl, "verify_many", lambda items, **kw: [[Verdict.failure("boom")] for _ in items])
    assert reward_fn()(prompts=["1+1="], completions=["2"], solution=["2"], domain=["math"]) == [0.0]


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
def test_grpo_trainer_step_on_an_export(tmp_path, ray_session):
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rldata.ingest import ingest, sample_path
    from rldata.rollout import renderer_for

    root = tmp_path / "store"
    lines = [x for x in sample_path("arith").read_text().splitlines() if '"level":1' in x][:24]
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    store = open_store(root)
    ingest(store, tmp_path / "t.jsonl")
    model = str(chat_model_path())
    s = api.sample(root, model=model, n=8, max_tokens=8, engines=1)
    assert s.chat_template == "on"  # a ChatML model: plain tasks through its template
    api.filter(root, band="0.1,0.9", name="band")
    out = tmp_path / "trl"
    m = api.export(root, out=out, format="trl", selection="band").manifest
    assert m["chat_template"] == "on" and m["options"]["prompt_style"] == "auto"
    ds = load_dataset(str(out))["train"]
    assert ds.num_rows >= 2 and isinstance(ds[0]["prompt"], list)

    # TRL renders the exported messages with the model's template: the ids rldata sampled
    tok = AutoTokenizer.from_pretrained(model)
    r = renderer_for(model)
    for row in ds:
        task = store.sql(
            "SELECT prompt, messages FROM tasks WHERE task_id = $1", params=[row["task_id"]]
        ).pl()
        trl_ids = tok.apply_chat_template(
            row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=True
        )
        assert list(trl_ids["input_ids"]) == r.plain(task.to_dicts()[0])

    seen: list = []
    verdicts: list = []
    inner = reward_fn(verdicts=verdicts)

    def reward(prompts, completions, **kw):
        out_ = inner(prompts, completions, **kw)
        seen.extend(zip(completions, kw["solution"], kw["domain"], out_))
        return out_

    reward.__name__ = inner.__name__
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        max_steps=1,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=8,
        learning_rate=1e-4,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        temperature=1.0,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=[reward], args=args, train_dataset=ds, processing_class=tok
    )
    trainer.train()
    assert len(seen) >= 8
    rewards = [x[3] for x in seen]
    # the rewards are rldata's verdicts on TRL's completions, checked one by one with the verifier itself
    for (completion, answer, domain, got), v in zip(seen, verdicts):
        direct = for_domain(domain).verify(completion_text(completion), {"answer": answer, "tests": None})
        assert got == (1.0 if all_passed(direct) else 0.0) == (1.0 if all_passed(v) else 0.0)
    assert 0.0 < sum(rewards) < len(rewards), rewards  # nonzero variance: GRPO has a signal
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert logged and abs(logged[0]["reward"] - sum(rewards) / len(rewards)) < 1e-6
    assert json.loads((out / "rldata-manifest.json").read_text())["chat_template"] == "on"
