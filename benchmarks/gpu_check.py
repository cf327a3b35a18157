"""The parts of benchmarks/gpu_check.sh, one per invocation: ``python benchmarks/gpu_check.py PART WORK``.

Parts: fixture, sample, fsdp, sync, grpo.  Each prints nothing on success and exits 0; the shell
script prints the pass/fail line.  ``--dry-run`` runs each part on CPU at the smallest size (gloo
instead of NCCL, no vLLM engine), so the script itself stays tested on machines without a GPU.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import torch


def _device(dry: bool) -> str:
    if dry:
        return "cpu"
    if not torch.cuda.is_available():
        sys.exit("no CUDA device (use --dry-run on a CPU machine)")
    return "cuda"


def fixture(work: Path, dry: bool) -> None:
    """A Qwen2-architecture model from a config (fixed seed) with the bundled model's tokenizer."""
    import shutil

    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from rldata.engine.core import default_model_path

    tok_src = default_model_path()
    tok = AutoTokenizer.from_pretrained(tok_src)
    torch.manual_seed(0)
    hidden = 128 if dry else 512
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2 if dry else 8,
        num_attention_heads=hidden // 64,  # head_dim 64: vLLM's CPU attention takes it too
        num_key_value_heads=max(1, hidden // 128),
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    out = work / "model"
    Qwen2ForCausalLM(cfg).save_pretrained(out)
    for f in Path(tok_src).iterdir():
        if f.is_file() and f.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            shutil.copy2(f, out / f.name)


def sample(work: Path, dry: bool) -> None:
    """vLLM on the fixture: 8 completions with log-probs."""
    if dry:
        import vllm  # noqa: F401  (the engine imports; no engine on a dry run)

        return
    from rldata.configs.sampling import SamplingSpec
    from rldata.engine.core import Engine

    with Engine(work / "model", dtype="bfloat16", max_model_len=256) as eng:
        out = eng.generate_ids(
            [[1, 5, 6, 7]] * 8, SamplingSpec(n=1, max_tokens=16), seeds=list(range(8)), logprobs=True
        )
    assert all(s.token_ids for s in out), "empty completions"


def _batch(model: Path):
    from transformers import AutoConfig

    from rldata.trainer.policy import collate

    vocab = AutoConfig.from_pretrained(model).vocab_size
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, vocab, (4,), generator=g).tolist() for _ in range(16)]
    comps = [torch.randint(3, vocab, (6,), generator=g).tolist() for _ in range(16)]
    adv = torch.randn(16, generator=g).tolist()
    return collate(prompts, comps, advantages=adv)


def fsdp_rank(work: Path, dry: bool) -> None:
    """One FSDP rank (run under torchrun): bf16 + checkpointing, one step, weights gathered."""
    import torch.distributed as dist

    from rldata.trainer.config import TrainConfig
    from rldata.trainer.learner import Learner

    device = _device(dry)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("gloo" if dry else "nccl", rank=rank, world_size=world)
    try:
        cfg = TrainConfig(
            prompts_per_step=4,
            n=4,
            micro_batch=4,
            num_learners=world,
            strategy="fsdp",
            mixed_precision="bf16",
            gradient_checkpointing=True,
            lr=1e-4,
        )
        lrn = Learner(work / "model", cfg, rank=rank, world_size=world, device=device)
        stats = lrn.step(_batch(work / "model"))
        assert torch.isfinite(torch.tensor(stats["loss"])), stats
        flat = lrn.flat_weights()
        assert rank != 0 or len(flat) > 0
    finally:
        dist.destroy_process_group()


def fsdp(work: Path, dry: bool) -> None:
    world = 1 if dry else max(1, min(2, torch.cuda.device_count()))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={world}",
        __file__,
        "fsdp-rank",
        str(work),
    ]
    subprocess.run([*cmd, *(["--dry-run"] if dry else [])], check=True)


def sync(work: Path, dry: bool) -> None:
    """A CUDA learner's weights into a CUDA engine (the direct path), checked by the log-probs."""
    from rldata.trainer.config import TrainConfig
    from rldata.trainer.learner import Learner

    device = _device(dry)
    lrn = Learner(work / "model", TrainConfig(prompts_per_step=4, n=4, lr=1e-3), device=device)
    lrn.step(_batch(work / "model"))
    flat = lrn.flat_weights()
    if dry:
        assert len(flat) > 0
        return
    from rldata.engine.core import Engine

    with Engine(work / "model", max_model_len=256) as eng:
        how = eng.reload_weights(flat)
        assert how == "direct", how


def grpo(work: Path, dry: bool) -> None:
    """5 GRPO steps through the CLI on the fixture (FSDP over the GPUs)."""
    from rldata.ingest import sample_path

    n = 1 if dry else max(1, min(2, torch.cuda.device_count()))
    cfg = work / "train.yaml"
    cfg.write_text(
        f"prompts_per_step: 4\ngroup_size: 4\nmax_tokens: 16\nnum_learners: {n}\nstrategy: fsdp\n"
        f"mixed_precision: bf16\ngradient_checkpointing: true\noutput_dir: {work / 'runs'}\n"
    )
    store = str(work / "store")
    rl = [sys.executable, "-m", "rldata", "--store", store]
    subprocess.run([*rl, "ingest", str(sample_path("arith"))], check=True, stdout=subprocess.DEVNULL)
    if dry:
        from rldata.trainer.config import TrainConfig

        TrainConfig.from_yaml(cfg)  # the config the real run takes
        return
    subprocess.run(
        [
            *rl,
            "train",
            "--config",
            str(cfg),
            "--model",
            str(work / "model"),
            "--steps",
            "5",
            "--run-id",
            "gpu",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


PARTS = {
    "fixture": fixture,
    "sample": sample,
    "fsdp": fsdp,
    "fsdp-rank": fsdp_rank,
    "sync": sync,
    "grpo": grpo,
}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=PARTS)
    ap.add_argument("work", type=Path)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    PARTS[a.part](a.work, a.dry_run)
