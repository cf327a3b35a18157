"""Pull the final answer(s) out of a model's completion.

The text is first normalized: NFKC (full-width ``４２`` is ``42``, no-break and thin spaces are
spaces), superscript exponents become ``^{..}`` (before NFKC would glue ``10²³`` into ``1023``),
the unicode minus is ``-``, LaTeX ``{,}`` is ``,`` and ``\\,`` between digits is a space.

Stated answers, collected from the last :data:`TAIL_CHARS` characters:

1. ``\\boxed{...}`` / ``\\fbox{...}``, brace-balanced (nested braces fine, ``\\{`` ignored)
2. ``#### 42`` (GSM8K style)
3. ``The answer is 42`` / ``The final answer is $\\frac{1}{2}$.`` (case-insensitive; also ``答案是``)
4. ``Answer: 42``; ``A: 42`` only at the start of a line and only when nothing above is stated
   (an option list "A: red / B: blue" is not a set of answers)

Every stated answer counts: :func:`extract_answers` returns all distinct ones (the caller decides
whether they are equivalent; several distinct final answers are a hedge, never a pass).  One
statement that names several numbers joined by ``or``/``maybe``/... (``Answer: 20 or 30``) gives
each of them.  ``The answer is not 5, it's 7`` states 7.  When nothing is stated (math only) the
final number of the text is the answer, but only when it plainly ends the text: not inside an
unfinished expression (``3 + 4 =``), not a question (``42?``), not negated (``not 5``), followed
only by a short remainder that ends the sentence (``12 in total.``), unless it follows ``=`` or
stands alone on the last line (``27``): a text that merely stops on a number may be cut off.  A final ``$...$`` segment or bare ``\\frac{a}{b}`` is
taken whole (``$\\dfrac{3}{4}$`` is ``\\dfrac{3}{4}``, not ``4``).

Numbers are read whole: ``.5``, ``1.5e3``, ``6.02 x 10^23``, thousands separators ``1,000``,
``1 000``, ``1'000``, ``1.000.000`` and Indian ``1,00,000``; they come out normalized
(``1000``, ``0.5``, ``6.02*10^(23)``).  A single ``1.000`` is the decimal 1.000, and ``1,5`` is
left as written (a list or a decimal comma: ambiguous, so it never equals a plain number).

Work is bounded whatever the input: only the tail is scanned, every pattern is linear, and brace
matching is one pass over brace tokens, so a 10 MB completion or ``"\\boxed{" * 10000`` costs the
same as a normal one.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "HEDGE_SEP",
    "NUMBER",
    "TAIL_CHARS",
    "clean_number",
    "extract_answer",
    "extract_answers",
    "normalize",
]

TAIL_CHARS = 8192  # answers sit at the end; a model that rambles for more than 8 KB after it lost it
MAX_MARKERS = 16  # occurrences of one marker tried, from the last
MAX_LINE = 256  # what follows a marker ("The answer is ...") is read up to here
MAX_ANSWERS = 8  # distinct stated answers kept (more is a hedge all the same)
MAX_REMAINDER = 80  # text allowed after a fallback final number
HEDGE_SEP = "\x1e"  # joins several answers in one extracted string; control chars are removed from input

# A number.  The separator forms come before plain digits so "10 000" is one number; the final
# (?!\d) makes the regex back off a separator form that does not end cleanly ("1,2345").
_GROUPED = (
    r"\d{1,3}(?:,\d{3})+"  # 1,234,567
    r"|\d{1,2}(?:,\d{2})+,\d{3}"  # 1,00,000 (Indian)
    r"|\d{1,3}(?:['’]\d{3})+"  # 1'000 (Swiss)
    r"|\d{1,3}(?:\.\d{3}){2,}"  # 1.000.000 (one group "1.000" is a decimal)
    r"|\d{1,3}(?: \d{3})+"  # 10 000 (SI; NFKC made thin and no-break spaces plain)
)
_EXP = (
    r"[eE][-+]?\d+"
    r"|[ \t]*(?:\\times|\\cdot|×|·|\*|x)[ \t]*10[ \t]*\^[ \t]*(?:\{[ \t]*[-+]?\d+[ \t]*\}|\([ \t]*[-+]?\d+[ \t]*\)|[-+]?\d+)"
)
# A minus counts as a sign only when no digit, letter or closing bracket precedes it: the final
# number of "10-3" is "3", not "-3".
NUMBER = re.compile(
    rf"(?:(?<![\w)\]}}.])-)?"
    rf"(?:(?<![\d.])(?P<lead>\.\d+)|(?:(?P<grp>{_GROUPED})|(?P<amb>\d+(?:,\d+)+)|(?P<plain>\d+))(?P<dec>\.\d+)?)"
    rf"(?:(?P<exp>{_EXP})|/(?P<den>\d+))?(?!\d)"
)
_FULL_NUMBER = re.compile(rf"\s*(?:\\\$|\$)?\s*(?P<num>{NUMBER.pattern})\s*(?:\\%|%|percent)?\s*\.?\s*")

_BOX_TOKENS = re.compile(r"\\(?:boxed|fbox)\s*\{|\\[{}]|[{}]")
_HASHES = re.compile(r"####[ \t]*")
_ANSWER_IS = re.compile(r"(?:\banswer\s+is\b|答案是|答案为)[ \t]*:?[ \t]*", re.IGNORECASE)
_ANSWER_COLON = re.compile(r"\banswer[ \t]*:[ \t]*", re.IGNORECASE)
# "A:" only at a line start, and only when nothing else is stated: option lists ("A: red") are not answers
_A_COLON = re.compile(r"^[ \t]*A[ \t]*:[ \t]*", re.MULTILINE)
# "$...$" or "\(...\)" right after a marker: a LaTeX answer
_MATH_DELIM = re.compile(rf"\$\$?([^$\n]{{1,{MAX_LINE}}})\$\$?|\\\(((?:(?!\\\)).){{1,{MAX_LINE}}})\\\)")
_MATH_SEGMENT = re.compile(r"\$\$?([^$]{1,512})\$\$?|\\\((.{1,512}?)\\\)|\\\[(.{1,512}?)\\\]", re.DOTALL)
_BARE_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*-?\d+\s*\}\s*\{\s*\d+\s*\}|\\[dt]?frac\s*\d\s*\d")
_HEDGE = re.compile(r"\b(?:or|either|maybe|perhaps|possibly)\b|\d\s+to\s+-?\.?\d", re.IGNORECASE)
_LIST_BEFORE = re.compile(r"\d\s*(?:,|\band)\s*$")  # "41, 42": the final number closes a list
_NEGATED = re.compile(r"(?:\bnot|n't|\bnever)\s+(?:equal\s+to\s+|exactly\s+)?\$?-?[\d.,]+\$?", re.IGNORECASE)
_NEW_SENTENCE = re.compile(r"[.!;]\s+\S")
_SENTENCE_END = re.compile(r"\.(?!\d)|[!?;\n]")
# What may follow a stated number for the number alone to be the answer: a unit, percent,
# punctuation or the end.  Anything else ("2\pi", "5x", "2 \sqrt{3}") makes the whole statement the answer.
_PLAIN_AFTER = re.compile(
    r"\s*$|\s*[.,;:!)\]]|\s*(?:\\%|%|percent\b|°|\^\s*\{?\s*\\circ|\\text|\\mathrm|\\mbox|\\,)"
    r"|\s+(?!(?:pi|sqrt|i|x|y|z|n|e|times|cdot)\b)[A-Za-z]"
)
_OPERATOR_BEFORE = re.compile(r"(?:[-+*/×÷^_({]|\\[a-zA-Z]+|\bnot|n't|\bnever)\s*$")
_OPERATOR_AFTER = re.compile(r"\s*(?:[-+*/×÷^_=<>?]|\\(?!text|mathrm|mbox|%|\$|\]|\)))")

_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺"
_SUPERSCRIPT_RUN = re.compile(f"[{_SUPERSCRIPTS}]+")
_SUPER_TO_ASCII = str.maketrans(_SUPERSCRIPTS, "0123456789-+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_LATEX_THIN_SPACE = re.compile(r"(?<=\d)\\[,;:! ](?=\d)")


def normalize(text: str) -> str:
    """NFKC plus the fixes it needs (see the module docstring)."""
    text = _SUPERSCRIPT_RUN.sub(lambda m: "^{" + m.group().translate(_SUPER_TO_ASCII) + "}", text)
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\u2212", "-").replace("\u2044", "/").replace("{,}", ",")
    text = _LATEX_THIN_SPACE.sub(" ", text)
    return _CONTROL.sub(" ", text)


def _canon(m: re.Match) -> str:
    """A NUMBER match in normal form: "1,234.50" -> "1234.50", "6.02 x 10^23" -> "6.02*10^(23)"."""
    if m["amb"] is not None:  # "1,5": a list or a decimal comma; math-verify reads it as a set
        return m.group().strip()
    sign = "-" if m.group().startswith("-") else ""
    if m["lead"] is not None:
        mant = "0" + m["lead"]
    else:
        whole = m["grp"] if m["grp"] is not None else m["plain"]
        mant = re.sub(r"[,'’. ]", "", whole) + (m["dec"] or "")
    if m["exp"] is not None:
        power = int(re.findall(r"[-+]?\d+", m["exp"])[-1])
        return f"{sign}{mant}*10^({power})"
    if m["den"] is not None:
        return f"{sign}{mant}/{m['den']}"
    return sign + mant


def clean_number(s: str) -> str | None:
    """``"$1,234."`` -> ``"1234"``, ``"50\\%"`` -> ``"50"``; None if ``s`` is not a single number."""
    m = _FULL_NUMBER.fullmatch(normalize(s))
    num = NUMBER.fullmatch(m["num"]) if m is not None else None
    return _canon(num) if num is not None and num["amb"] is None else None


def _box_spans(s: str) -> list[tuple[int, int, int]]:
    """(box start, content start, content end) of the outermost closed \\boxed{}/\\fbox{} in ``s``."""
    starts = [i for i in (s.find("\\boxed"), s.find("\\fbox")) if i >= 0]
    if not starts:
        return []
    stack: list[tuple[int, int] | None] = []  # per open brace: (box start, content start) or None
    spans: list[tuple[int, int, int]] = []
    for m in _BOX_TOKENS.finditer(s, min(starts)):
        tok = m.group()
        if tok[0] == "\\" and len(tok) == 2:  # escaped brace: part of the content
            continue
        if tok[0] == "\\":
            stack.append((m.start(), m.end()))
        elif tok == "{":
            stack.append(None)
        elif stack:
            opened = stack.pop()
            if opened is not None:
                while spans and spans[-1][0] > opened[0]:  # boxes inside this one: the outer one wins
                    spans.pop()
                spans.append((opened[0], opened[1], m.start()))
    return spans


def _boxes(s: str) -> list[str]:
    """Contents of the outermost closed boxes in ``s``, in order; ``\\boxed{\\boxed{3}}`` is ``3``."""
    out = []
    for _, a, b in _box_spans(s)[-MAX_MARKERS:]:
        content = s[a:b].strip()
        for _ in range(8):  # bounded: adversarial nesting
            inner = _box_spans(content)
            if len(inner) != 1 or inner[0][0] != 0 or inner[0][2] != len(content) - 1:
                break
            content = content[inner[0][1] : inner[0][2]].strip()
        if content:
            out.append(content)
    return out


def _numbers(stmt: str) -> list[re.Match]:
    return list(NUMBER.finditer(_NEGATED.sub(" ", stmt)))[:MAX_ANSWERS]


def _from_statement(stmt: str, numeric: bool) -> list[str]:
    """The answer(s) one statement gives: ``20 or 30`` gives both (a hedge), ``not 5, it's 7`` gives 7."""
    stmt = stmt.strip()
    num = clean_number(stmt)
    if num is not None:
        return [num]
    nums = _numbers(stmt) if numeric else []
    if len(nums) > 1 and _HEDGE.search(stmt):
        return [_canon(m) for m in nums]
    if not numeric:
        return [stmt] if stmt else []
    if stmt.startswith("\\") or not nums:  # undelimited LaTeX: "is \frac{1}{2}."; or no number at all
        return [stmt] if stmt.startswith("\\") else []
    first = nums[0]
    negated = _NEGATED.sub(" ", stmt)
    if _PLAIN_AFTER.match(negated, first.end()) and not _OPERATOR_BEFORE.search(
        negated[: first.start()][-12:]
    ):
        return [_canon(first)]
    return [stmt]  # "2\pi", "5x": math-verify reads the whole statement


