"""Train the embedded tiny model: a character-level Llama taught integer arithmetic, supervised.

    python -m rldata.jobs.pretrain_tiny --out sample_data/models/tiny-arith
    python -m rldata.jobs.pretrain_tiny --report sample_data/models/tiny-arith         # N=16 pass rates
    python -m rldata.jobs.pretrain_tiny --report-tools sample_data/models/tiny-arith   # with the calculator
    python -m rldata.jobs.pretrain_tiny --format chatml --out sample_data/models/tiny-arith-chat

``--format chatml`` trains the chat model instead: ChatML, tools through the chat template and
Hermes ``<tool_call>`` JSON (:mod:`rldata.jobs.tiny_chat`); the loop, the problems, the held-out
exclusion and the determinism are the same.  The rest of this text is about ``tiny-arith``.

One token per character, plus five tool tokens.  A training sequence is one of three
conversations, rendered by the saved chat template:

- plain: ``<s>12+7=19</s>``;
- calculator advertised (``<tools>``), answered directly: ``<s><tools>12+7=19</s>``;
- calculator advertised and called: ``<s><tools>37*8+5=<calc>37*8+5</calc></s><tool>301</tool>301</s>``.

The loss covers the assistant turns only (what the model generates, each closing ``</s>``
included), never the prompt or the tool's reply.  Half the sequences are plain
(``plain_share``); ``tool_share`` of the others call the calculator, whatever the problem, so the
base model calls it in a minority of episodes and RL has a choice to learn.  Problems come from
:mod:`rldata.sample_data.arith` streams over the difficulty levels, with the bundled held-out
prompts excluded.  The model is deliberately under-trained: its sampled pass rates should spread
over [0, 1] so that difficulty filtering and GRPO have something to work with.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rldata.console import log
from rldata.envs.calculator import evaluate, format_number
from rldata.errors import ConfigError
from rldata.heavy import torch
from rldata.jobs import tiny_chat
from rldata.sample_data import arith
from rldata.sample_data.arith import load_bundled

__all__ = [
    "CHARS",
    "CHAT_TEMPLATE",
    "CONTEXT",
    "KINDS",
    "SPECIALS",
    "TOOLS_PROMPT",
    "TOOL_TOKENS",
    "TinyConfig",
    "TrainConfig",
    "build_char_tokenizer",
    "build_model",
    "build_tokenizer",
    "conversation",
    "encode_batch",
    "encode_conversation",
    "example_stream",
    "problem_stream",
    "save",
    "train",
    "vocab_size",
]

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")  # ids 0..3
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
CHARS = "0123456789+-*()= "  # ids 4..20
# ids 21..25.  Added tokens that are NOT special: vLLM decodes with skip_special_tokens=True, and a
# generated <calc> must survive into the completion text for the environment to see it.
TOOL_TOKENS = ("<tools>", "<calc>", "</calc>", "<tool>", "</tool>")
TOOLS_ID, CALC_ID, CALC_END_ID, TOOL_ID, TOOL_END_ID = range(
    len(SPECIALS) + len(CHARS), len(SPECIALS) + len(CHARS) + 5
)
TOOLS_PROMPT = "<tools>"  # the system message that advertises the calculator
CONTEXT = 256  # positions, and the tokenizer's model_max_length
KINDS = ("plain", "direct", "call")  # the three training conversations
FORMATS = ("calc", "chatml")

# assistant -> content + </s>; tool -> <tool>content</tool>; system and user -> content as is;
# a generation prompt adds nothing (the model's turn starts right after the last message).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}{{ message['content'] }}{{ eos_token }}"
    "{% elif message['role'] == 'tool' %}{{ '<tool>' }}{{ message['content'] }}{{ '</tool>' }}"
    "{% elif message['role'] in ['system', 'user'] %}{{ message['content'] }}"
    "{% else %}{{ raise_exception('unknown role: ' + message['role']) }}"
    "{% endif %}"
    "{% endfor %}"
)


def vocab_size() -> int:
    return len(SPECIALS) + len(CHARS) + len(TOOL_TOKENS)


@dataclass(frozen=True)
class TinyConfig:
    """Model shape.  The defaults give ~0.83 M parameters, ~3.4 MB in float32."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    max_position_embeddings: int = CONTEXT

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError("hidden_size must be a multiple of num_attention_heads", field="hidden_size")
        if (
            min(
                self.hidden_size, self.intermediate_size, self.num_hidden_layers, self.max_position_embeddings
            )
            < 1
        ):
            raise ConfigError("model sizes must be positive", field="hidden_size")


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 625
    batch_size: int = 128
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    seed: int = 0
    # One thread: on a shared 2-core machine two OpenMP threads ran at half the speed of one
    # (spin-waiting on a descheduled partner), and a fixed count keeps the run bit-reproducible.
    threads: int = 1
    level_weights: dict = field(default_factory=lambda: {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0})
    plain_share: float = 0.5  # share of sequences with no calculator advertised
    tool_share: float = 0.3  # share of the calculator-advertised sequences that call it
    # "calc": tiny-arith's <calc> protocol; "chatml": tiny-arith-chat's ChatML with Hermes tool calls
    # (rldata.jobs.tiny_chat), where raw_share of the sequences are bare prompts with no template
    format: str = "calc"
    raw_share: float = 0.0

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1:
            raise ConfigError(
                "steps and batch_size must be >= 1", field="steps" if self.steps < 1 else "batch_size"
            )
        if not self.lr > 0:
            raise ConfigError("lr must be > 0", field="lr")
        if not self.level_weights or min(self.level_weights.values()) < 0:
            raise ConfigError("level_weights must be non-negative and not empty", field="level_weights")
        for name in ("plain_share", "tool_share", "raw_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {getattr(self, name)}", field=name)
        if self.format not in FORMATS:
            raise ConfigError(
                f"format must be one of {', '.join(FORMATS)}, got {self.format!r}", field="format"
            )
        if self.raw_share and (self.format != "chatml" or self.raw_share + self.plain_share > 1.0):
            raise ConfigError(
                "raw_share is for format chatml, with raw_share + plain_share <= 1", field="raw_share"
            )


