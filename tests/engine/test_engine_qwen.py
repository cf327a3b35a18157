"""The engine on the Qwen2-architecture fixture, as it would run Qwen2.5: ChatML prompts with tools
rendered by the model's own template, log-probs that agree with transformers, weight reloads (q/k/v
biases, tied embeddings) on both paths, and generation stopping at every eos of generation_config."""

from __future__ import annotations

import pytest

from rldata.configs.sampling import SamplingSpec
from rldata.engine.core import Engine

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def engine(qwen_model):
    eng = Engine(qwen_model, seed=0, max_model_len=512)  # 32-token KV blocks: the CPU default
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def hf(qwen_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen_model)
    return tok, AutoModelForCausalLM.from_pretrained(qwen_model, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def prompts(hf):
    tok, _ = hf
    chats = [
        [{"role": "user", "content": "12+7="}],
        [{"role": "system", "content": "Answer with a number."}, {"role": "user", "content": "37*8+5="}],
    ]
    out = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    out.append(tok.apply_chat_template(chats[1], tools=TOOLS, tokenize=False, add_generation_prompt=True))
    return out


def _reference_logprobs(tok, model, prompt, sample, temperature):
    import torch

    ids = torch.tensor([tok(prompt, add_special_tokens=False).input_ids + list(sample.token_ids)])  # [1, P+C]
    with torch.no_grad():
        logits = model(ids).logits[0, sample.prompt_tokens - 1 : -1]  # [C, V]
    return torch.log_softmax(logits / temperature, dim=-1).gather(1, ids[0, sample.prompt_tokens :, None])[
        :, 0
    ]


def test_chatml_prompts_tokenize_and_score_as_in_transformers(engine, prompts, hf):
    tok, model = hf
    spec = SamplingSpec(n=3, temperature=0.7, max_tokens=12, seed=4)
    for prompt, group in zip(prompts, engine.generate(prompts, spec, logprobs=True)):
        # vLLM tokenized the rendered template exactly as transformers does: specials whole
        assert group[0].prompt_tokens == len(tok(prompt, add_special_tokens=False).input_ids)
        for s in group:
            assert s.logprobs == pytest.approx(
                _reference_logprobs(tok, model, prompt, s, 0.7).tolist(), abs=2e-3
            )
            assert s.text == tok.decode(list(s.token_ids), skip_special_tokens=True)
    assert "<tools>" in prompts[2] and prompts[2].count("<|im_start|>") == 3


def test_weight_reload_both_paths_agree_with_transformers(engine, prompts, hf):
    """Noise on every tensor (q/k/v and their biases differ): the direct path and vLLM's reload give
    the same samples bit for bit, and the log-probs are those of transformers with the same weights."""
    import torch

    from rldata.engine.weights import FlatWeights

    tok, model = hf
    original = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(3)
    noisy = {k: v + 0.5 * v.std() * torch.randn(v.shape, generator=g) for k, v in original.items()}
    if "lm_head.weight" in noisy:  # tied: one tensor in the model, so one noise
        noisy["lm_head.weight"] = noisy["model.embed_tokens.weight"]
    spec = SamplingSpec(n=2, temperature=1.0, max_tokens=8, seed=5)

    def run():
        return [
            [(s.token_ids, s.logprobs) for s in grp] for grp in engine.generate(prompts, spec, logprobs=True)
        ]

    base = run()
    assert engine.reload_weights(noisy.items(), direct=False) == "reload_weights"
    by_vllm = run()
    assert engine.reload_weights(FlatWeights.pack(noisy.items())) == "direct"
    assert run() == by_vllm != base
    model.load_state_dict(noisy)
    try:
        for prompt, group in zip(prompts, engine.generate(prompts, spec, logprobs=True)):
            for s in group:
                ref = _reference_logprobs(tok, model, prompt, s, 1.0).tolist()
                assert s.logprobs == pytest.approx(ref, abs=2e-3)
    finally:
        model.load_state_dict(original)
        engine.reload_weights(original.items())
    assert run() == base


@pytest.mark.parametrize("token", ["<|im_end|>", "<|endoftext|>"])
def test_generation_stops_at_each_eos_of_generation_config(engine, prompts, hf, token):
    """Weights made to predict ``token`` first: generation stops there with finish_reason stop,
    for the tokenizer's eos and for the second eos that only generation_config.json lists."""
    import torch

    tok, model = hf
    original = {k: v.clone() for k, v in model.state_dict().items()}
    forced = dict(original)
    for k, v in original.items():  # the layers add nothing to the residual stream: logits read the input
        if k.endswith(("o_proj.weight", "down_proj.weight")):
            forced[k] = torch.zeros_like(v)
    emb = original["model.embed_tokens.weight"].clone()  # [V, H]
    emb[:, 0] = 1.0  # every token shares a direction ...
    tid = tok.convert_tokens_to_ids(token)
    emb[tid] = 0.0
    emb[tid, 0] = 50.0  # ... that only ``token`` answers strongly
    forced["model.embed_tokens.weight"] = emb
    if "lm_head.weight" in forced:
        forced["lm_head.weight"] = emb
    engine.reload_weights(forced.items())
    try:
        out = engine.generate(prompts, SamplingSpec(n=2, temperature=1.0, max_tokens=8, seed=1))
    finally:
        engine.reload_weights(original.items())
    for group in out:
        for s in group:
            assert (s.finish_reason, s.token_ids, s.text) == ("stop", (tid,), "")
