"""A Qwen2-architecture model made on the spot: the road real checkpoints take, with nothing downloaded.

The bundled tiny model is a Llama with a one-character tokenizer and a private template.  Users
train Qwen/Llama checkpoints: a byte-level BPE tokenizer, ChatML turns, Hermes-style tool calls,
several end-of-turn ids in ``generation_config.json``.  Tests and benchmarks build such a model here:

    from rldata.models.fixture import make_qwen2_fixture
    path = make_qwen2_fixture(tmp / "qwen", size="tiny", seed=0)

or ``python -m rldata.models.fixture --out DIR [--size tiny|small|bench] [--seed 0]``.

- Weights: ``transformers.Qwen2ForCausalLM`` from a ``Qwen2Config``, initialised under
  ``torch.manual_seed(seed)`` (random, untrained), saved as ``model.safetensors``.  The same size,
  seed and library versions give the same bytes.
- Tokenizer: a byte-level BPE trained here with ``tokenizers`` on the bundled text (arithmetic and
  code prompts, the GSM8K sample, and conversations rendered with the template below), with the
  Qwen pre-tokenizer split (digits one by one).  The special tokens come after the learned
  vocabulary, as in Qwen: ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``; ``<tool_call>`` and
  ``</tool_call>`` are added tokens that are not special, so a decoded completion keeps them.
- Chat template: ChatML as the Qwen family writes it, with its ``tools`` branch (see
  :data:`CHAT_TEMPLATE`).  ``eos`` is ``<|im_end|>``; generation stops at ``<|im_end|>`` or
  ``<|endoftext|>`` (both in ``generation_config.json``, which vLLM reads).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rldata.errors import ConfigError
from rldata.heavy import torch

__all__ = ["CHAT_TEMPLATE", "SIZES", "FixtureSize", "make_qwen2_fixture", "train_tokenizer"]

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
TOOL_CALL, TOOL_CALL_END = "<tool_call>", "</tool_call>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
TOOL_TOKENS = (TOOL_CALL, TOOL_CALL_END)

# vLLM's CPU attention kernels take only these head sizes
HEAD_DIMS = (32, 64, 80, 96, 112, 128, 256)

# Qwen2's pre-tokenizer split: contractions, letter runs (with one leading non-letter), single
# digits, punctuation runs, newlines, spaces.  Then byte-level mapping, no prefix space.
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# A ChatML tool message, shared by the templates that lay tool results out the Qwen way
# (jobs/tiny_chat.py too): consecutive tool messages share one user turn, each in <tool_response>.
TOOL_RESPONSE_TURN = (
    "{%- elif message['role'] == 'tool' %}"
    "{%- if loop.first or loop.previtem['role'] != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}"
    "{%- if loop.last or loop.nextitem['role'] != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
)

# ChatML with the tools branch, as the Qwen family lays it out (the wording of the instructions is
# this project's own).  With ``tools``: one system turn holding the system message (if any), then
# the function schemas as JSON lines between <tools></tools>, then how to call.  Assistant tool
# calls: each as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call> after the text.  Tool
# results: consecutive tool messages share one user turn, each inside <tool_response>.
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nThese functions are available. Their JSON schemas are listed inside <tools></tools>:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nTo call one, reply with a JSON object holding its name and arguments, inside "
    '<tool_call></tool_call>:\\n<tool_call>\\n{\\"name\\": <name>, \\"arguments\\": <arguments as a JSON object>}'
    "\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages and messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' and loop.first %}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message['content'] %}{{- '\\n' + message['content'] }}{%- endif %}"
    "{%- for call in message.get('tool_calls') or [] %}"
    "{%- set fn = call['function'] if call.get('function') else call %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + fn['name'] + '\", \"arguments\": ' }}"
    "{%- if fn['arguments'] is string %}{{- fn['arguments'] }}{%- else %}{{- fn['arguments'] | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}" + TOOL_RESPONSE_TURN + "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@dataclass(frozen=True)
class FixtureSize:
    """The model's dimensions.  ``vocab`` is the BPE's target size; the config's ``vocab_size`` is
    what training reached plus the added tokens (a small corpus may stop short of the target)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    context: int = 2048
    tie_embeddings: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


SIZES = {
    # a few MB: tests
    "tiny": FixtureSize(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256, vocab=2048),
    # ~26M parameters: throughput comparisons
    "small": FixtureSize(hidden=512, layers=8, heads=8, kv_heads=2, intermediate=1536, vocab=8192),
    # ~190M parameters: the memory benchmark
    "bench": FixtureSize(hidden=1024, layers=16, heads=16, kv_heads=4, intermediate=2816, vocab=8192),
}


def _size(size: str | FixtureSize | dict) -> FixtureSize:
    if isinstance(size, FixtureSize):
        dims = size
    elif isinstance(size, dict):
        dims = replace(SIZES["tiny"], **size)
    elif size in SIZES:
        dims = SIZES[size]
    else:
        raise ConfigError(
            f"size must be one of {', '.join(SIZES)} or explicit dimensions, not {size!r}", field="size"
        )
    if dims.hidden % dims.heads or dims.head_dim not in HEAD_DIMS:
        raise ConfigError(
            f"hidden / heads must be a head size vLLM's CPU attention takes ({HEAD_DIMS}), "
            f"not {dims.hidden}/{dims.heads}",
            field="size",
        )
    if dims.heads % dims.kv_heads:
        raise ConfigError(
            f"heads ({dims.heads}) must be a multiple of kv_heads ({dims.kv_heads})", field="size"
        )
    return dims


