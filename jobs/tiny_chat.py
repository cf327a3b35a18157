"""The ChatML format of the bundled chat model ``tiny-arith-chat``: tokenizer, chat template with
``tools``, Hermes/Qwen tool calls, and its training conversations.

    python -m rldata.jobs.pretrain_tiny --format chatml --out sample_data/models/tiny-arith-chat

The model is a character-level Llama like ``tiny-arith``, but it speaks the way Qwen chat models do,
so the standard tool-call path (``calculator-tools``, the ``hermes`` parser, ``tool_calls`` with ids)
is what it exercises:

- turns are ``<|im_start|>ROLE\\nCONTENT<|im_end|>\\n``; a generation prompt is
  ``<|im_start|>assistant\\n`` and the model's turn ends at ``<|im_end|>`` (the eos);
- ``tools=[...]`` puts a system turn first that lists each tool as ``name(param,...)`` inside
  ``<tools></tools>`` (compact: the model has 256 positions);
- a call is ``<tool_call>\\n{"name": "calculate", "arguments": {"expression": "37*8+5"}}\\n</tool_call>``;
- tool results go back in a user turn as ``<tool_response>\\nRESULT\\n</tool_response>``.

Training conversations (:data:`KINDS`): ``raw``, the bare prompt ``12+7=`` then ``19<|im_end|>`` (what
single-turn sampling and training send: a task without an environment is not templated); ``plain``, a
ChatML user turn without tools; ``direct``, tools advertised and answered directly; ``call``, tools
advertised and ``calculate`` called, whatever the problem.

Tokens: one per character (digits, operators, the JSON punctuation, lowercase letters), plus added
tokens for the ChatML markers, the role names, the tool tags and the fixed JSON words of a
calculator call, so an episode stays short.  The tool tags and JSON words are added tokens that are
*not* special: vLLM decodes with ``skip_special_tokens=True``, and the parser must see them.
"""

from __future__ import annotations

import random

from rldata.envs.calculator import evaluate, format_number
from rldata.models.fixture import TOOL_RESPONSE_TURN

__all__ = [
    "CHARS",
    "CHAT_TEMPLATE",
    "EOS_ID",
    "KINDS",
    "PAD_ID",
    "SPECIALS",
    "TOOL",
    "WORDS",
    "build_char_tokenizer",
    "build_tokenizer",
    "conversation",
    "encode_conversation",
    "example_stream",
    "vocab_size",
]

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>")  # ids 0..3
PAD_ID, IM_START_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
# digits and operators first (the arithmetic), then what JSON and tool names need
CHARS = '0123456789+-*()= \n"{}:,_.abcdefghijklmnopqrstuvwxyz'
# Added, not special.  Longest match wins where one contains another ({"expression": " holds no
# other word whole, but "calculate" and "expression" are words of their own for the tools list).
WORDS = (
    "system",
    "user",
    "assistant",
    "<tools>",
    "</tools>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    '{"name": "',
    '", "arguments": ',
    '{"expression": "',
    '"}}',
    "calculate",
    "expression",
)
KINDS = ("raw", "plain", "direct", "call")
# the calculator as the chat template's tools argument receives it (rldata.envs.calculator.calculate)
TOOL = {
    "type": "function",
    "function": {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression and return its value.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}

# ChatML as the Qwen family lays it out, with a compact tools list.  An assistant turn's text, then
# each call on lines of its own; consecutive tool messages share one user turn.
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n' }}{%- endif %}"
    "{{- '<tools>' }}"
    "{%- for tool in tools %}{%- set fn = tool['function'] if tool.get('function') else tool %}"
    "{{- fn['name'] + '(' + ((fn.get('parameters') or {}).get('properties') or {}).keys() | join(',') + ')' }}"
    "{%- endfor %}"
    "{{- '</tools><|im_end|>\\n' }}"
    "{%- elif messages and messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' and loop.first %}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' + (message['content'] or '') }}"
    "{%- for call in message.get('tool_calls') or [] %}"
    "{%- set fn = call['function'] if call.get('function') else call %}"
    "{%- if message['content'] or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + fn['name'] + '\", \"arguments\": ' }}"
    "{%- if fn['arguments'] is string %}{{- fn['arguments'] }}{%- else %}{{- fn['arguments'] | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}" + TOOL_RESPONSE_TURN + "{%- elif message['role'] in ['system', 'user'] %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- raise_exception('unknown role: ' + message['role']) }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def vocab_size() -> int:
    return len(SPECIALS) + len(CHARS) + len(WORDS)


def build_char_tokenizer():
    """The ``tokenizers.Tokenizer``: one token per character, the added words matched whole first,
    nothing prepended (as in Qwen, no bos), ``decoders.Fuse`` so digits decode without spaces."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(SPECIALS + tuple(CHARS) + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(SPECIALS))
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in WORDS])
    return tok


def build_tokenizer(context: int):
    """The transformers wrapper that ``save_pretrained`` writes for ``AutoTokenizer`` and vLLM."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=build_char_tokenizer(),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        model_max_length=context,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
    )


