"""Plain tasks through the model's chat template (issue 43 §0): which models template them (auto),
the ids a templated task gets, and the params hash that keeps templated and raw pass rates apart."""

from __future__ import annotations

import pytest

from rldata.configs.sampling import EngineConfig, SampleConfig, SamplingSpec, params_hash_of
from rldata.engine.core import chat_model_path, default_model_path
from rldata.errors import ConfigError
from rldata.rollout import Renderer, plain_messages, renderer_for, resolve_chat_template

SYSTEM_TASK = {
    "prompt": "37*8+5=",
    "messages": [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "37*8+5="},
    ],
}


@pytest.fixture(scope="module")
def qwen(qwen_model):
    return renderer_for(qwen_model)


def test_raw_is_the_hash_every_earlier_release_stored():
    """A spec that samples raw (off, or auto not yet resolved) keys the ledger as before the field
    existed: the hash of its params without chat_template, as rldata.store.rehash recomputes it from
    a stored row's JSON.  on is another slice; the field never reaches vLLM."""
    old = SamplingSpec(n=8, temperature=0.7, max_tokens=12).to_dict()
    del old["chat_template"]  # a row stored before the field existed
    for mode in ("auto", "off"):
        spec = SamplingSpec(n=8, temperature=0.7, max_tokens=12, chat_template=mode)
        assert spec.params_hash == params_hash_of(old)
    on = SamplingSpec(n=8, temperature=0.7, max_tokens=12, chat_template="on")
    assert on.params_hash != params_hash_of(old)
    assert on.params_hash == params_hash_of(on.to_dict())  # a stored templated row rehashes to itself
    assert "chat_template" not in on.vllm_kwargs()
    with pytest.raises(ConfigError, match="chat_template"):
        SamplingSpec(chat_template="yes")


def test_auto_templates_a_chat_model_and_keeps_tiny_arith_raw(qwen):
    """tiny-arith's template renders a user turn as its bare text (bos + prompt: the raw ids), so auto
    keeps it raw and its stored pass rates keep their key; ChatML models (the Qwen2 fixture,
    tiny-arith-chat) change the prompt, so auto sends their plain tasks through the template."""
    tiny = renderer_for(default_model_path())
    assert tiny.own_template and not tiny.templates_plain
    assert qwen.templates_plain and renderer_for(chat_model_path()).templates_plain
    spec = SamplingSpec(n=4)
    assert resolve_chat_template(spec, tiny).chat_template == "off"
    assert resolve_chat_template(spec, qwen).chat_template == "on"
    assert resolve_chat_template(SamplingSpec(chat_template="off"), qwen).chat_template == "off"
    assert resolve_chat_template(SamplingSpec(chat_template="on"), tiny).chat_template == "on"
    assert resolve_chat_template(spec, default_model_path()).chat_template == "off"  # a directory works too