# ---- the corpus and the tokenizer -------------------------------------------------------------

_EXAMPLE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate an arithmetic expression and return its value.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "e.g. 37*8+5"}},
                "required": ["expression"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find a fact by its key.",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        },
    },
]


def _chat_examples(prompts: list[tuple[str, str]]) -> list[str]:
    """Conversations in the template's text, so the BPE learns its frames (the specials stripped:
    they are added tokens, never merged)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    tpl = env.from_string(CHAT_TEMPLATE)
    out = []
    for i, (prompt, answer) in enumerate(prompts):
        expr = prompt.rstrip("=")
        msgs = [{"role": "user", "content": prompt}]
        if i % 2:
            call = {"name": "calculate", "arguments": {"expression": expr}}
            msgs += [
                {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]},
                {"role": "tool", "content": answer},
            ]
        msgs.append({"role": "assistant", "content": answer})
        text = tpl.render(messages=msgs, tools=_EXAMPLE_TOOLS if i % 2 else None, add_generation_prompt=False)
        for tok in (*SPECIAL_TOKENS, *TOOL_TOKENS):
            text = text.replace(tok, "\n")
        out.append(text)
    return out


def corpus() -> list[str]:
    """The bundled text the tokenizer learns from, in a fixed order."""
    from importlib.resources import files

    root = files("rldata.sample_data")
    texts: list[str] = []
    arith = []
    for line in root.joinpath("arith_tasks.jsonl").read_text().splitlines():
        row = json.loads(line)
        arith.append((row["prompt"], row["answer"]))
    texts += [f"{p}{a}" for p, a in arith]
    for line in root.joinpath("code_tasks.jsonl").read_text().splitlines():
        texts.append(json.loads(line)["prompt"])
    for line in root.joinpath("gsm8k", "train.jsonl").read_text().splitlines():
        row = json.loads(line)
        texts += [row["question"], row["answer"]]
    texts += _chat_examples(arith[:400])
    return texts


def train_tokenizer(vocab: int):
    """A byte-level BPE (``tokenizers.Tokenizer``) learned from :func:`corpus`, the added tokens last."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab - len(SPECIAL_TOKENS) - len(TOOL_TOKENS),
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    return tok


def _save_tokenizer(tok, out: Path, context: int) -> None:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        model_max_length=context,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    # name the class real Qwen checkpoints name, so loaders take the same path they take for them
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "Qwen2Tokenizer"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


# ---- the model ----------------------------------------------------------------------------------


def make_qwen2_fixture(
    out_dir: str | Path,
    *,
    size: str | FixtureSize | dict = "tiny",
    seed: int = 0,
    dtype: str = "float32",
) -> Path:
    """Write a Qwen2-architecture model directory (random weights, trained tokenizer, ChatML
    template) to ``out_dir`` and return its path.  ``size``: a name in :data:`SIZES`, a
    :class:`FixtureSize`, or a dict overriding the tiny size's fields.  ``dtype``: float32 or
    bfloat16 (as the weights are stored)."""
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    dims = _size(size)
    if dtype not in ("float32", "bfloat16"):
        raise ConfigError(f"dtype must be float32 or bfloat16, not {dtype!r}", field="dtype")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tok = train_tokenizer(dims.vocab)
    _save_tokenizer(tok, out, dims.context)
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}

    config = Qwen2Config(
        vocab_size=tok.get_vocab_size(with_added_tokens=True),
        hidden_size=dims.hidden,
        intermediate_size=dims.intermediate,
        num_hidden_layers=dims.layers,
        num_attention_heads=dims.heads,
        num_key_value_heads=dims.kv_heads,
        max_position_embeddings=dims.context,
        rms_norm_eps=1e-6,
        tie_word_embeddings=dims.tie_embeddings,
        use_sliding_window=False,
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=ids[IM_END],
        pad_token_id=ids[ENDOFTEXT],
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config = GenerationConfig(
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=[ids[IM_END], ids[ENDOFTEXT]],
        pad_token_id=ids[ENDOFTEXT],
    )
    model.save_pretrained(str(out), safe_serialization=True)
    (out / "fixture.json").write_text(
        json.dumps(
            {
                "architecture": "Qwen2ForCausalLM",
                "seed": seed,
                "dtype": dtype,
                **asdict(dims),
                "vocab_size": config.vocab_size,
                "parameters": sum(p.numel() for p in model.parameters()),
            },
            indent=2,
        )
        + "\n"
    )
    return out


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m rldata.models.fixture", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the model directory to write")
    ap.add_argument("--size", default="tiny", choices=sorted(SIZES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = ap.parse_args(argv)
    path = make_qwen2_fixture(args.out, size=args.size, seed=args.seed, dtype=args.dtype)
    info = json.loads((path / "fixture.json").read_text())
    print(f"{path}: Qwen2 {args.size}, {info['parameters']:,} parameters, vocab {info['vocab_size']}")


if __name__ == "__main__":
    main()
