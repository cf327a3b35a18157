"""Numbers written in words, as digits: ``seven`` is ``7``, ``twenty-one`` ``21``, ``two hundred
fifty`` ``250``, ``two thirds`` ``2/3``, ``two and a half`` ``2 1/2`` (a mixed number).

Only the math path uses it (:func:`rldata.verify.numbers.math_normalize`), on the completion's tail
before answers are extracted, so ``She is left with six.`` ends on the number 6.  A number word that
is not a count is left alone: ``one`` after a determiner (``the second one``, ``each one``, ``no
one``), and a word joined by a hyphen to a word that is not a number (``six-sided``,
``one-to-one``).  A digit number followed by a scale word is multiplied out (``3 million`` is
``3000000``), so ``3 million`` never reads as 3.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = ["words_to_digits"]

_UNIT_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
)  # fmt: skip
_TEN_WORDS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_UNITS = {w: i for i, w in enumerate(_UNIT_WORDS)}
_TENS = {w: 10 * i for i, w in enumerate(_TEN_WORDS, 2)}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_DENOMS = {
    "half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fourth": 4, "fourths": 4,
    "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6, "seventh": 7, "sevenths": 7, "eighth": 8,
    "eighths": 8, "ninth": 9, "ninths": 9, "tenth": 10, "tenths": 10,
}  # fmt: skip
_WORD = "|".join(sorted([*_UNITS, *_TENS, "hundred", *_SCALES], key=len, reverse=True))
# A run of number words: "twenty-one", "two hundred and fifty", "three thousand four hundred".
_RUN = re.compile(
    rf"(?<![\w-])(?:{_WORD})(?:(?:[ \t]+and[ \t]+|[ \t]+|-)(?:{_WORD}))*(?![\w-])|(?<![\w-])(?:{_WORD})(?=-)",
    re.IGNORECASE,
)
_CANDIDATE = re.compile(_WORD)
_WORD_EACH = re.compile(
    rf"\b(?:{'|'.join(sorted([*_UNITS, *_TENS], key=len, reverse=True))})\b", re.IGNORECASE
)
_TOKEN = re.compile(rf"{_WORD}|and", re.IGNORECASE)
_DETERMINER_BEFORE = re.compile(
    r"\b(?:the|this|that|each|every|which|whichever|any|no|some|another|a|an|other|such)\s+(?:\w+\s+)?$",
    re.IGNORECASE,
)
_ONE_OF_THE = re.compile(r"[ \t]+of[ \t]+(?:the|these|those)\b", re.IGNORECASE)
_FRACTION_AFTER = re.compile(rf"[ \t-]+({'|'.join(sorted(_DENOMS, key=len, reverse=True))})\b", re.IGNORECASE)
_AND_A_HALF = re.compile(
    r"[ \t]+and[ \t]+(?:a|one)[ \t-]+(half|third|quarter)\b|[ \t]+and[ \t]+(three)[ \t-]+quarters\b",
    re.IGNORECASE,
)
_DIGIT_SCALE = re.compile(
    r"(?<![\w.,])(\d{1,3}(?:,\d{3})*(?:\.\d+)?|\d+(?:\.\d+)?)[ \t]+(thousand|million|billion|trillion)\b(?!-)",
    re.IGNORECASE,
)
_DIGIT_AND_A_HALF = re.compile(
    r"(?<![\w.,/])(\d+)[ \t]+and[ \t]+(?:a|one)[ \t-]+(half|third|quarter)\b", re.IGNORECASE
)


def _value(run: str) -> int | None:
    """The value of a run of number words; None when it is not one number ("three four")."""
    total, current, last = 0, 0, None  # last: the kind of the previous word
    for tok in (t.lower() for t in _TOKEN.findall(run)):
        if tok == "and":
            if last not in ("hundred", "scale"):
                return None
            last = "and"
            continue
        if tok in _UNITS:
            if last in ("unit", "teen") or (last == "tens" and (_UNITS[tok] == 0 or _UNITS[tok] >= 10)):
                return None
            current += _UNITS[tok]
            last = "unit" if _UNITS[tok] < 10 else "teen"
        elif tok in _TENS:
            if last in ("unit", "teen", "tens"):
                return None
            current += _TENS[tok]
            last = "tens"
        elif tok == "hundred":
            if last not in ("unit", "teen", "tens") or current >= 100:
                return None
            current *= 100
            last = "hundred"
        else:  # thousand, million, ...
            if current == 0 or last in ("scale", "and"):
                return None
            total += current * _SCALES[tok]
            current, last = 0, "scale"
    if last == "and":
        return None
    return total + current


def _one_is_pronoun(text: str, start: int, run: str) -> bool:
    """``one`` that is no count: after a determiner (``the second one``), or ``one of the following``."""
    if run.lower() != "one":
        return False
    return bool(_DETERMINER_BEFORE.search(text[max(0, start - 40) : start])) or bool(
        _ONE_OF_THE.match(text, start + len(run))
    )


def words_to_digits(text: str) -> str:
    """``text`` with its spelled-out numbers as digits (see the module docstring)."""
    low = text.lower()
    if _has_scale(low):
        text = _DIGIT_SCALE.sub(_scaled, text)
    if "and" in low:
        text = _DIGIT_AND_A_HALF.sub(lambda m: f"{m[1]} 1/{_DENOMS[m[2].lower()]}", text)
    out, pos = [], 0
    for cand in _CANDIDATE.finditer(low):  # a plain alternation is scanned fast; _RUN only where it hits
        at = cand.start()
        if at < pos or (at and (low[at - 1].isalnum() or low[at - 1] in "-_")):
            continue
        m = _RUN.match(text, at)
        if m is None:
            continue
        run = m.group()
        if text.startswith("-", m.end()) and not _FRACTION_AFTER.match(text, m.end()):
            continue  # "six-sided", "one-to-one": not a count
        value = _value(run)
        if value is None:  # "two and three", "one two": each word a number of its own
            out.append(text[pos : m.start()])
            out.append(_WORD_EACH.sub(lambda w: str(_value(w.group())), run))
            pos = m.end()
            continue
        if _one_is_pronoun(text, m.start(), run):
            continue
        end, digits = m.end(), str(value)
        frac = _FRACTION_AFTER.match(text, m.end())
        half = _AND_A_HALF.match(text, m.end())
        if frac and value > 0:
            digits, end = f"{value}/{_DENOMS[frac[1].lower()]}", frac.end()
        elif half:
            num, den = (3, 4) if half[2] else (1, _DENOMS[half[1].lower()])
            digits, end = f"{value} {num}/{den}", half.end()
        out.append(text[pos : m.start()])
        out.append(digits)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _has_scale(low: str) -> bool:
    return any(s in low for s in _SCALES)


def _scaled(m: re.Match) -> str:
    try:
        value = Decimal(m[1].replace(",", "")) * _SCALES[m[2].lower()]
    except InvalidOperation:
        return m.group()
    return format(value.normalize(), "f") if value == value.to_integral_value() else format(value, "f")