def test_auto_on_a_raw_model_reads_its_template_without_transformers(qwen_model, tmp_path):
    """A job on a model whose template keeps prompts (tiny-arith) resolves auto from the template file
    alone: no tokenizer load, no transformers import in the driver (seconds on a busy machine).  A
    template that changes the prompt, or one that cannot be read that way, goes to the tokenizer."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from rldata.configs.sampling import SamplingSpec\n"
        "from rldata.engine.core import default_model_path\n"
        "from rldata.rollout.render import resolve_chat_template\n"
        "assert resolve_chat_template(SamplingSpec(), default_model_path()).chat_template == 'off'\n"
        "assert 'transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    from rldata.rollout.render import _keeps_prompts

    assert _keeps_prompts(default_model_path()) is True
    assert _keeps_prompts(qwen_model) is None  # ChatML: the tokenizer decides (on)
    assert resolve_chat_template(SamplingSpec(), qwen_model).chat_template == "on"
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "tokenizer_config.json").write_text('{"bos_token": "<s>"}')
    assert _keeps_prompts(bare) is True  # no template: raw
    (bare / "chat_template.jinja").write_text("{% for m in messages %}[{{ m['content'] }}]{% endfor %}")
    assert _keeps_prompts(bare) is None


def test_a_templated_plain_task_is_apply_chat_template(qwen):
    """The ids equal transformers' apply_chat_template with the generation prompt, which is what TRL's
    GRPOTrainer and veRL's agent loop tokenize for a conversational prompt; a task's own chat messages
    (a system turn) are rendered whole."""
    tok = qwen.tokenizer
    plain = {"prompt": "15*6=", "messages": None}
    want = tok.apply_chat_template(
        [{"role": "user", "content": "15*6="}], add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    assert qwen.plain(plain) == list(want)
    assert len(want) > len(tok("15*6=")["input_ids"]) == 5  # the issue's `15*6=` with prompt_tokens 5
    text = tok.decode(qwen.plain(plain))
    assert text.startswith("<|im_start|>user\n15*6=<|im_end|>") and text.endswith("<|im_start|>assistant\n")
    both = tok.apply_chat_template(
        SYSTEM_TASK["messages"], add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    assert qwen.plain(SYSTEM_TASK) == list(both)
    assert plain_messages({"prompt": "x", "messages": []}) == [{"role": "user", "content": "x"}]


def test_on_without_a_template_uses_the_default_one(tmp_path):
    """A base model without a chat template and chat_template on: DEFAULT_TEMPLATE (bos, the text)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    tok.chat_template = None
    r = Renderer(tok)
    assert not r.own_template and not r.templates_plain
    assert r.plain({"prompt": "3+4=", "messages": None}) == tok("3+4=")["input_ids"]


def test_one_field_reaches_sample_train_rollouts_and_eval():
    """chat_template is declared once (SamplingSpec): `rldata sample`, a train run's rollouts and its
    evaluations take it by the same name; it shapes the prompt, not the distribution, so the on-policy
    rule lets a train run set it; the evaluation follows the rollout unless it sets its own."""
    from rldata.configs.fields import load
    from rldata.trainer.config import TrainCommand
    from rldata.trainer.evaluate import eval_job

    assert load(SampleConfig, {"chat_template": "off"}).sampling.chat_template == "off"
    train = load(TrainCommand, {"chat_template": "on", "eval": {"heldout": True}}).train
    assert train.rollout.chat_template == "on" and train.eval_spec().chat_template == "on"
    assert eval_job(train, "some/checkpoint", ["t1"]).sampling.chat_template == "on"
    own = load(TrainCommand, {"chat_template": "on", "eval": {"chat_template": "off"}}).train
    assert own.eval_spec().chat_template == "off" and own.eval_spec().n == 16
    with pytest.raises(ConfigError, match="chat_template"):
        load(TrainCommand, {"chat_template": "yes"})


def test_a_train_run_resolves_auto_for_its_base_model(store, qwen_model, tmp_path):
    """plan_run resolves the rollout's auto before anything is keyed: the Qwen2 fixture's plain tasks go
    through its template (its rollouts, ledger rows and live prior are the templated slice); tiny-arith
    stays raw and keeps the hash its stored rows have."""
    from rldata.ingest import ingest
    from rldata.trainer.config import TrainConfig, TrainRun
    from rldata.trainer.state import plan_run

    f = tmp_path / "tasks.jsonl"
    f.write_text('{"prompt": "15*6=", "answer": "90", "domain": "math"}\n')
    ingest(store, f)
    out = str(tmp_path / "runs")
    cfg, _ = plan_run(store, TrainConfig(model=str(qwen_model), output_dir=out, steps=1), TrainRun())
    assert cfg.rollout.chat_template == "on"
    assert cfg.rollout.params_hash == SamplingSpec(n=8, chat_template="on").params_hash
    assert cfg.eval_spec().chat_template == "on"
    cfg, _ = plan_run(store, TrainConfig(output_dir=out, steps=1), TrainRun())  # tiny-arith
    assert cfg.rollout.chat_template == "off" and cfg.rollout.params_hash == SamplingSpec(n=8).params_hash