def build_char_tokenizer():
    """The ``tokenizers.Tokenizer``: one token per character, ``<s>`` prepended, no-space decoding.

    ``decoders.Fuse`` joins tokens with no separator: without a decoder, ``tokenizers`` joins
    them with spaces and "19" would come back as "1 9".  The tool tokens are added tokens, matched
    whole before the per-character split (longest match first, so ``<tools>`` is not ``<tool>s>``).
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = {t: i for i, t in enumerate(SPECIALS + tuple(CHARS) + TOOL_TOKENS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")  # one piece per character
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", BOS_ID)])
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(SPECIALS))
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    return tok


def build_tokenizer():
    """The transformers wrapper that ``save_pretrained`` writes for ``AutoTokenizer`` and vLLM."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=build_char_tokenizer(),
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=CONTEXT,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
    )


def build_model(cfg: TinyConfig, *, seed: int = 0, format: str = "calc"):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    chat = format == "chatml"
    config = LlamaConfig(
        vocab_size=tiny_chat.vocab_size() if chat else vocab_size(),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_attention_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        bos_token_id=None if chat else BOS_ID,  # ChatML has no bos, as in Qwen
        eos_token_id=tiny_chat.EOS_ID if chat else EOS_ID,
        pad_token_id=tiny_chat.PAD_ID if chat else PAD_ID,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    return LlamaForCausalLM(config)


def problem_stream(level_weights: dict, *, seed: int, exclude: set[str]):
    """Endless (prompt, answer) pairs: a level by weight, then one of its knob settings."""
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


def conversation(prompt: str, answer: str, kind: str) -> list[dict]:
    """The chat messages of one training example of ``kind`` (see :data:`KINDS`)."""
    if kind == "plain":
        return [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    head = [{"role": "system", "content": TOOLS_PROMPT}, {"role": "user", "content": prompt}]
    if kind == "direct":
        return head + [{"role": "assistant", "content": answer}]
    if kind == "call":
        expr = prompt.removesuffix("=")
        return head + [
            {"role": "assistant", "content": f"<calc>{expr}</calc>"},
            {"role": "tool", "content": format_number(evaluate(expr))},
            {"role": "assistant", "content": answer},
        ]
    raise ValueError(f"unknown conversation kind {kind!r}; known: {', '.join(KINDS)}")


def _pieces(text: str) -> list[int]:
    """Ids of ``text`` with no ``<s>`` added (tool tokens whole, everything else per character)."""
    ids = _tokenizer().encode(text, add_special_tokens=False).ids
    if UNK_ID in ids:
        raise ValueError(f"text {text!r} has characters outside the vocabulary")
    return ids


_TOK = None


def _tokenizer():
    global _TOK
    if _TOK is None:
        _TOK = build_char_tokenizer()
    return _TOK


def encode_conversation(messages: list[dict]) -> tuple[list[int], list[int]]:
    """(ids, labels) of the chat template's rendering; labels are -100 except on assistant turns.

    Encoded message by message, so each token knows whose it is; the ids equal the tokenizer's
    encoding of ``apply_chat_template(messages)`` (a test checks this).
    """
    ids, labels = [BOS_ID], [-100]
    for m in messages:
        role, content = m["role"], str(m["content"])
        if role == "assistant":
            part = _pieces(content) + [EOS_ID]
            ids += part
            labels += part
        elif role in ("system", "user", "tool"):
            part = _pieces(f"<tool>{content}</tool>" if role == "tool" else content)
            ids += part
            labels += [-100] * len(part)
        else:
            raise ValueError(f"unknown role {role!r}")
    return ids, labels


def example_stream(cfg: TrainConfig, *, exclude: set[str]):
    """Endless (ids, labels) training examples: a problem, then its conversation kind.

    The kinds are drawn from their own generator, so the problems are the same for any mix.
    """
    problems = problem_stream(cfg.level_weights, seed=cfg.seed, exclude=exclude)
    if cfg.format == "chatml":
        yield from tiny_chat.example_stream(cfg, problems)
        return
    rng = random.Random(f"format:{cfg.seed}")
    for prompt, answer in problems:
        if rng.random() < cfg.plain_share:
            kind = "plain"
        else:
            kind = "call" if rng.random() < cfg.tool_share else "direct"
        yield encode_conversation(conversation(prompt, answer, kind))


def encode_batch(examples: list[tuple[list[int], list[int]]]):
    """Right-padded ids, attention mask and labels (-100 on padding), each [B, T]."""
    width = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), width), PAD_ID, dtype=torch.long)  # [B, T]
    lab = torch.full((len(examples), width), -100, dtype=torch.long)  # [B, T]
    mask = torch.zeros((len(examples), width), dtype=torch.long)  # [B, T]
    for i, (s, l) in enumerate(examples):
        ids[i, : len(s)] = torch.tensor(s)
        lab[i, : len(l)] = torch.tensor(l)
        mask[i, : len(s)] = 1
    return ids, mask, lab


