"""A small real Llama (built from a LlamaConfig with a fixed seed, saved in HF format) and a fixed
batch of token sequences with advantages, shared by the trainer tests."""

from __future__ import annotations

import torch

VOCAB = 32


def build_tiny_llama(
    path,
    *,
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    vocab: int = VOCAB,
    max_positions: int = 64,
    tokenizer=None,
):
    """4 heads of ``hidden // 4`` (16 by default).  ``tokenizer``: a model directory whose tokenizer
    files are copied beside the weights (the engine needs one; ``vocab`` must then match it)."""
    import shutil
    from pathlib import Path

    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=max_positions,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(path)
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json") if tokenizer else ():
        shutil.copy(Path(tokenizer) / f, Path(path) / f)
    return path


def build_tiny_qwen2(path, *, seed: int = 0, hidden: int = 64, layers: int = 2):
    """A small real Qwen2 (grouped-query attention, q/k/v biases, tied input/output embeddings)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=True,
    )
    Qwen2ForCausalLM(cfg).save_pretrained(path)
    return path


def bf16_copy(src, dst):
    """``src``'s model saved in bf16, as Qwen and Llama releases ship; returns ``dst``."""
    from rldata.trainer.checkpoint import load_model

    load_model(src).to(torch.bfloat16).save_pretrained(dst)
    return dst


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


# --- torch.distributed ranks in spawned processes (no Ray) -------------------------------------------
def run_ranks(fn, world_size: int, *args) -> None:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` spawned processes joined by a gloo group.

    Spawned, not forked: deltalake's runtime panics in a forked child.  ``fn`` must be importable
    (a module-level function here); results come back through files it writes."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(
        _rank_main, args=(fn, world_size, port, args), nprocs=world_size, start_method="spawn", join=True
    )


def _rank_main(rank, fn, world_size, port, args):
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        fn(rank, world_size, *args)
    finally:
        dist.destroy_process_group()


def _global_stats(sums):
    import torch.distributed as dist

    from rldata.trainer.learner import combine_stats

    per_rank = [None] * dist.get_world_size()
    dist.all_gather_object(per_rank, sums)
    return combine_stats(per_rank)


def sharding_batches():
    """Three batches: 16 rows, 13 rows (uneven shards, filler rows), 16 rows; on-policy-ish logps."""
    from rldata.trainer.policy import collate

    out = []
    for seed, rows in ((20, 16), (21, 13), (22, 16)):
        p, c, o, a = make_rollouts(seed, rows=rows)
        out.append(collate(p, c, advantages=a, old_logps=o))
    return out


SHARDING_CFG = {"prompts_per_step": 4, "n": 4, "micro_batch": 4, "lr": 1e-4, "kl_coef": 0.1}


def sharded_runs(rank, world_size, model_dir, out_dir, runs):
    """For each (name, config overrides, mode) in ``runs``: train on ``sharding_batches`` and write
    rank 0's losses, stats and final HF weights to ``out_dir/name.pt``.

    mode "full": 3 steps from ``model_dir``; "save": 2 steps, then a checkpoint at ``out_dir/name``;
    "resume:<ckpt>": resume from ``out_dir/<ckpt>`` and take step 3."""
    from pathlib import Path

    from rldata.trainer.config import TrainConfig
    from rldata.trainer.learner import Learner

    batches = sharding_batches()
    for name, overrides, mode in runs:
        cfg = TrainConfig(**{**SHARDING_CFG, "num_learners": world_size, **overrides})
        if mode == "mismatch":
            todo = [engine_like_batch(model_dir)]
            lrn = Learner(model_dir, cfg, rank=rank, world_size=world_size)
        elif mode.startswith("resume:"):
            ckpt = Path(out_dir) / mode.split(":", 1)[1]
            lrn = Learner(ckpt, cfg, rank=rank, world_size=world_size, ref_path=model_dir, resume=True)
            todo = batches[2:]
        else:
            lrn = Learner(model_dir, cfg, rank=rank, world_size=world_size)
            todo = batches if mode == "full" else batches[:2]
        stats = [_global_stats(lrn.step(b)) for b in todo]
        weights = lrn.get_weights()
        if mode == "save":
            lrn.save(Path(out_dir) / name)
        if rank == 0:
            torch.save({"stats": stats, "weights": weights}, Path(out_dir) / f"{name}.pt")


def engine_like_batch(model_dir, seed: int = 30):
    """A batch whose behaviour log-probs are the fp32 model's own (an fp32 engine on the same
    weights): mismatch_kl measures only how the learner's precision scores the same tokens."""
    from dataclasses import replace

    from rldata.trainer.checkpoint import load_model
    from rldata.trainer.policy import collate, token_logprobs

    p, c, _, a = make_rollouts(seed, rows=16, with_old=False)
    batch = collate(p, c, advantages=a)
    with torch.no_grad():
        lp, _ = token_logprobs(
            load_model(model_dir), batch.input_ids, batch.attention_mask, with_entropy=False
        )
    return replace(batch, old_logp=lp * batch.loss_mask)