# ---- on the real engine: rldata sample with the Qwen2 fixture ---------------------------------------
@pytest.fixture(scope="module")
def qwen_engines(ray_session, qwen_model):
    import ray

    from rldata.engine.actors import start_engines

    eng = start_engines(1, str(qwen_model), engine_kwargs={"max_model_len": 512})
    yield eng
    for e in eng:
        ray.kill(e)


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
def test_sample_templates_plain_tasks_and_keys_them_apart(tmp_path, store, qwen_model, qwen, qwen_engines):
    import json

    from rldata.ingest import ingest
    from rldata.jobs.sample import run_sample
    from rldata.rollout import generate

    f = tmp_path / "tasks.jsonl"
    f.write_text(
        json.dumps({"prompt": "15*6=", "messages": None, "answer": "90", "domain": "math"})
        + "\n"
        + json.dumps({**SYSTEM_TASK, "answer": "301", "domain": "math"})
        + "\n"
    )
    ingest(store, f)
    tasks = store.sql("SELECT task_id, prompt, messages FROM tasks ORDER BY prompt").pl().to_dicts()
    tok = qwen.tokenizer
    want = {t["task_id"]: qwen.plain(t) for t in tasks}
    assert want[tasks[0]["task_id"]] == list(
        tok.apply_chat_template(
            [{"role": "user", "content": "15*6="}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
        )["input_ids"]
    )

    def job(mode):
        spec = SamplingSpec(n=2, max_tokens=4, chat_template=mode)
        return SampleConfig(sampling=spec, engine=EngineConfig(model=str(qwen_model), max_model_len=512))

    auto = run_sample(store, job("auto"), engines=qwen_engines)
    assert auto.chat_template == "on" and auto.samples == 4
    off = run_sample(store, job("off"), engines=qwen_engines)
    assert off.chat_template == "off" and off.samples == 4
    assert auto.params_hash == SamplingSpec(n=2, max_tokens=4, chat_template="on").params_hash
    assert off.params_hash == SamplingSpec(n=2, max_tokens=4).params_hash != auto.params_hash
    rows = store.sql(
        "SELECT params_hash, task_id, min(prompt_tokens), max(prompt_tokens), any_value(sampling_params) "
        "FROM trajectories GROUP BY 1, 2"
    ).fetchall()
    for ph, task_id, lo, hi, params in rows:
        assert lo == hi
        prompt = next(t["prompt"] for t in tasks if t["task_id"] == task_id)
        if ph == auto.params_hash:  # the engine saw exactly apply_chat_template's ids
            assert lo == len(want[task_id]) and json.loads(params)["chat_template"] == "on"
        else:  # raw: the prompt text as the engine tokenizes it (15*6= is 5 tokens)
            assert lo == len(tok(prompt)["input_ids"]) and json.loads(params)["chat_template"] == "off"
    # two ledger slices for the same model, never one pooled row
    keys = store.sql("SELECT DISTINCT params_hash FROM passrates").fetchall()
    assert sorted(k for (k,) in keys) == sorted([auto.params_hash, off.params_hash])
    assert store.read("passrates").height == 4
    # again: nothing to do for either (the resolved spec keys what is stored)
    assert run_sample(store, job("auto"), engines=qwen_engines).noop
    assert run_sample(store, job("on"), engines=qwen_engines).noop

    # the rollout path the trainer uses keeps the templated ids for the learner; off keeps none
    spec = SamplingSpec(n=2, max_tokens=4, chat_template="on")
    (g1, g2) = generate(qwen_engines, tasks, [1, 2], spec, renderer=qwen, max_model_len=512)
    assert [list(r.prompt_ids) for r in g1] == [want[tasks[0]["task_id"]]] * 2
    assert [r.prompt_tokens for r in g2] == [len(want[tasks[1]["task_id"]])] * 2
    (r1, _), _ = generate(
        qwen_engines, tasks, [1, 2], SamplingSpec(n=2, max_tokens=4, chat_template="off"), max_model_len=512
    )
    assert r1.prompt_ids is None and r1.prompt_tokens == 5
