"""What surrounds a final answer: alternatives offered beside it, explanations after it, boxes
before it, and a retraction that leaves no answer (the math path of rldata.verify.extract).

- :func:`split_parenthetical`: a prose parenthetical ending the text (``24 tiles. (The room is 4 by
  6 feet.)``, ``3 (since 3 < 7)``) is an explanation, dropped before the answer is read; one that
  offers another number under a hedge or condition (``(or possibly 7 if ...)``) is an alternative.
- :func:`conditional_alternatives`: numbers offered beside the final answer under a condition or
  hedge make it a hedge: ``12 if the boxes are identical and 15 if ...``, ``The answer is 1.
  However, if we count the empty set, it would be 2``, ``20, assuming ...; otherwise 18``.
- :func:`intermediate_boxes`: boxes before a final box that concludes (``so x^2 = \\boxed{25}``,
  ``Final answer: \\boxed{42}``) are intermediate results when no hedge word sits among them.
- :func:`retracted`: after a retraction (``Wait``, ``Actually``, ``I made a mistake``) with no new
  answer, a text that stops mid-sentence or declares the old answer wrong has no answer.
- :func:`rate_start`: ``150 miles in 3 hours at 50 mph`` states 150: a number in a trailing rate or
  time phrase (``in 3 hours``, ``at 50 mph``, ``, averaging 24 km/h``) is not the answer.

None of these looks at the gold.
"""

from __future__ import annotations

import re

from rldata.verify.numbers import NUMBER, canon_at

__all__ = [
    "conditional_alternatives",
    "intermediate_boxes",
    "rate_start",
    "retracted",
    "says_wrong",
    "split_parenthetical",
]

_STRONG = (
    r"would|could|might|otherwise|else|in\s+which\s+case|or|alternatively|perhaps|maybe|possibly|instead"
    r"|unless|whereas"
)
_STRONG_CUE = re.compile(rf"\b(?:{_STRONG})\b", re.IGNORECASE)
# After the answer: a clause that says what the answer would be otherwise ("it would be 2", "in which
# case it is 6"), or a number right after "or" / "perhaps" / "otherwise" ("or possibly 7").
_FAR_CUE = re.compile(r"\b(?:would|could|might|in\s+which\s+case|unless|whereas)\b", re.IGNORECASE)
_NEAR_CUE = re.compile(
    r"(?<![\d\s])(?<!\d\s)\s*\b(?:or|else|otherwise|alternatively|perhaps|maybe|possibly|instead)\b(?:\s+[A-Za-z']+){0,3}\s*[$\\]*\s*$",
    re.IGNORECASE,
)
_WEAK_CUE = re.compile(r"\b(?:if|when|assuming|without|with|depending)\b", re.IGNORECASE)
_RESULT_BEFORE = re.compile(
    r"\b(?:is|are|be|'s|get|gets|got|give|gives|becomes?|equals?|have|has)\s*\$?\s*$", re.IGNORECASE
)
_CONDITION_AFTER = re.compile(
    r"^(?:\s*[^\s\d.,;:!?()]+){0,3}?\s*,?\s*\b(?:if|when|unless|assuming|provided)\b", re.IGNORECASE
)
_BEFORE_CUE = re.compile(
    r"\b(?:otherwise|else|or|without|whereas|instead|in\s+which\s+case|alternatively|would|if\s+not)\b",
    re.IGNORECASE,
)
_OPERATOR_NEAR = re.compile(r"(?:[-+*/×÷=]|\\times|\\cdot)\s*\$?\s*$")  # an operand, not a stated case
_OPERATOR_NEAR_AFTER = re.compile(r"\s*\$?\s*(?:[-+*/×÷=]|\\times|\\cdot)")
_PIECE_END = re.compile(r"\.(?!\d)|[!?;\n]")
_SENTENCE_END = re.compile(r"\.(?!\d)|[!?\n]")


def _last_number(s: str) -> re.Match | None:
    last = None
    for last in NUMBER.finditer(s):
        pass
    return last


def _value(m: re.Match) -> str:
    return canon_at(m, m.string)