def _batch_loss(model, examples):
    """Mean cross-entropy per labelled token over the batch.

    Computed over three padded groups of similar length, because a calculator call is about
    three times as long as a plain answer and padding every row to the longest would double the
    compute.  The result is one padded batch's mean loss, up to float rounding.
    """
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i][0]), i))
    cut = [0, len(order) // 3, 2 * len(order) // 3, len(order)]
    groups = [[examples[i] for i in order[a:b]] for a, b in itertools.pairwise(cut) if b > a]
    total, count = 0.0, 0
    for g in groups:
        ids, mask, lab = encode_batch(g)
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]  # [B, T-1, V]
        target = lab[:, 1:]  # [B, T-1]: the token each position predicts
        total = total + torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100, reduction="sum"
        )
        count += int(target.ne(-100).sum())
    return total / count


def _lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def train(
    out: str | Path,
    *,
    model_cfg: TinyConfig = TinyConfig(),
    train_cfg: TrainConfig = TrainConfig(),
    exclude: set[str] | None = None,
    log_every: int = 100,
) -> list[float]:
    """Train from scratch and save an HF model dir at ``out``; returns the per-step losses."""
    torch.set_num_threads(train_cfg.threads)
    if exclude is None:
        exclude = {r["prompt"] for r in load_bundled("heldout")}
    model = build_model(model_cfg, seed=train_cfg.seed, format=train_cfg.format)
    model.train()
    opt = torch.optim.AdamW(
        model.parameters(), lr=train_cfg.lr, betas=(0.9, 0.98), weight_decay=train_cfg.weight_decay
    )
    stream = example_stream(train_cfg, exclude=exclude)
    losses: list[float] = []
    t0, c0 = time.monotonic(), time.process_time()
    for step in range(train_cfg.steps):
        for g in opt.param_groups:
            g["lr"] = _lr_at(step, train_cfg)
        loss = _batch_loss(model, [next(stream) for _ in range(train_cfg.batch_size)])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if log_every and (step + 1) % log_every == 0:
            recent = sum(losses[-log_every:]) / len(losses[-log_every:])
            log(f"step {step + 1}/{train_cfg.steps} loss {recent:.4f} ({time.monotonic() - t0:.0f} s)")
    save(
        model,
        out,
        model_cfg=model_cfg,
        train_cfg=train_cfg,
        seconds=time.monotonic() - t0,
        cpu_seconds=time.process_time() - c0,
        final_loss=sum(losses[-50:]) / len(losses[-50:]),
    )
    return losses


