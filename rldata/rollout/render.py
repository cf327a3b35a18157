"""Conversations to token ids, for episodes driven by token ids (never re-tokenized text).

An episode's token sequence is built incrementally: the opening messages are rendered once; each
assistant turn appends exactly the ids the engine generated (ending with its end-of-turn token);
each batch of environment observations appends the ids of the text the chat template puts between
the last assistant turn and the next one.  That delta is found by rendering the conversation with
and without the observations and taking the suffix, so any chat template works, and the learner
trains on the very tokens the engine saw.

Models without a chat template (the bundled tiny model before it had one, plain base models) get
:data:`DEFAULT_TEMPLATE`: the bos token, then system and user text as is, assistant text followed
by the eos token, tool results as ``<tool>...</tool>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rldata.errors import RldataError

__all__ = ["DEFAULT_TEMPLATE", "Renderer"]

DEFAULT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}"
    "{% elif m['role'] == 'tool' %}<tool>{{ m['content'] }}</tool>"
    "{% else %}{{ m['content'] }}{% endif %}{% endfor %}"
)


class Renderer:
    """Renders messages with the model's chat template (or :data:`DEFAULT_TEMPLATE`) into ids."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.template = getattr(tokenizer, "chat_template", None) or DEFAULT_TEMPLATE

    @classmethod
    def for_model(cls, path: str) -> Renderer:
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(path))

    def text(self, messages: Sequence[dict], *, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            [dict(m) for m in messages],
            tokenize=False,
            add_generation_prompt=generation_prompt,
            chat_template=self.template,
        )

    def encode(self, text: str) -> list[int]:
        # the template writes bos/eos itself: no special tokens added on top
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def opening(self, messages: Sequence[dict]) -> list[int]:
        """The ids of the opening messages, ready for the first assistant turn."""
        return self.encode(self.text(messages, generation_prompt=True))

    def observation(self, history: Sequence[dict], observations: Sequence[dict]) -> list[int]:
        """The ids that follow ``history`` (ending with an assistant turn) when ``observations`` come
        in, up to the start of the next assistant turn."""
        before = self.text(history, generation_prompt=False)
        after = self.text([*history, *observations], generation_prompt=True)
        if not after.startswith(before):
            raise RldataError(
                "the chat template renders a conversation differently once observations follow: "
                "episodes need a template whose earlier turns stay as they were"
            )
        # The engine's turn ends at the eos token; what the template writes after it (ChatML: a
        # newline after <|im_end|>) belongs in front of the observation, or the episode's ids would
        # differ from the conversation the model sees rendered at inference.
        return self.encode(self._after_last_eos(before) + after[len(before) :])

    def _after_last_eos(self, text: str) -> str:
        eos = getattr(self.tokenizer, "eos_token", None)
        i = text.rfind(eos) if eos else -1
        return text[i + len(eos) :] if i >= 0 else ""