def _after_marker(rest: str, numeric: bool) -> list[str]:
    """What a marker ("####", "The answer is", "Answer:") points at, from the rest of its sentence."""
    rest = rest.split("\n", 1)[0].lstrip()
    if rest.startswith(("\\boxed", "\\fbox")):  # "Final answer: \boxed{5}": the box speaks for itself
        return []
    m = _MATH_DELIM.match(rest)
    if m:
        inner = (m.group(1) or m.group(2) or "").strip()
        if inner:
            return _from_statement(inner, numeric) if _HEDGE.search(inner) else [clean_number(inner) or inner]
    if not numeric:  # the rest of the line: a text answer may hold periods ("St. Louis", "U.S.A.")
        text = rest.strip().rstrip(".").strip()
        if text.startswith("$") and text.endswith("$") and len(text) > 1:
            text = text.strip("$").strip()
        return [text] if text else []
    end = _SENTENCE_END.search(rest)
    if end and end.group() == "?":  # "the answer is 42?": a question, not an answer
        return []
    return _from_statement(rest[: end.start()] if end else rest, numeric)


def _stated(tail: str, numeric: bool) -> list[str]:
    """Every stated answer, highest-priority rule first, within a rule the last occurrence first."""
    out: list[str] = []
    for box in reversed(_boxes(tail)):
        num = clean_number(box)
        out.extend([num] if num is not None else _box_answers(box, numeric))
    for pattern in (_HASHES, _ANSWER_IS, _ANSWER_COLON):
        for m in list(pattern.finditer(tail))[-MAX_MARKERS:][::-1]:
            out.extend(_after_marker(tail[m.end() : m.end() + MAX_LINE], numeric))
    if not out:
        for m in list(_A_COLON.finditer(tail))[-MAX_MARKERS:][::-1]:
            out.extend(_after_marker(tail[m.end() : m.end() + MAX_LINE], numeric))
    return out