def save(
    model,
    out: str | Path,
    *,
    model_cfg: TinyConfig,
    train_cfg: TrainConfig,
    seconds: float,
    cpu_seconds: float | None = None,
    final_loss: float,
) -> None:
    """Weights, config, tokenizer and generation config, loadable by transformers and vLLM."""
    from transformers import GenerationConfig

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(out)
    if train_cfg.format == "chatml":
        template = tiny_chat.CHAT_TEMPLATE
        GenerationConfig(eos_token_id=tiny_chat.EOS_ID, pad_token_id=tiny_chat.PAD_ID).save_pretrained(out)
        tiny_chat.build_tokenizer(model_cfg.max_position_embeddings).save_pretrained(out)
    else:
        template = CHAT_TEMPLATE
        GenerationConfig(bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID).save_pretrained(out)
        build_tokenizer().save_pretrained(out)
    # "PreTrainedTokenizerFast" also names the tokenizers-backed class in transformers < 5.
    cfg_path = out / "tokenizer_config.json"
    tok_cfg = json.loads(cfg_path.read_text())
    tok_cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    # The template lives in tokenizer_config.json, where every transformers version (and so vLLM)
    # reads it; newer transformers would otherwise write a separate chat_template.jinja.
    tok_cfg["chat_template"] = template
    (out / "chat_template.jinja").unlink(missing_ok=True)
    cfg_path.write_text(json.dumps(tok_cfg, indent=2) + "\n")
    meta = {
        "model": asdict(model_cfg),
        "train": asdict(train_cfg),
        "seconds": round(seconds, 1),
        "cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 1),
        "final_loss": round(final_loss, 4),
    }
    (out / "training.json").write_text(json.dumps(meta, indent=2) + "\n")


def _main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m rldata.jobs.pretrain_tiny", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", help="model directory to write")
    p.add_argument("--steps", type=int, default=TrainConfig.steps)
    p.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    p.add_argument("--lr", type=float, default=TrainConfig.lr)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--level-weights", default="1,1,1,1,1", help="training mix weights of levels 1..5")
    p.add_argument(
        "--format",
        default="calc",
        choices=FORMATS,
        help="calc: tiny-arith's <calc> protocol; chatml: ChatML with Hermes tool calls (tiny-arith-chat)",
    )
    p.add_argument(
        "--plain-share",
        type=float,
        default=None,
        help="share of sequences with no calculator advertised (default 0.5; chatml: chat turns, 0.1)",
    )
    p.add_argument(
        "--raw-share",
        type=float,
        default=None,
        help="chatml: share of bare prompts with no template (default 0.4)",
    )
    p.add_argument(
        "--tool-share",
        type=float,
        default=TrainConfig.tool_share,
        help="share of the calculator-advertised sequences that call it",
    )
    p.add_argument("--hidden", type=int, default=TinyConfig.hidden_size)
    p.add_argument("--intermediate", type=int, default=TinyConfig.intermediate_size)
    p.add_argument("--layers", type=int, default=TinyConfig.num_hidden_layers)
    p.add_argument("--heads", type=int, default=TinyConfig.num_attention_heads)
    p.add_argument(
        "--threads", type=int, default=TrainConfig.threads, help="torch threads (1 is faster on a busy CPU)"
    )
    p.add_argument(
        "--report", metavar="MODEL_DIR", help="measure N=16 pass rates of MODEL_DIR on the bundled tasks"
    )
    p.add_argument(
        "--report-tools",
        metavar="MODEL_DIR",
        help="measure N=16 calculator use and accuracy of MODEL_DIR with <tools> advertised",
    )
    p.add_argument(
        "--split", default="train", choices=["train", "heldout", "all"], help="tasks for the reports"
    )
    p.add_argument("--readme", action="store_true", help="with --report: also write MODEL_DIR/README.md")
    a = p.parse_args(argv)
    if a.report or a.report_tools:
        from rldata.jobs import tiny_report  # cycle: tiny_report imports this one

        tiny_report.run_reports(single=a.report, tools=a.report_tools, split=a.split, readme=a.readme)
        return
    if not a.out:
        p.error("--out is required (or --report / --report-tools MODEL_DIR)")
    weights = {i + 1: float(w) for i, w in enumerate(a.level_weights.split(","))}
    chat = a.format == "chatml"
    # chatml: the bare prompt is what single-turn sampling and training send (no template), so it
    # gets most of calc's plain share; a chat turn without tools keeps a little
    plain_share = a.plain_share if a.plain_share is not None else (0.1 if chat else TrainConfig.plain_share)
    raw_share = a.raw_share if a.raw_share is not None else (0.4 if chat else 0.0)
    model_cfg = TinyConfig(a.hidden, a.intermediate, a.layers, a.heads)
    train_cfg = TrainConfig(
        steps=a.steps,
        batch_size=a.batch_size,
        lr=a.lr,
        seed=a.seed,
        threads=a.threads,
        level_weights=weights,
        plain_share=plain_share,
        tool_share=a.tool_share,
        format=a.format,
        raw_share=raw_share,
    )
    train(a.out, model_cfg=model_cfg, train_cfg=train_cfg)
    print(f"model -> {a.out}")


if __name__ == "__main__":
    _main()
