"""``reasoning-gym``: score a completion with the task's own reasoning-gym ``score_answer``.

The answer is the content of the ``<answer>...</answer>`` tags (case-insensitive tag names), and
nothing else: no last line, no "The answer is" (the prompt asks for the tags, see
:data:`rldata.gym.INSTRUCTION`).  Tags are read in one linear pass over the whole completion:

- no closed pair (or only empty ones) -> no answer (``extracted`` None, ``reason: no_answer``);
- several pairs with different contents (after stripping) -> ``reason: hedged``, wrong; the same
  content repeated is one answer;
- an opening tag inside an open one is part of the content (``<answer>5 <answer>6</answer>`` states
  ``5 <answer>6``, which no scorer accepts);
- an opening tag left unclosed after a stated answer is a second, unfinished answer: hedged
  (``<answer>5</answer> wait, <answer>6`` cut off by the length limit); alone it is no answer.

Before scoring, the content must not hedge or negate on its own: a word ``or``, ``either``,
``maybe``, ``perhaps``, ``possibly``, ``not``, ``never`` or ``n't`` that the gold answer does not
contain makes it wrong (``reason: hedged``), because some datasets' scorers give full credit to
``"42 or 43"`` or ``"not 42"``; so does a number with commas that are not thousands separators
(``"2,14"``, ``reason: ambiguous``) unless the gold has one, because scorers that drop commas read
it as 214; and a content over :data:`MAX_ANSWER_CHARS` is wrong
(``reason: too_long``) without being scored.  ``rldata ingest --gym`` refuses datasets whose scorer
gives full credit to other wrong answers (see :mod:`rldata.ingest.gym`).

The dataset object is rebuilt from the task's ``metadata`` (dataset name, config, seed) with size
1, as ``rldata ingest --gym`` checked it: ``score_answer`` does not read the size, and some datasets
(``acre``) generate all ``size`` entries when built.  The entry is the stored one; ``passed`` only when ``score_answer`` gives full credit, exactly 1.0,
with the raw score in ``score`` and ``detail.raw_score``.  A score above 1 is wrong (``reason:
score_above_1``): spell_backward's partial credit, a sum of ``1/len`` per matching letter, reaches
1.0000000000000002 for the answer with junk after it.  Missing or corrupt
metadata, a task answer that differs from the stored entry's, a ``score_answer`` that raises or
returns a non-number, or reasoning-gym not installed: an error verdict (``passed=None``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from rldata.errors import RldataError
from rldata.gym import make_dataset, rg_version, stored_entry
from rldata.verify.base import Verdict
from rldata.verify.extract import HEDGE_SEP, NUMBER

__all__ = ["MAX_ANSWER_CHARS", "ReasoningGymVerifier", "guard", "score_entry", "tagged_answers"]

MAX_ANSWER_CHARS = 8192  # longer contents are wrong unscored: a scorer's cost may grow with its input
MAX_ANSWERS = 8  # distinct contents kept (more is a hedge all the same)
_TAG = re.compile(r"<(/?)answer\s*>", re.IGNORECASE)
_HEDGE_WORD = re.compile(r"\b(or|either|maybe|perhaps|possibly|not|never)\b|n't", re.IGNORECASE)


def tagged_answers(text: str | None) -> list[str]:
    """Distinct stripped contents of the closed ``<answer>`` pairs of ``text``, in order (see module doc)."""
    if not text:
        return []
    out: list[str] = []
    opened = None
    for m in _TAG.finditer(str(text)):
        if not m.group(1):
            if opened is None:  # a nested opening tag stays part of the content
                opened = m.end()
            continue
        if opened is None:  # a closing tag with nothing open
            continue
        content = text[opened : m.start()].replace(HEDGE_SEP, " ").strip()
        opened = None
        if content and content not in out:
            out.append(content[: MAX_ANSWER_CHARS + 1])  # the +1 lets check() see it is too long
            if len(out) >= MAX_ANSWERS:
                return out
    if opened is not None and out:  # "<answer>5</answer> ... <answer>6" cut off: a second answer, unfinished
        rest = text[opened : opened + MAX_ANSWER_CHARS + 1].replace(HEDGE_SEP, " ").strip() or "<answer>"
        if rest not in out:
            out.append(rest)
    return out


def guard(answer: str, gold: str | None) -> str | None:
    """Why ``answer`` is wrong before any scoring (``too_long``, ``hedged``), or None."""
    if len(answer) > MAX_ANSWER_CHARS:
        return "too_long"
    gold_words = {m.group().casefold() for m in _HEDGE_WORD.finditer(gold or "")}
    for m in _HEDGE_WORD.finditer(answer):
        if m.group().casefold() not in gold_words:
            return "hedged"
    # "2,14": a list, a decimal comma or a misplaced separator; scorers that drop commas read 214
    if _has_ambiguous_number(answer) and not _has_ambiguous_number(gold or ""):
        return "ambiguous"
    return None


def _has_ambiguous_number(text: str) -> bool:
    return any(m["amb"] is not None for m in NUMBER.finditer(text))


def _wrong(extracted: str | None, reason: str, **more: Any) -> list[Verdict]:
    return [Verdict(False, 0.0, extracted, detail={"reason": reason, **more})]


def score_entry(answer: str, stored, dataset) -> Verdict:
    """One scoring of ``answer`` against a stored entry (the guard first); may raise from the scorer."""
    gold = stored.entry.get("answer")
    reason = guard(answer, None if gold is None else str(gold))
    if reason is not None:
        return _wrong(answer[:200] if reason == "too_long" else answer, reason)[0]
    raw = dataset.score_answer(answer, dict(stored.entry))
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        return Verdict.failure(
            f"score_answer of {stored.dataset!r} returned {raw!r}, not a finite number", extracted=answer
        )
    detail = {"raw_score": float(raw), "dataset": stored.dataset}
    if (
        raw > 1.0
    ):  # spell_backward sums 1/len per matching letter: a prefix match can float to 1.0000000000000002
        return Verdict(False, 0.0, answer, detail={**detail, "reason": "score_above_1"})
    return Verdict(raw == 1.0, max(float(raw), 0.0), answer, detail=detail)


class ReasoningGymVerifier:
    name = "reasoning-gym"
    # "+1": this module's extraction and guard rules; bump it when they change
    version = f"rg{rg_version() or '-none'}+1"
    uses_metadata = True  # the verify plumbing carries the task's metadata to check()
    cheap = True  # score_answer is a string/number compare; it still runs in the killable child

    def prepare(self) -> None:
        """Import reasoning-gym outside any deadline (an import cut by a timeout stays half-done)."""
        try:
            import reasoning_gym  # noqa: F401
        except ImportError:
            pass  # each check reports it

    def extract(self, completion: str | None, task: Mapping[str, Any]) -> str | None:
        found = tagged_answers(completion)
        return HEDGE_SEP.join(found) if found else None

    def check(self, extracted: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        try:
            stored = stored_entry(task.get("metadata"))
            gold = stored.entry.get("answer")
            if task.get("answer") is not None and (gold is None or str(task["answer"]) != str(gold)):
                return [
                    Verdict.failure(
                        "task answer differs from the stored reasoning-gym entry's answer (corrupt metadata)",
                        extracted=extracted,
                    )
                ]
            dataset = make_dataset(
                stored.dataset, stored.config, seed=stored.seed
            )  # size 1: see the module doc
        except RldataError as e:
            return [Verdict.failure(str(e), extracted=extracted)]
        if extracted is None:
            return _wrong(None, "no_answer")
        if HEDGE_SEP in extracted:
            answers = extracted.split(HEDGE_SEP)
            return _wrong(" | ".join(a[:200] for a in answers), "hedged", answers=[a[:200] for a in answers])
        try:
            return [score_entry(extracted, stored, dataset)]
        except Exception as e:  # noqa: BLE001 - a scorer crash is an error verdict, never a pass
            return [
                Verdict.failure(
                    f"score_answer of {stored.dataset!r} raised {type(e).__name__}: {str(e)[:200]}",
                    extracted=extracted[:200],
                )
            ]

    def verify(self, completion: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        return self.check(self.extract(completion, task), task)