def conditional_alternatives(tail: str, start: int, end: int) -> list[str]:
    """Numbers offered beside the answer found at ``tail[start:end]`` (see the module doc)."""
    out: list[str] = []
    pos = end
    for _ in range(6):  # the pieces after the answer: the rest of its sentence, then the next ones
        piece_end = _PIECE_END.search(tail, pos)
        piece = tail[pos : piece_end.start() if piece_end else len(tail)]
        n = _last_number(piece)
        if n is not None:
            before = piece[: n.start()]
            near = _NEAR_CUE.search(before)
            if (
                near
                or _FAR_CUE.search(before)
                or (_WEAK_CUE.search(before) and _RESULT_BEFORE.search(before))
            ):
                out.append(_value(n))
        if piece_end is None:
            break
        pos = piece_end.end()
    sentence_start = max(0, start - 400)
    for m in _SENTENCE_END.finditer(tail, sentence_start, start):
        sentence_start = m.end()
    before = tail[sentence_start:start]
    clause = re.split(r"[;,]", before)[-1]
    if _BEFORE_CUE.search(clause):  # "20 stickers, assuming ...; otherwise 18": 20 is the other case
        earlier = before[: len(before) - len(clause)]
        for n in NUMBER.finditer(earlier):
            if not (
                _OPERATOR_NEAR.search(earlier[: n.start()]) or _OPERATOR_NEAR_AFTER.match(earlier, n.end())
            ):
                out.append(_value(n))
    if _CONDITION_AFTER.match(tail[end : end + 60]):  # "12 if ..., 15 if ...": conditional answers
        for m in NUMBER.finditer(before):
            if _CONDITION_AFTER.match(before[m.end() :]):
                out.append(_value(m))
    return out


# ---- a trailing parenthetical -------------------------------------------------------------------
_TRAILING_PAREN = re.compile(r"(?<=[\w.%$}])\s*\(([^()]{1,300})\)\s*[.!]?\s*$")
_PROSE = re.compile(r"[A-Za-z]{3,}")
_STATES = re.compile(
    r"\b(?:answer|wait|actually|oops|correction|mistake|wrong|incorrect|no)\b|\b(?:re-?check|recomput|recount)",
    re.IGNORECASE,
)


def split_parenthetical(tail: str) -> tuple[str, list[str]]:
    """``tail`` without a prose parenthetical that ends it, and the alternatives it offers (numbers in
    it under a hedge or condition: ``(or possibly 7 if ...)``); ``tail`` as is when it ends otherwise."""
    if not tail.rstrip().rstrip(".!").rstrip().endswith(")"):
        return tail, []
    m = _TRAILING_PAREN.search(tail, max(0, len(tail) - 400))
    if m is None or not _PROSE.search(m[1]) or "\\" in m[1] or _STATES.search(m[1]):
        return tail, []  # "(Wait, actually it is 8.)", "(answer: 8)": read as written
    inner = m[1]
    stripped = tail[: m.start()].rstrip()
    ending = "." if m.group().rstrip().endswith((".", "!")) or inner.rstrip().endswith(".") else ""
    alts = []
    if _STRONG_CUE.search(inner) or _WEAK_CUE.search(inner):
        alts = [canon_at(n, inner) for n in NUMBER.finditer(inner)]
    return stripped + ending if not stripped.endswith((".", "!")) else stripped, alts


# ---- intermediate boxes -------------------------------------------------------------------------
_CONCLUDES = re.compile(
    r"\b(?:so|therefore|thus|hence|final|finally|total|in\s+all|altogether|overall|answer)\b[^.!?\n]*$",
    re.IGNORECASE,
)
_ARITHMETIC = re.compile(r"[-+*/×÷]|\\times|\\cdot|\\div")
_BOX_HEDGE = re.compile(
    rf"\b(?:{_STRONG}|either|if|though|although|also|too|not\s+sure|then\s+again|but)\b|\?", re.IGNORECASE
)


def intermediate_boxes(tail: str, boxes: list[tuple[int, int, str]]) -> int:
    """How many of ``boxes`` (start, end, content; in order) are intermediate results: all but the last
    when the last one concludes (a conclusion word after the box before it, or a computation ending in
    ``=``), ends the text, and no hedge word sits anywhere from the first box on; else 0."""
    if len(boxes) < 2:
        return 0
    start, end, _ = boxes[-1]
    sentence = tail[max(0, start - 200) : start]
    sentence = re.split(r"[.!?\n](?!\d)", sentence)[-1]
    # after the box before it: a conclusion ("so x^2 = \boxed{25}", "Final answer: \boxed{42}"), or
    # a computation ending in "=" ("6 × 3 = \boxed{18}"); "a = \boxed{3} and b = \boxed{4}" is neither
    between = re.split(r"[.!?\n](?!\d)", tail[boxes[-2][1] : start])[-1]
    computed = sentence.rstrip().endswith("=") and _ARITHMETIC.search(sentence)
    rest = tail[end:].strip()
    if not (_CONCLUDES.search(between) or computed) or len(rest) > 80 or re.search(r"\d|[.!?]\s+\S", rest):
        return 0
    if _BOX_HEDGE.search(tail[boxes[0][0] :]):
        return 0
    return len(boxes) - 1


