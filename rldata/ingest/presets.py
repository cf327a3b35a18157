"""Field mappings for ingest: which source column feeds which ``tasks`` column, and the presets.

A mapping names, for each task field, the source columns to try in order (the first one present in
the file wins).  A name with a dot reaches into a struct column (``reward_model.ground_truth``).
The answer also has a format that says how to pull the final answer out of the column's text:

- ``text``: the value itself (numbers become text).
- ``gsm8k``: the text after the last ``####`` with thousands separators removed (``#### 1,000`` -> ``1000``).
- ``boxed``: the content of the last ``\\boxed{...}`` (braces balanced), as in MATH solutions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rldata.errors import ConfigError, RldataError
from rldata.registry import Registry

__all__ = ["ANSWER_FORMATS", "PRESETS", "Fields", "gsm8k_answer", "last_boxed", "preset"]

ANSWER_FORMATS = ("text", "gsm8k", "boxed")


@dataclass(frozen=True)
class Fields:
    """Source columns for each task field (candidates, first present wins) and the answer format."""

    prompt: tuple[str, ...] = ("prompt",)  # text, or chat messages (list of {role, content})
    messages: tuple[str, ...] = ("messages",)  # chat messages, when the prompt column is plain text
    answer: tuple[tuple[str, str], ...] = (("answer", "text"),)  # (column, answer format)
    source: tuple[str, ...] = ("source",)
    domain: tuple[str, ...] = ("domain",)
    category: tuple[str, ...] = ("category",)
    tests: tuple[str, ...] = ("tests",)
    metadata: tuple[str, ...] = ("metadata",)  # a struct (or JSON text) column merged into metadata
    keep: tuple[tuple[str, str], ...] = ()  # (metadata key, column): mapped columns also kept in metadata
    default_source: str | None = None  # when no source column: this, else the file's stem

    def __post_init__(self):
        for name in ("prompt", "messages", "source", "domain", "category", "tests", "metadata"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(c, str) and c for c in value):
                raise ConfigError(f"Fields.{name} must be a tuple of column names, got {value!r}", field=name)
        if not self.prompt:
            raise ConfigError("Fields.prompt needs at least one column name", field="prompt")
        for column, fmt in self.answer:
            if fmt not in ANSWER_FORMATS:
                raise ConfigError(
                    f"unknown answer format {fmt!r} for column {column!r}; use {ANSWER_FORMATS}",
                    field="answer",
                )

    def with_overrides(
        self,
        *,
        prompt: str | None = None,
        answer: str | None = None,
        answer_format: str | None = None,
        category: str | None = None,
    ) -> Fields:
        """This mapping with single columns replaced (what ``--prompt-field`` etc. do)."""
        out = self
        if prompt:
            out = replace(out, prompt=(prompt,))
        if answer or answer_format:
            if answer:
                # keep the preset's format when the column is one the preset knows (math: solution -> boxed)
                fmt = answer_format or dict(self.answer).get(answer, "text")
                out = replace(out, answer=((answer, fmt),))
            else:
                out = replace(out, answer=tuple((c, answer_format) for c, _ in self.answer))
        if category:
            out = replace(out, category=(category,))
        return out

    def mapped_columns(self) -> set[str]:
        """Plain (undotted) column names this mapping consumes; the rest of a row goes to metadata."""
        names = [*self.prompt, *self.messages, *self.source, *self.domain, *self.category, *self.tests]
        names += [c for c, _ in self.answer] + list(self.metadata)
        return {n for n in names if "." not in n}


def _check_preset(obj: Any, what: str) -> Fields:
    if not isinstance(obj, Fields):
        raise RldataError(f"ingest preset {what} is not an rldata.ingest.presets.Fields")
    return obj


# Presets by name (a Registry: an installed package adds one with an ``rldata.presets`` entry point
# naming a Fields, and a ``module:NAME`` path names one with no registration)
PRESETS: Registry = Registry(
    "preset",
    group="rldata.presets",
    paths=True,
    check=_check_preset,
    error=ConfigError,
    field="preset",
    sort_known=False,
)
for _name, _fields in {
    "default": Fields(),
    # GSM8K: {"question": ..., "answer": "...reasoning...\n#### 72"}; the reasoning stays in metadata.
    "gsm8k": Fields(
        prompt=("question",),
        answer=(("answer", "gsm8k"),),
        keep=(("solution", "answer"),),
        default_source="gsm8k",
    ),
    # veRL parquet: prompt = chat messages, reward_model = {style, ground_truth}, extra_info kept.
    "verl": Fields(
        prompt=("prompt",),
        answer=(("reward_model.ground_truth", "text"),),
        source=("data_source",),
        domain=("ability",),
    ),
    # MATH / MATH-500: problem + solution with \boxed{}; an explicit answer column wins when present.
    "math": Fields(
        prompt=("problem",),
        answer=(("answer", "text"), ("solution", "boxed")),
        category=("type", "subject"),
        keep=(("solution", "solution"),),
        default_source="math",
    ),
}.items():
    PRESETS.register(_name, _fields)


def preset(name: str | None) -> Fields:
    """The field mapping of preset ``name`` (None: the default one); a ConfigError listing them."""
    return PRESETS.resolve(name or "default")


def gsm8k_answer(text: str | None) -> str | None:
    """The final answer of a GSM8K solution: text after the last '####', commas removed."""
    if text is None or "####" not in text:
        return None
    out = text.rsplit("####", 1)[1].strip().replace(",", "")
    return out or None


def last_boxed(text: str | None) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, braces balanced.

    ``\\boxed 5`` (no braces) gives ``5``.  None when there is no box or its braces never close.
    """
    if not text:
        return None
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    i = start + (len("\\boxed") if text.startswith("\\boxed", start) else len("\\fbox"))
    if i < len(text) and text[i].isalpha():  # "\boxedfoo" is another macro, not a box
        return None
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text):
        return None
    if text[i] != "{":  # "\boxed 5": the box holds one token
        end = i
        while end < len(text) and not text[end].isspace() and text[end] not in "$}":
            end += 1
        return text[i:end] or None
    depth = 0
    for j in range(i, len(text)):
        escaped = text[j - 1] == "\\"  # \{ and \} are literal braces, not grouping
        if text[j] == "{" and not escaped:
            depth += 1
        elif text[j] == "}" and not escaped:
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip() or None
    return None
