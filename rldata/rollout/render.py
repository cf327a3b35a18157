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

Plain tasks (no environment) go through the same renderer when the job's ``chat_template`` is on
(:func:`resolve_chat_template` turns ``auto`` into on or off for a model): the task's chat messages, or
its prompt as one user turn, with the generation prompt (:meth:`Renderer.plain`), so a chat model is
measured, trained and evaluated on the prompt it sees in deployment, and a TRL or veRL consumer that
applies the same template to the exported messages sees the same ids.

Standard tool calling: ``tools`` (OpenAI function schemas) go to the template as its ``tools``
argument on every render, so the model's own template lays them out.  Messages are kept in the
store's form (``tool_calls`` as ``{id, name, arguments}`` with JSON-text arguments); :func:`chat_form`
turns them into the form chat templates read (``{id, type: function, function: {name, arguments}}``
with the arguments as an object).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rldata.configs.sampling import SamplingSpec
from rldata.envs.tool_parsers import default_parser
from rldata.errors import ConfigError, RldataError

__all__ = [
    "DEFAULT_TEMPLATE",
    "Renderer",
    "chat_form",
    "plain_messages",
    "renderer_for",
    "resolve_chat_template",
]

_OPENINGS_KEPT = 4096
_PROBES = ("12+7=", "What is 2 + 2?")  # prompts a template is tried on (Renderer.templates_plain)

DEFAULT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}"
    "{% elif m['role'] == 'tool' %}<tool>{{ m['content'] }}</tool>"
    "{% else %}{{ m['content'] }}{% endif %}{% endfor %}"
)