def _box_answers(box: str, numeric: bool) -> list[str]:
    """A box's answer; ``\\boxed{41 \\text{ or } 42}`` gives both numbers (a hedge)."""
    plain = re.sub(r"\\(?:text|mathrm|mbox)\s*\{([^{}]*)\}", r" \1 ", box)
    nums = _numbers(plain) if numeric else []
    if len(nums) > 1 and _HEDGE.search(plain):
        return [_canon(m) for m in nums]
    return [box]


def _final_number(tail: str) -> list[str]:
    """The fallback: the final number (or final $...$ / \\frac) when it plainly ends the text."""
    last = None
    for last in NUMBER.finditer(tail):
        pass
    seg = None
    for seg in _MATH_SEGMENT.finditer(tail):
        pass
    frac = None
    for frac in _BARE_FRAC.finditer(tail):
        pass
    if last is None and seg is None:
        return []
    cands = [(m.end(), kind, m) for kind, m in (("seg", seg), ("frac", frac), ("num", last)) if m is not None]
    end, kind, m = max(cands, key=lambda c: (c[0], c[1] != "num"))
    remainder = tail[end:]
    rest = remainder.strip()
    if len(rest) > MAX_REMAINDER or "?" in remainder or _OPERATOR_AFTER.match(remainder):
        return []
    if _NEW_SENTENCE.search(rest):  # "... 100 points. First we count": the text went on
        return []
    if kind == "seg":
        inner = next(g for g in m.groups() if g is not None).strip()
        if not inner:
            return []
        return [clean_number(inner) or inner]
    if kind == "frac":
        return [m.group()]
    before = tail[max(0, m.start() - 12) : m.start()]
    if _OPERATOR_BEFORE.search(before):
        return []
    # A number that merely stops the text ("First, the triangle has 3") may be a cut-off
    # completion: it counts when a sentence ends after it, when it follows "=", or when it is
    # alone on its line (a bare completion such as "27").
    line = tail[tail.rfind("\n", 0, m.start()) + 1 : m.start()]
    if not (rest.endswith((".", "!")) or before.rstrip().endswith("=") or not line.strip(" \t$")):
        return []
    start = max(tail.rfind("\n", 0, m.start()), tail.rfind(". ", 0, m.start()))
    sentence = tail[start + 1 : end]
    nums = _numbers(sentence)
    if len(nums) > 1 and (_HEDGE.search(sentence) or _LIST_BEFORE.search(tail[: m.start()])):
        return [_canon(x) for x in nums]
    return [_canon(m)]


def extract_answers(text: str | None, *, numeric: bool = True) -> list[str]:
    """Every distinct answer the completion states, the one that ranks first first (see module doc).

    Empty: no answer.  More than one: the completion hedges (or corrected itself after stating an
    answer), unless the caller finds them all equivalent (``0.5`` and ``\\frac{1}{2}``).
    """
    if not text:
        return []
    if not isinstance(text, str):
        text = str(text)
    tail = normalize(text[-TAIL_CHARS:])
    found = _stated(tail, numeric)
    if not found and numeric:
        found = _final_number(tail)
    out: list[str] = []
    for a in found:
        if a and a not in out:
            out.append(a)
    return out[:MAX_ANSWERS]


def extract_answer(text: str | None, *, numeric: bool = True) -> str | None:
    """The first-ranked answer (a boxed one before ``####`` before ``answer is`` before ``Answer:``).

    Use :func:`extract_answers` to see a hedge: this returns one answer even when there are several.
    """
    found = extract_answers(text, numeric=numeric)
    return found[0] if found else None