def conversation(prompt: str, answer: str, kind: str) -> list[dict]:
    """The messages of one training example of ``kind`` (``raw`` is the bare prompt, no template)."""
    if kind == "raw":
        return [{"role": "raw", "content": prompt}, {"role": "assistant", "content": answer}]
    user = {"role": "user", "content": prompt}
    if kind == "plain":
        return [user, {"role": "assistant", "content": answer}]
    if kind == "direct":
        return [user, {"role": "assistant", "content": answer}]
    if kind == "call":
        expr = prompt.removesuffix("=")
        call = {"id": "c00000000", "name": "calculate", "arguments": {"expression": expr}}
        return [
            user,
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": format_number(evaluate(expr)), "tool_call_id": call["id"]},
            {"role": "assistant", "content": answer},
        ]
    raise ValueError(f"unknown conversation kind {kind!r}; known: {', '.join(KINDS)}")


def tools_for(kind: str) -> list[dict] | None:
    """The ``tools`` argument a conversation of ``kind`` is rendered with."""
    return [TOOL] if kind in ("direct", "call") else None


_TOK = None


def _pieces(text: str) -> list[int]:
    global _TOK
    if _TOK is None:
        _TOK = build_char_tokenizer()
    ids = _TOK.encode(text, add_special_tokens=False).ids
    if UNK_ID in ids:
        raise ValueError(f"text {text!r} has characters outside the vocabulary")
    return ids


def _call_text(call: dict) -> str:
    import json

    args = call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"])
    return f'<tool_call>\n{{"name": "{call["name"]}", "arguments": {args}}}\n</tool_call>'


def encode_conversation(messages: list[dict], tools: list[dict] | None = None) -> tuple[list[int], list[int]]:
    """(ids, labels) of the template's rendering; labels are -100 except on what the model writes:
    an assistant turn's text and calls and its closing ``<|im_end|>``, never the newline after it.

    Encoded piece by piece, so each token knows whose it is; the ids equal the tokenizer's encoding
    of ``apply_chat_template(messages, tools=tools)`` (a test checks this).  A ``raw`` message is
    the bare prompt (single-turn sampling without a template).
    """
    ids: list[int] = []
    labels: list[int] = []

    def put(text: str, learn: bool, tail: list[int] = ()):
        part = _pieces(text) + list(tail)
        ids.extend(part)
        labels.extend(part if learn else [-100] * len(part))

    if tools:
        names = "".join(
            f"{t['function']['name']}({','.join(t['function']['parameters']['properties'])})" for t in tools
        )
        put(f"<|im_start|>system\n<tools>{names}</tools><|im_end|>\n", False)
    prev = None
    for m in messages:
        role, content = m["role"], str(m.get("content") or "")
        if role == "raw":
            put(content, False)
        elif role == "assistant":
            if prev != "raw":
                put("<|im_start|>assistant\n", False)
            calls = [_call_text(c) for c in m.get("tool_calls") or []]
            put(content + ("\n" if content and calls else "") + "\n".join(calls), True, [EOS_ID])
            if prev != "raw":
                put("\n", False)
        elif role == "tool":  # one result per turn here: the calculator answers one call
            if prev == "tool":
                raise ValueError("consecutive tool messages: the training conversations have one")
            put(f"<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n", False)
        elif role in ("system", "user"):
            put(f"<|im_start|>{role}\n{content}<|im_end|>\n", False)
        else:
            raise ValueError(f"unknown role {role!r}")
        prev = role
    return ids, labels


def example_stream(cfg, problems):
    """Endless (ids, labels) examples from ``problems`` ((prompt, answer) pairs) for a
    :class:`~rldata.jobs.pretrain_tiny.TrainConfig` of format ``chatml``.

    The kinds come from a generator of their own, so the problems are the same for any mix:
    ``raw_share`` bare prompts, ``plain_share`` chat turns without tools, and of the rest (tools
    advertised) ``tool_share`` call the calculator whatever the problem.
    """
    rng = random.Random(f"format:{cfg.seed}")
    for prompt, answer in problems:
        r = rng.random()
        if r < cfg.raw_share:
            kind = "raw"
        elif r < cfg.raw_share + cfg.plain_share:
            kind = "plain"
        else:
            kind = "call" if rng.random() < cfg.tool_share else "direct"
        yield encode_conversation(conversation(prompt, answer, kind), tools_for(kind))