def _arguments(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def plain_messages(task: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversation a plain task opens with: its own chat messages (a system turn included) when it
    has them, else its prompt as one user turn."""
    msgs = task.get("messages")
    if msgs is not None and len(msgs) > 0:
        return [{"role": m["role"], "content": m.get("content") or ""} for m in msgs]
    return [{"role": "user", "content": task.get("prompt") or ""}]


def chat_form(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Stored messages as chat templates read them: tool calls in OpenAI's nested form, with their
    arguments as an object (what Qwen's, Llama's and Mistral's templates expect); empty fields left out."""
    out = []
    for m in messages:
        d = {"role": m["role"], "content": m.get("content") or ""}
        if m.get("tool_calls"):
            d["tool_calls"] = [
                {
                    "id": c.get("id"),
                    "type": "function",
                    "function": {"name": c["name"], "arguments": _arguments(c.get("arguments"))},
                }
                for c in m["tool_calls"]
            ]
        if m.get("tool_call_id"):
            d["tool_call_id"] = m["tool_call_id"]
        out.append(d)
    return out


class Renderer:
    """Renders messages with the model's chat template (or :data:`DEFAULT_TEMPLATE`) into ids."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.own_template = bool(getattr(tokenizer, "chat_template", None))  # the model ships one
        self.template = getattr(tokenizer, "chat_template", None) or DEFAULT_TEMPLATE
        self._templates_plain: bool | None = None
        # a task's N episodes open with the same messages: rendered once (the template and the
        # tokenizer are deterministic); cleared when full, so a long run's memory stays bounded
        self._openings: dict[str, tuple[int, ...]] = {}

    @classmethod
    def for_model(cls, path: str) -> Renderer:
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(path))

    @property
    def default_tool_parser(self) -> str | None:
        """The tool-call parser the model's chat template names (None: it lays out no tool calls)."""
        return default_parser(self.template)

    def text(
        self, messages: Sequence[dict], *, generation_prompt: bool, tools: Sequence[dict] | None = None
    ) -> str:
        extra = {"tools": [dict(t) for t in tools]} if tools else {}
        return self.tokenizer.apply_chat_template(
            chat_form(messages),
            tokenize=False,
            add_generation_prompt=generation_prompt,
            chat_template=self.template,
            **extra,
        )

    @property
    def templates_plain(self) -> bool:
        """Whether ``chat_template: auto`` sends this model's plain tasks through its template: it ships
        a chat template, and that template changes a prompt (a user turn rendered with the generation
        prompt is not the raw prompt's ids, as the engine tokenizes raw text).  A template that
        renders a user turn as its bare text (the bundled tiny-arith's) changes nothing, so its
        plain tasks stay raw and keep the params hash they were measured under."""
        if self._templates_plain is None:
            changed = False
            if self.own_template:
                for probe in _PROBES:
                    raw = list(self.tokenizer(probe)["input_ids"])  # as vLLM tokenizes a text prompt
                    if self.opening([{"role": "user", "content": probe}]) != raw:
                        changed = True
                        break
            self._templates_plain = changed
        return self._templates_plain

    def plain(self, task: Mapping[str, Any]) -> list[int]:
        """The prompt ids of a plain task through the template (:func:`plain_messages`)."""
        return self.opening(plain_messages(task))

    def encode(self, text: str) -> list[int]:
        # the template writes bos/eos itself: no special tokens added on top
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def opening(self, messages: Sequence[dict], *, tools: Sequence[dict] | None = None) -> list[int]:
        """The ids of the opening messages, ready for the first assistant turn."""
        key = json.dumps([chat_form(messages), tools], sort_keys=True, default=repr)
        ids = self._openings.get(key)
        if ids is None:
            ids = tuple(self.encode(self.text(messages, generation_prompt=True, tools=tools)))
            if len(self._openings) >= _OPENINGS_KEPT:
                self._openings.clear()
            self._openings[key] = ids
        return list(ids)

    def observation(
        self, history: Sequence[dict], observations: Sequence[dict], *, tools: Sequence[dict] | None = None
    ) -> list[int]:
        """The ids that follow ``history`` (ending with an assistant turn) when ``observations`` come
        in, up to the start of the next assistant turn."""
        before = self.text(history, generation_prompt=False, tools=tools)
        after = self.text([*history, *observations], generation_prompt=True, tools=tools)
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


_RENDERERS: dict[tuple, Renderer] = {}


def renderer_for(model_path: str | Path) -> Renderer:
    """The renderer of the model directory ``model_path`` (its tokenizer loaded once per process; a
    changed tokenizer file loads again)."""
    path = Path(model_path)
    stamp = tuple(
        (f.name, f.stat().st_mtime_ns, f.stat().st_size)
        for f in sorted(path.iterdir())
        if f.is_file() and (f.name.startswith("tokenizer") or f.name.startswith("chat_template"))
    )
    key = (str(path.resolve()), stamp)
    r = _RENDERERS.get(key)
    if r is None:
        if len(_RENDERERS) >= 16:
            _RENDERERS.clear()
        r = _RENDERERS[key] = Renderer.for_model(os.fspath(path))
    return r


def resolve_chat_template(spec: SamplingSpec, renderer: Renderer | str | Path) -> SamplingSpec:
    """``spec`` with ``chat_template`` resolved for a model (``renderer``, or its directory): ``auto``
    becomes ``on`` when the model's template changes a prompt (:attr:`Renderer.templates_plain`), else
    ``off``.  Every job resolves before it samples, so the params hash it stores says which way plain
    tasks were sent.  ``on`` for a model without a template uses :data:`DEFAULT_TEMPLATE`."""
    if spec.chat_template not in ("auto", "on", "off"):
        raise ConfigError(
            f"chat_template must be auto, on or off, got {spec.chat_template!r}", field="chat_template"
        )
    if spec.chat_template != "auto":
        return spec
    if isinstance(renderer, Renderer):
        on = renderer.templates_plain
    else:
        keeps = _keeps_prompts(Path(renderer))
        on = renderer_for(renderer).templates_plain if keeps is None else not keeps
    return dataclasses.replace(spec, chat_template="on" if on else "off")


def _keeps_prompts(path: Path) -> bool | None:
    """Whether a model directory's chat template leaves a prompt as it is, read without loading the
    tokenizer (transformers takes seconds to import, and a job on a raw model needs nothing of it):
    True for no template, or one that renders a user turn with the generation prompt as the bare text
    (after the bos token, which the tokenizer adds to a raw prompt too); None when that cannot be told
    this way (the caller then asks :attr:`Renderer.templates_plain`)."""
    try:
        cfg = json.loads((path / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return None
    template = cfg.get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    jinja = path / "chat_template.jinja"
    if template is None and jinja.is_file():
        template = jinja.read_text()
    if not template:
        return True
    if not isinstance(template, str):
        return None

    def token(v):
        return v.get("content") if isinstance(v, dict) else v

    bos = token(cfg.get("bos_token"))
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def fail(msg):
            raise ValueError(msg)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = fail
        env.filters["tojson"] = json.dumps
        compiled = env.from_string(template)
        for probe in _PROBES:
            text = compiled.render(
                messages=[{"role": "user", "content": probe}],
                add_generation_prompt=True,
                bos_token=bos or "",
                eos_token=token(cfg.get("eos_token")) or "",
            )
            if text not in (probe, f"{bos}{probe}" if bos else probe):
                return None  # it changes the prompt, or may: the tokenizer decides
    except Exception:  # noqa: BLE001 - a template this reading cannot render goes to transformers
        return None
    return True
