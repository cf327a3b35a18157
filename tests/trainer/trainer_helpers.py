"""A small real Llama (built from a LlamaConfig with a fixed seed, saved in HF format) and a fixed
batch of token sequences with advantages, shared by the trainer tests."""

from __future__ import annotations

import torch

VOCAB = 32


def build_tiny_llama(path, *, seed: int = 0, hidden: int = 64, layers: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(path)
    return path


def make_rollouts(seed: int, *, rows: int = 8, with_old: bool = True):
    """Prompts of 2-5 tokens, completions of 1-6 tokens, advantages and behaviour log-probs."""
    g = torch.Generator().manual_seed(seed)
    prompts, completions, old, adv = [], [], [], []
    for _ in range(rows):
        lp = int(torch.randint(2, 6, (1,), generator=g))
        lc = int(torch.randint(1, 7, (1,), generator=g))
        prompts.append(torch.randint(3, VOCAB, (lp,), generator=g).tolist())
        completions.append(torch.randint(3, VOCAB, (lc,), generator=g).tolist())
        # Behaviour log-probs near the (random) model's ~log(1/32), so ratios spread around 1.
        old.append((-3.47 + 0.3 * torch.randn(lc, generator=g)).tolist())
        adv.append(float(torch.randn(1, generator=g)))
    return prompts, completions, (old if with_old else None), adv