# ---- a retraction with no new answer ------------------------------------------------------------
_RETRACTION = re.compile(
    r"\b(?:wait|actually|oops|hold\s+on|correction|scratch\s+that|on\s+second\s+thought|mistake|wrong"
    r"|incorrect|error|mis(?:read|count|counted|calculated|computed|understood)|forgot|overlooked)\b"
    r"|(?:^|(?<=[.!?;:]\s)|(?<=\n))[ \t]*no\b[ \t]*[,.!:;]",
    re.IGNORECASE | re.MULTILINE,
)
_SAYS_WRONG = re.compile(
    r"\b(?:i|we)\s+(?:have\s+|had\s+|just\s+)?made\s+(?:a|an|some)\s+(?:\w+\s+)?(?:mistake|error)s?\b"
    r"|\b(?:my|a|an|the)\s+(?:\w+\s+)?(?:mistake|error)\s+(?:in|at|with|here|there)\b|\bmy\s+(?:mistake|error|bad)\b"
    r"|\b(?:that|this|it|which|the\s+(?:answer|result|total|count))(?:'s|\s+is|\s+was)\s+(?:\w+\s+)?(?:wrong"
    r"|incorrect|not\s+right|not\s+correct)\b"
    r"|\b(?:i|we)\s+(?:\w+\s+)?(?:mis(?:read|count|counted|calculated|computed|understood)|forgot|overlooked"
    r"|was\s+wrong|were\s+wrong|got\s+(?:it|this|that)\s+wrong)\b",
    re.IGNORECASE,
)


def says_wrong(text: str) -> bool:
    """Whether ``text`` says something was wrong ("I made a mistake", "I misread")."""
    return _SAYS_WRONG.search(text) is not None


_CHECKING = re.compile(
    r"[\s,.:;!-]*(?:(?:let\s+me|let's|i'll|i\s+(?:should|need\s+to|will))\s+(?:just\s+)?)?"
    r"(?:re-?(?:check|comput|calculat|count|do|examin|evaluat|verif)\w*|double[- ]check\w*|verify|check|confirm)\b",
    re.IGNORECASE,
)
_UNFINISHED = re.compile(
    r"(?:[-+*/×÷^=(]|\\times|\\cdot|\b(?:is|are|was|of|to|and|by|the|a|adds?|plus|minus|times))\s*$"
)


def retracted(text: str) -> bool:
    """``text`` (what follows the last answer, which states no new one) takes that answer back: a
    retraction marker in it, and it says the answer was wrong, or it stops mid-sentence other than in
    a check of the answer ("Wait, let me recompute: ... plus" keeps the answer)."""
    m = _RETRACTION.search(text)
    if m is None:
        return False
    rest = text[m.start() :].rstrip()
    if _SAYS_WRONG.search(text):
        return True
    if _CHECKING.match(rest, m.end()):  # "Wait, let me recompute: 3 + 4 = 7, times 2 is": a check, cut off
        return False
    return (
        not rest.endswith((".", "!", "?", ")", "]", "}", "$"))
        or _UNFINISHED.search(rest.rstrip(".!")) is not None
    )


# ---- rates and times after the answer -----------------------------------------------------------
_RATE_LINK = re.compile(
    r"^\s*(?P<unit>[A-Za-z/%°]+(?:\s+[A-Za-z/%°]+){0,2})?\s*,?\s*"
    r"(?:in|at|over|per|within|during|averaging|at\s+a\s+(?:rate|speed)\s+of)\s+(?:a|an|about|around|only)?\s*\$?$",
    re.IGNORECASE,
)
_CURRENCY_BEFORE = re.compile(r"[$€£¥₹]\s*$")


def rate_start(sentence: str, nums: list[re.Match]) -> int:
    """Index in ``nums`` (the numbers of the final sentence, in order) of the answer: the last number,
    or an earlier one when every number after it sits in a rate or time phrase after a unit."""
    i = len(nums) - 1
    while i > 0:
        prev, cur = nums[i - 1], nums[i]
        link = _RATE_LINK.match(sentence[prev.end() : cur.start()])
        if link is None or not (link["unit"] or _CURRENCY_BEFORE.search(sentence[: prev.start()])):
            break
        i -= 1
    return i
