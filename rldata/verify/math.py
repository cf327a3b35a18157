"""Math answers: extract the final answer, then compare it to the gold with math-verify.

math-verify (sympy-based) does the parsing and the equivalence (``0.5`` == ``1/2`` ==
``\\frac{1}{2}``); rldata only decides what text to hand it.  Its own signal-based timeouts are
turned off (they fail outside the main thread and turn a timeout into a silent ``False``): the
caller bounds the whole call (:mod:`rldata.verify.run`): ``verify_many`` and ``verify_on_ray`` run
checks in a killable child process, because some inputs (``9^{9^{9^{9}}}``) get stuck in one C call
that no in-process timeout can interrupt.  A timeout or a crash becomes an error verdict.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import version as _pkg_version
from typing import Any

from rldata.verify.base import Verdict
from rldata.verify.extract import HEDGE_SEP, clean_number, extract_answer, extract_answers

__all__ = ["MAX_ANSWER_CHARS", "MathVerifier", "parse_answer"]

# A trailing percent sign means nothing to the comparison: "50%", "50\\%" and "50 percent" are all
# 50, on the gold's side as on the answer's (math-verify alone reads "50\\%" as 0.5 but "50%" as 50).
_PERCENT = re.compile(r"\s*(?:\\%|%|\\text\{\s*percent\s*\}|percent)\s*\$?\s*\.?\s*$")

MAX_ANSWER_CHARS = 2000  # longer "answers" are not answers; parsing them only burns the time budget


class _NoTimeoutWarning(logging.Filter):
    """math-verify warns once that its timeouts are off; here that is deliberate (see module doc)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_NoTimeoutWarning())


@lru_cache(maxsize=1)
def _mv():
    """math-verify, imported on first use (it pulls in sympy: ~1 s)."""
    import math_verify

    return math_verify


@lru_cache(maxsize=16384)
def parse_answer(text: str) -> tuple:
    """math-verify's parse of one answer string (a number, or LaTeX without delimiters).

    Cached: a job sees the same gold and the same wrong answers over and over.  Empty tuple when
    nothing parses.
    """
    mv = _mv()
    text = _PERCENT.sub("", text) or text
    num = clean_number(text)
    if num is not None:
        return tuple(mv.parse(num, extraction_config=[mv.ExprExtractionConfig()], parsing_timeout=None))
    configs = [mv.LatexExtractionConfig(), mv.ExprExtractionConfig()]
    inner = text.strip().strip("$").strip()
    return tuple(mv.parse(f"${inner}$", extraction_config=configs, parsing_timeout=None))


def _gold_text(gold: str) -> str:
    """The gold's final answer: a plain number, a GSM8K solution ("... #### 18"), or LaTeX."""
    if clean_number(gold) is None and ("####" in gold or "\\boxed" in gold):
        return extract_answer(gold) or gold
    return gold


def _all_same(preds: list[tuple]) -> bool:
    """Whether several stated answers are one answer restated ("0.5" and "\\frac{1}{2}"): when in
    doubt (one does not parse), they are not."""
    first = preds[0]
    if not first:
        return False
    verify = _mv().verify
    return all(
        p
        and verify(list(first), list(p), timeout_seconds=None)
        and verify(list(p), list(first), timeout_seconds=None)
        for p in preds[1:]
    )


class MathVerifier:
    """``passed`` when the extracted answer is equivalent to ``task["answer"]`` under math-verify."""

    name = "math"
    cheap = True  # well under a millisecond per distinct answer: checked in the driver, not a Ray task
    # Bump the +rldataN suffix whenever extraction or gold handling changes what passes.
    version = f"math-verify-{_pkg_version('math-verify')}+rldata4"

    def prepare(self) -> None:
        """Import and warm math-verify (rldata.verify.run calls this outside any deadline)."""
        mv = _mv()
        mv.verify(list(parse_answer("\\frac{1}{2}")), list(parse_answer("0.5")), timeout_seconds=None)

    def extract(self, completion: str | None, task: Mapping[str, Any]) -> str | None:
        """The answer; several stated answers come joined by :data:`HEDGE_SEP` for :meth:`check`."""
        prompt = task.get("prompt")
        found = extract_answers(completion, prompt=prompt if isinstance(prompt, str) else None)
        return HEDGE_SEP.join(found) if found else None

    def check(self, extracted: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        gold = task.get("answer")
        if gold is None or not str(gold).strip():
            return [Verdict.failure("task has no gold answer", extracted=extracted)]
        if extracted is None:  # a wrong answer, not a verifier error
            return [Verdict(False, 0.0, None, detail={"reason": "no_answer"})]
        if len(extracted) > MAX_ANSWER_CHARS:
            return [Verdict(False, 0.0, extracted[:MAX_ANSWER_CHARS], detail={"reason": "answer_too_long"})]
        gold_parsed = parse_answer(_gold_text(str(gold).strip()))
        if not gold_parsed:
            return [Verdict.failure(f"gold answer {str(gold)[:80]!r} does not parse", extracted=extracted)]
        answers = extracted.split(HEDGE_SEP)
        preds = [parse_answer(a) for a in answers]
        if len(answers) > 1 and not _all_same(preds):
            shown = " | ".join(answers)[:MAX_ANSWER_CHARS]
            return [Verdict(False, 0.0, shown, detail={"reason": "hedged", "answers": answers})]
        extracted, pred = answers[0], preds[0]
        if not pred:
            return [Verdict(False, 0.0, extracted, detail={"reason": "unparseable"})]
        ok = bool(_mv().verify(list(gold_parsed), list(pred), timeout_seconds=None))
        return [Verdict(ok, 1.0 if ok else 0.0, extracted)]

    def verify(self, completion: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        return self.check(self.extract(completion, task), task)
