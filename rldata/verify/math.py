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
from rldata.verify.extract import (
    HEDGE_SEP,
    LIST_SEP,
    clean_number,
    extract_answer,
    extract_answers,
    extract_choices,
)
from rldata.verify.numbers import normalize
from rldata.verify.structured import choice_letter, gold_kind

__all__ = ["MAX_ANSWER_CHARS", "MathVerifier", "parse_answer"]

# A trailing percent sign is taken off before parsing (math-verify alone reads "50\\%" as 0.5 but "50%"
# as 50); the comparison then reads the percent (see _percent_equal).
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
    """The gold's final answer: a plain number, a GSM8K solution ("... #### 18"), or LaTeX; read as
    answers are (``2 1/2`` is 5/2, ``0.\\overline{3}`` 1/3)."""
    if clean_number(gold) is None and ("####" in gold or "\\boxed" in gold):
        return extract_answer(gold) or gold
    return normalize(gold, math=True).strip()


def _unit_fraction(parsed: tuple) -> bool:
    """Whether a parsed value is a real number in [0, 1] that is not whole (0.25, 1/4, \\frac{3}{4})."""
    expr = parsed[0] if parsed else None
    if not getattr(expr, "is_number", False) or not getattr(expr, "is_real", False):
        return False
    try:
        x = float(expr)
    except (TypeError, ValueError):
        return False
    return 0.0 <= x <= 1.0 and x != round(x)


def _percent_equal(gold: str, gold_parsed: tuple, answer: str, pred: tuple) -> bool:
    """Equality with percents read as percents.  When one side is a percent P% and the other a plain
    value v: v is compared with P/100 when v is a fraction or decimal in [0, 1] that is not whole
    (25% = 0.25 = 1/4; 0.25% is not 1/4), else with P (25% = the GSM8K gold 25; 5% is not 50)."""
    verify = _mv().verify
    gold_pct, answer_pct = _PERCENT.search(gold) is not None, _PERCENT.search(answer) is not None
    if gold_pct != answer_pct:
        plain, percent = (pred, gold_parsed) if gold_pct else (gold_parsed, pred)
        if _unit_fraction(plain) and getattr(percent[0], "is_number", False):
            return bool(verify(list(plain), [percent[0] / 100], timeout_seconds=None))
    return bool(verify(list(gold_parsed), list(pred), timeout_seconds=None))


def _gold_set(parsed: tuple) -> bool:
    from sympy import FiniteSet

    return bool(parsed) and isinstance(parsed[0], FiniteSet) and len(parsed[0]) > 1


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
    version = f"math-verify-{_pkg_version('math-verify')}+rldata5"

    def prepare(self) -> None:
        """Import and warm math-verify (rldata.verify.run calls this outside any deadline)."""
        mv = _mv()
        mv.verify(list(parse_answer("\\frac{1}{2}")), list(parse_answer("0.5")), timeout_seconds=None)

    def extract(self, completion: str | None, task: Mapping[str, Any]) -> str | None:
        """The answer; several stated answers come joined by :data:`HEDGE_SEP` for :meth:`check`.

        The gold's kind (not its value) picks how answers are read: option letters when it is a
        choice letter, ``x = 3, y = -1`` as ``(3, -1)`` when it is a tuple."""
        prompt = task.get("prompt")
        prompt = prompt if isinstance(prompt, str) else None
        kind = gold_kind(task.get("answer"))
        if kind == "choice":
            found = extract_choices(completion, prompt=prompt)
        else:
            found = extract_answers(completion, prompt=prompt, tuples=kind == "tuple")
        return HEDGE_SEP.join(found) if found else None

    def check(self, extracted: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        gold = task.get("answer")
        if gold is None or not str(gold).strip():
            return [Verdict.failure("task has no gold answer", extracted=extracted)]
        if extracted is None:  # a wrong answer, not a verifier error
            return [Verdict(False, 0.0, None, detail={"reason": "no_answer"})]
        if len(extracted) > MAX_ANSWER_CHARS:
            return [Verdict(False, 0.0, extracted[:MAX_ANSWER_CHARS], detail={"reason": "answer_too_long"})]
        letter = choice_letter(str(gold))
        if letter is not None:  # a choice: the stated letter(s), compared as letters
            return [_choice_verdict(extracted.split(HEDGE_SEP), letter)]
        gold_text = _gold_text(str(gold).strip())
        gold_parsed = parse_answer(gold_text)
        if not gold_parsed:
            return [Verdict.failure(f"gold answer {str(gold)[:80]!r} does not parse", extracted=extracted)]
        answers = extracted.split(HEDGE_SEP)
        if not _gold_set(gold_parsed):  # a list ("3 and 7") answers a set; against a value it hedges
            answers = list(dict.fromkeys(x for a in answers for x in a.split(LIST_SEP)))
        answers = [a.replace(LIST_SEP, ", ") for a in answers]
        preds = [parse_answer(a) for a in answers]
        if len(answers) > 1 and not _all_same(preds):
            shown = " | ".join(answers)[:MAX_ANSWER_CHARS]
            return [Verdict(False, 0.0, shown, detail={"reason": "hedged", "answers": answers})]
        extracted, pred = answers[0], preds[0]
        if not pred:
            return [Verdict(False, 0.0, extracted, detail={"reason": "unparseable"})]
        ok = _percent_equal(gold_text, gold_parsed, extracted, pred)
        return [Verdict(ok, 1.0 if ok else 0.0, extracted)]

    def verify(self, completion: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        return self.check(self.extract(completion, task), task)


def _choice_verdict(letters: list[str], gold: str) -> Verdict:
    if len(set(letters)) > 1:
        return Verdict(False, 0.0, " | ".join(letters), detail={"reason": "hedged", "answers": letters})
    ok = letters[0] == gold
    return Verdict(ok, 1.0 if ok else 0.0, letters[0])
