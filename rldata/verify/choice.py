"""Multiple-choice letters, read when the gold is a choice letter (``C``, ``(C)``).

A statement of a choice, in the completion's (normalized, unbolded) tail:

1. a box holding a letter: ``\\boxed{C}``, ``\\boxed{(C)}``, ``\\boxed{\\text{(C)}}``, ``\\boxed{C) 24}``;
2. after a marker: ``The answer is (C)``, ``Answer: B) 24``, ``the correct option is D.``, ``I choose
   option C``, ``it is (A)`` (an option's label, ``Option A: 5``, is no statement);
3. ``C is correct`` / ``(C) is the answer`` / ``Option C is right``;
4. a letter alone on the last line (``C``, ``(C)``, ``C)``, also ``C) 42``), when nothing above states
   one and no other line starts with a letter (an option list ``A) 12 / B) 24`` is not an answer).

A capital letter counts only as a choice: followed by the end, punctuation, a parenthesis or a
space and what an option's text starts with (a number, ``$``, ``(``, ``because``...), never by a
word, so the article in ``A total of 7 apples`` is no answer, nor the unit in ``100°C``.  Several
letters in one statement joined by a hedge word (``(A) or (B)``) are a hedge.
"""

from __future__ import annotations

import re

__all__ = ["choice_statements"]

Statement = tuple[tuple[int, int], int, list[str]]  # as rldata.verify.extract: (rank, end, answers)

_LETTER = r"(?:\(\s*([A-J])\s*\)|(?<![\w\\(])([A-J])(?=\s*(?:$|[.,;:!)\]]|\n|\s+(?:\(|-|\d|\$|\\|because\b|since\b|as\b|which\b|is\b))))"
_WRAP = r"(?:\\(?:text|textbf|mathrm|mathbf)\s*\{\s*)?"
_MARKER = re.compile(
    r"(?:\banswer\s+(?:is|would\s+be|should\s+be)|\banswer\s*:|答案是|\b(?:correct|right|best)\s+(?:answer|option|choice)"
    r"(?:\s+is)?|\b(?:option|choice)\s+is|\bI\s+(?:choose|pick|select|go\s+with)|\b(?:it\s+is|it's|is)(?=\s*\())"
    rf"\s*:?\s*(?:the\s+)?(?:option|choice)?\s*{_WRAP}{_LETTER}",
    re.IGNORECASE,
)
_IS_CORRECT = re.compile(
    rf"(?:\b(?:option|choice)\s+)?{_LETTER}\s+is\s+(?:the\s+)?(?:correct|right|true|answer|best)\b",
    re.IGNORECASE,
)
_BOX_LETTER = re.compile(rf"\s*{_WRAP}\(?\s*([A-J])\s*\)?\s*\}}?\s*(?:[.:)]\s*.*)?", re.DOTALL)
_LINE_LETTER = re.compile(r"^[ \t]*\(?([A-J])(?:\)|\.|:)?(?:[ \t]+\S.*)?[ \t]*$", re.MULTILINE)
_ALONE = re.compile(r"[ \t]*\(?([A-J])\)?[.:]?[ \t]*")
_HEDGE = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibly|probably|might|could|not\s+sure)\b", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<![A-J])\.(?!\d)|[!?;\n]")


def _letter(m: re.Match) -> str:
    return next(g for g in m.groups()[-2:] if g)


def _sentence_letters(tail: str, start: int) -> list[str]:
    """Every letter in the statement from ``start`` to its sentence end, when a hedge word joins them."""
    end = _SENTENCE_END.search(tail, start)
    sentence = tail[start : end.start() if end else len(tail)]
    letters = [m[1] or m[2] for m in re.finditer(_LETTER, sentence)]
    if len(set(letters)) > 1 and _HEDGE.search(sentence):
        return list(dict.fromkeys(letters))
    return []


def choice_statements(tail: str, boxes: list[tuple[int, int, str]]) -> list[Statement]:
    """Every stated choice in ``tail`` (``boxes``: its boxes as rldata.verify.extract finds them)."""
    out: list[Statement] = []
    for start, end, content in boxes:
        m = _BOX_LETTER.fullmatch(content)
        if m:
            out.append(((0, -start), end, [m[1]]))
    for rule, pattern in enumerate((_MARKER, _IS_CORRECT), 1):
        for m in list(pattern.finditer(tail))[-16:]:
            hedged = _sentence_letters(tail, m.start())
            out.append(((rule, -m.start()), m.end(), hedged or [_letter(m)]))
    if not out:
        lines = [ln for ln in tail.strip().splitlines() if ln.strip()]
        starts = _LINE_LETTER.findall(tail)
        if lines and len(starts) == 1:
            last = lines[-1]
            m = _LINE_LETTER.fullmatch(last)
            if m and (_ALONE.fullmatch(last) or re.match(r"[ \t]*\(?[A-J][).:]", last)):
                out.append(((5, 0), len(tail), [m[1]]))
    return out
