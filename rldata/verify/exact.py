"""Text answers: exact match after normalization, and regex match.

Both look at the answer the completion states ("The answer is Paris.", "Answer: Paris",
``\\boxed{Paris}``) when it states one, else at the whole completion.  Several different stated
answers ("Answer: Paris" ... "\\boxed{London}") are a hedge: a wrong answer with ``reason: hedged``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.metadata import version as _pkg_version
from typing import Any

from rldata.verify.base import Verdict
from rldata.verify.extract import HEDGE_SEP, TAIL_CHARS, extract_answers

__all__ = ["ExactVerifier", "RegexVerifier", "normalize_text"]

_WS = re.compile(r"\s+")


def normalize_text(s: str) -> str:
    """Strip, casefold, collapse whitespace runs to one space."""
    return _WS.sub(" ", s.strip()).casefold()


def _candidate(completion: str | None, norm=lambda s: s) -> str | None:
    """The stated answer, else the whole completion (its last TAIL_CHARS), stripped; None if empty.

    Several stated answers that differ after ``norm`` come joined by HEDGE_SEP (see :func:`_hedged`).
    """
    if not completion:
        return None
    stated: list[str] = []
    for a in extract_answers(completion, numeric=False):
        if norm(a) not in stated:
            stated.append(norm(a))
    if stated:
        return HEDGE_SEP.join(stated)
    text = completion[-TAIL_CHARS:].replace(HEDGE_SEP, " ").strip()
    return norm(text) or None


def _hedged(extracted: str) -> Verdict | None:
    if HEDGE_SEP not in extracted:
        return None
    answers = extracted.split(HEDGE_SEP)
    return Verdict(False, 0.0, " | ".join(answers), detail={"reason": "hedged", "answers": answers})


class ExactVerifier:
    """``passed`` when the normalized answer equals the normalized ``task["answer"]``."""

    name = "exact"
    version = "rldata2"
    in_process = True  # string compares cannot hang: no child process needed
    cheap = True  # verify_on_ray checks it in the driver, never in a Ray task

    def extract(self, completion: str | None, task: Mapping[str, Any]) -> str | None:
        return _candidate(completion, normalize_text)

    def check(self, extracted: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        gold = task.get("answer")
        if gold is None:
            return [Verdict.failure("task has no gold answer", extracted=extracted)]
        if extracted is None:
            return [Verdict(False, 0.0, None, detail={"reason": "no_answer"})]
        hedge = _hedged(extracted)
        if hedge is not None:
            return [hedge]
        ok = extracted == normalize_text(str(gold))
        return [Verdict(ok, 1.0 if ok else 0.0, extracted)]

    def verify(self, completion: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        return self.check(self.extract(completion, task), task)


class RegexVerifier:
    """``passed`` when ``task["answer"]``, a regex, fully matches the stated answer (or completion).

    Uses the ``regex`` package for its match timeout: a catastrophic pattern such as ``(a+)+b``
    runs inside one C call that no signal can interrupt.
    """

    name = "regex"
    version = f"regex-{_pkg_version('regex')}+rldata2"
    match_timeout_s = 2.0
    in_process = True  # the regex engine's own timeout bounds the match
    cheap = True

    def extract(self, completion: str | None, task: Mapping[str, Any]) -> str | None:
        return _candidate(completion)

    def check(self, extracted: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        import regex

        pattern = task.get("answer")
        if pattern is None:
            return [Verdict.failure("task has no answer pattern", extracted=extracted)]
        try:
            compiled = regex.compile(str(pattern), flags=regex.VERSION0)
        except (regex.error, ValueError, OverflowError) as e:
            return [Verdict.failure(f"bad regex {str(pattern)[:80]!r}: {e}", extracted=extracted)]
        if extracted is None:
            return [Verdict(False, 0.0, None, detail={"reason": "no_answer"})]
        hedge = _hedged(extracted)
        if hedge is not None:
            return [hedge]
        try:
            ok = compiled.fullmatch(extracted, timeout=self.match_timeout_s) is not None
        except TimeoutError:
            return [
                Verdict.failure(f"timeout: regex match ran past {self.match_timeout_s}s", extracted=extracted)
            ]
        return [Verdict(ok, 1.0 if ok else 0.0, extracted)]

    def verify(self, completion: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        return self.check(self.extract(completion, task), task)
