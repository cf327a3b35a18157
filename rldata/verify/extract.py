"""Pull the final answer(s) out of a model's completion.

The text is first normalized (:func:`rldata.verify.numbers.normalize`: NFKC, superscripts, the
unicode minus, ``\\phantom`` dropped; for math also number words, mixed numbers, repeating
decimals, dashes, European amounts: ``math_normalize``), and numbers are read whole and normalized
(:mod:`rldata.verify.numbers`: ``1,000`` is ``1000``, ``6.02 x 10^23`` is ``6.02*10^(23)``, ``40%``
keeps its percent).

Stated answers, collected from the last :data:`TAIL_CHARS` characters:

1. ``\\boxed{...}`` / ``\\fbox{...}``, brace-balanced (nested braces fine, ``\\{`` ignored)
2. ``#### 42`` (GSM8K style)
3. ``The answer is 42`` / ``The final answer is $\\frac{1}{2}$.`` (case-insensitive; also ``答案是``)
4. ``Answer: 42``; ``A: 42`` only at the start of a line and only when nothing above is stated
   (an option list "A: red / B: blue" is not a set of answers)
5. ``**42**`` (markdown bold; ``__42__``) alone on its line or ending the text; the bold markers are
   dropped first, so ``**Answer:** 42`` is ``Answer: 42``

A box holding a blank to fill in (``\\boxed{\\quad}``,
``\\boxed{?}``) is no answer, and neither is a box quoted from the task's prompt (same content, and
either no number in it or the same words before it).

Every stated answer counts: :func:`extract_answers` returns all distinct ones (the caller decides
whether they are equivalent; several distinct final answers are a hedge, never a pass), except
after a revision: a marker ("wait", "actually", "no,", "I made a mistake", "let me recheck", ...)
after a stated answer retracts what came before it, and the answers after the last one stand
(``The answer is 7. Wait, actually it is 8.`` states 8).  A revision that still offers
alternatives (a hedge word in the marker's or the final answer's sentence: ``7, or actually 8``,
``Actually, it could also be 8``) and a chain of more than :data:`MAX_REVISED` distinct answers
keep every answer, which fails as a hedge.  One statement that names several numbers joined by
``or``/``and``/commas is one list answer (items joined by :data:`LIST_SEP`: a set when the gold is
one, a hedge otherwise); with a word of doubt (``Answer: 20 or maybe 30``) each number is an answer.
Around the final answer (math, :mod:`rldata.verify.alternatives`): a trailing prose parenthetical is
dropped, numbers offered under a condition are alternatives, concluding final boxes make earlier
boxes intermediate, and a retraction with no new answer leaves none.  ``The answer is not 5, it's 7`` states 7.  When nothing is stated (math only) the
final number of the text is the answer, but only when it plainly ends the text: not inside an
unfinished expression (``3 + 4 =``), not a question (``42?``), not negated (``not 5``), followed
only by a short remainder that ends the sentence (``12 in total.``), unless it follows ``=`` or
stands alone on the last line (``27``): a text that merely stops on a number may be cut off.  A
final ``$...$`` segment or bare ``\\frac{a}{b}`` is taken whole (``$\\dfrac{3}{4}$`` is
``\\dfrac{3}{4}``, not ``4``).

Work is bounded whatever the input: only the tail is scanned, every pattern is linear, and brace
matching is one pass over brace tokens, so a 10 MB completion or ``"\\boxed{" * 10000`` costs the
same as a normal one.
"""

from __future__ import annotations

import re

from rldata.verify.alternatives import (
    conditional_alternatives,
    intermediate_boxes,
    rate_start,
    retracted,
    says_wrong,
    split_parenthetical,
)
from rldata.verify.choice import choice_statements
from rldata.verify.numbers import NUMBER, canon_at, clean_number, normalize, read_number
from rldata.verify.structured import CHAIN, as_interval, system_answers

__all__ = [
    "HEDGE_SEP",
    "LIST_SEP",
    "NUMBER",
    "TAIL_CHARS",
    "clean_number",
    "extract_answer",
    "extract_answers",
    "extract_choices",
    "normalize",
]

TAIL_CHARS = 8192  # answers sit at the end; a model that rambles for more than 8 KB after it lost it
MAX_MARKERS = 16  # occurrences of one marker tried, from the last
MAX_LINE = 256  # what follows a marker ("The answer is ...") is read up to here
MAX_ANSWERS = 8  # distinct stated answers kept (more is a hedge all the same)
MAX_REMAINDER = 80  # text allowed after a fallback final number
MAX_REVISION_TAIL = 40  # a revision this short ("Wait, actually 8") need not end its sentence
HEDGE_SEP = "\x1e"  # joins several answers in one extracted string; control chars are removed from input
LIST_SEP = "\x1f"  # joins the items of one list answer ("3 and 7"): a set when the gold is one, else a hedge


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
# "41, 42", "x = 0 and x = 4": the final number closes a list
_LIST_BEFORE = re.compile(r"\d\s*\$?\s*(?:,|\band\b|\bor\b)\s*(?:(?:and|or)\s+)?(?:\$?\s*[a-z]\s*=\s*)?$")
_LIST_JOIN = re.compile(r"\s*\$?\s*(?:,|;|\band\b|\bor\b)\s*(?:(?:and|or)\s+)?(?:\$?\s*[a-z]\s*=\s*)?\$?\s*")
# Several numbers in one statement are a list (one answer: a set, when the gold is a set) when only
# commas, "and" or "or" join them; with a word of doubt or a range they are a hedge.
_DOUBT = re.compile(
    r"\b(?:either|maybe|perhaps|possibly|possible|might|could|probably|not\s+sure|unsure|can'?t\s+tell"
    r"|cannot\s+tell|i\s+think|guess|around|about|roughly|approximately|somewhere|between|if|unless|otherwise"
    r"|assuming|depending|whether)\b|\d\s+to\s+-?\.?\d",
    re.IGNORECASE,
)
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


def _boxes(s: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of the outermost closed boxes in ``s``, in order; ``\\boxed{\\boxed{3}}`` is
    ``3``.  Empty boxes and blanks to fill in (``\\boxed{\\quad}``, ``\\boxed{?}``) are left out."""
    out = []
    for start, a, b in _box_spans(s)[-MAX_MARKERS:]:
        content = s[a:b].strip()
        for _ in range(8):  # bounded: adversarial nesting
            inner = _box_spans(content)
            if len(inner) != 1 or inner[0][0] != 0 or inner[0][2] != len(content) - 1:
                break
            content = content[inner[0][1] : inner[0][2]].strip()
        if content and not _PLACEHOLDER.fullmatch(content):
            out.append((start, b + 1, content))
    return out


def _numbers(stmt: str) -> list[re.Match]:
    return list(NUMBER.finditer(_NEGATED.sub(" ", stmt)))[:MAX_ANSWERS]


def _num(s: str, numeric: bool) -> str | None:
    """A single number, normalized; math keeps a percent sign (``40%``), text answers do not."""
    return read_number(s) if numeric else clean_number(s)


def _several(text: str, nums: list[re.Match]) -> list[str]:
    """Several numbers of one statement: one list answer, or each an answer (a hedge) when a word of
    doubt or a range joins them."""
    values = list(dict.fromkeys(canon_at(m, m.string) for m in nums))
    if _DOUBT.search(text) or len(values) < 2:
        return values
    first = len(nums) - 1  # the list is the run of numbers that ends the statement: "two such: 3 and 7"
    while first > 0 and _LIST_JOIN.fullmatch(nums[first].string, nums[first - 1].end(), nums[first].start()):
        first -= 1
    items = list(dict.fromkeys(canon_at(m, m.string) for m in nums[first:]))
    return [LIST_SEP.join(items)] if len(items) > 1 else values


def _from_statement(stmt: str, numeric: bool) -> list[str]:
    """The answer(s) one statement gives: ``20 or 30`` gives both (a hedge), ``not 5, it's 7`` gives 7."""
    stmt = stmt.strip()
    num = _num(stmt, numeric)
    if num is not None:
        return [num]
    nums = _numbers(stmt) if numeric else []
    if len(nums) > 1 and _HEDGE.search(stmt):
        return _several(stmt, nums)
    if not numeric:
        return [stmt] if stmt else []
    if stmt.startswith("\\") or not nums:  # undelimited LaTeX: "is \frac{1}{2}."; or no number at all
        return [stmt] if stmt.startswith("\\") else []
    first = nums[0]
    negated = _NEGATED.sub(" ", stmt)
    if _PLAIN_AFTER.match(negated, first.end()) and not _OPERATOR_BEFORE.search(
        negated[: first.start()][-12:]
    ):
        return [canon_at(first, negated)]
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
            return (
                _from_statement(inner, numeric) if _HEDGE.search(inner) else [_num(inner, numeric) or inner]
            )
    if not numeric:  # the rest of the line: a text answer may hold periods ("St. Louis", "U.S.A.")
        text = rest.strip().rstrip(".").strip()
        if text.startswith("$") and text.endswith("$") and len(text) > 1:
            text = text.strip("$").strip()
        return [text] if text else []
    end = _SENTENCE_END.search(rest)
    if end and end.group() == "?":  # "the answer is 42?": a question, not an answer
        return []
    return _from_statement(rest[: end.start()] if end else rest, numeric)


Statement = tuple[tuple[int, int], int, list[str]]  # (rank, end in the tail, answers)


def _stated(tail: str, numeric: bool, bold: list[tuple[int, int]], quoted: Quoted) -> list[Statement]:
    """Every stated answer with its rank (rule first, then the last occurrence first) and where it
    ends in the tail."""
    out: list[Statement] = []
    boxes = [b for b in _boxes(tail) if not _is_quoted(tail, b[0], b[2], quoted)]
    if numeric:  # "\boxed{5} ... so x^2 = \boxed{25}": judged by the final box
        boxes = boxes[intermediate_boxes(tail, boxes) :]
    for start, end, box in boxes:
        num = _num(box, numeric)
        out.append(((0, -start), end, [num] if num is not None else _box_answers(box, numeric)))
    for rule, pattern in enumerate((_HASHES, _ANSWER_IS, _ANSWER_COLON), 1):
        for m in list(pattern.finditer(tail))[-MAX_MARKERS:]:
            rest = tail[m.end() : m.end() + MAX_LINE]
            out.append(((rule, -m.start()), m.end() + _statement_len(rest), _after_marker(rest, numeric)))
    if numeric:
        out.extend(_bold_answers(tail, bold))
    if not any(answers for _, _, answers in out):
        for m in list(_A_COLON.finditer(tail))[-MAX_MARKERS:]:
            rest = tail[m.end() : m.end() + MAX_LINE]
            out.append(((5, -m.start()), m.end() + _statement_len(rest), _after_marker(rest, numeric)))
    return [st for st in out if st[2]]


def _statement_len(rest: str) -> int:
    """How far a marker's statement reads into ``rest``: to its sentence end (or line end)."""
    line = rest.split("\n", 1)[0]
    end = _SENTENCE_END.search(line)
    return end.end() if end else len(line)


def _box_answers(box: str, numeric: bool) -> list[str]:
    """A box's answer; ``\\boxed{41 \\text{ or } 42}`` gives both numbers (a hedge)."""
    plain = re.sub(r"\\(?:text|mathrm|mbox)\s*\{([^{}]*)\}", r" \1 ", box)
    nums = _numbers(plain) if numeric else []
    if len(nums) > 1 and _HEDGE.search(plain):
        return _several(plain, nums)
    return [box]


def _final_number(tail: str, *, revised: bool = False) -> tuple[list[str], int, int]:
    """The fallback: the final number (or final $...$ / \\frac / inequality chain) when it plainly ends
    the text; with where it starts and ends in ``tail`` (nothing: an empty list).

    ``revised``: ``tail`` is what follows a revision marker: when that is short and names one number
    ("Wait, actually 8") the number need not end a sentence; an unfinished recomputation ("3 + 4 = 7,
    times 2 is 14, plus") may be cut off."""
    last = None
    for last in NUMBER.finditer(tail):
        pass
    seg = None
    for seg in _MATH_SEGMENT.finditer(tail):
        pass
    frac = None
    for frac in _BARE_FRAC.finditer(tail):
        pass
    chain = None
    if _RELATION_HINT.search(tail):
        for chain in CHAIN.finditer(tail):
            pass
    bracket = None
    if "," in tail and ("(" in tail or "[" in tail):
        for bracket in _BRACKETED.finditer(tail):
            pass
    none: tuple[list[str], int, int] = ([], 0, 0)
    if last is None and seg is None:
        return none
    kinds = (("seg", seg), ("chain", chain), ("bracket", bracket), ("frac", frac), ("num", last))
    cands = [(m.end(), kind, m) for kind, m in kinds if m is not None]
    end, kind, m = max(cands, key=lambda c: (c[0], c[1] != "num"))
    remainder = tail[end:]
    rest = remainder.strip()
    if len(rest) > MAX_REMAINDER or "?" in remainder or _OPERATOR_AFTER.match(remainder):
        return none
    if _NEW_SENTENCE.search(rest):  # "... 100 points. First we count": the text went on
        return none
    if kind == "seg":
        inner = next(g for g in m.groups() if g is not None).strip()
        return ([read_number(inner) or inner], m.start(), end) if inner else none
    if kind in ("chain", "bracket"):  # "1 \le x \le 6", "(3, -1)", "[2, 5]": read whole
        if _OPERATOR_BEFORE.search(tail[max(0, m.start() - 12) : m.start()]):
            return none
        return [m.group()], m.start(), end
    if kind == "frac":
        return [m.group()], m.start(), end
    before = tail[max(0, m.start() - 12) : m.start()]
    if _OPERATOR_BEFORE.search(before):
        return none
    # A number that merely stops the text ("First, the triangle has 3") may be a cut-off
    # completion: it counts when a sentence ends after it, when it follows "=", or when it is
    # alone on its line (a bare completion such as "27", "$27" / LaTeX-escaped "\\$27", or after a
    # label: "Total: $100").
    line = tail[tail.rfind("\n", 0, m.start()) + 1 : m.start()]
    short = revised and len(tail.strip()) <= MAX_REVISION_TAIL and last is m and len(_numbers(tail)) == 1
    equals = before.rstrip(" \t$\\€£¥₹").endswith("=")
    alone = not line.strip(" \t$\\€£¥₹") or _LABEL_LINE.fullmatch(line)
    if not (short or rest.endswith((".", "!")) or equals or alone):
        return none
    start = max(tail.rfind("\n", 0, m.start()), tail.rfind(". ", 0, m.start()))
    sentence = tail[start + 1 : end]
    if says_wrong(sentence):  # "I made a mistake in step 2.": not an answer
        return none
    nums = _numbers(sentence)
    first = rate_start(nums[0].string, nums) if len(nums) > 1 else len(nums) - 1
    if 0 <= first < len(nums) - 1:  # "150 miles in 3 hours at 50 mph": 150
        chosen = nums[first]
        if _OPERATOR_BEFORE.search(chosen.string[max(0, chosen.start() - 12) : chosen.start()]):
            return none
        return [canon_at(chosen, chosen.string)], m.start(), end
    if len(nums) > 1 and (_HEDGE.search(sentence) or _LIST_BEFORE.search(tail[: m.start()])):
        return _several(sentence, nums), m.start(), end
    return [canon_at(m, tail)], m.start(), end


_RELATION_HINT = re.compile(r"[<>]|\\[lg]")  # a plain prefix: scanned fast, unlike CHAIN
_BRACKETED = re.compile(
    r"[\[(](?<![\w\\][\[(])\s*(?:-?\s*(?:\d+(?:\.\d+)?(?:/\d+)?|\\infty)\s*,\s*){1,5}"
    r"-?\s*(?:\d+(?:\.\d+)?(?:/\d+)?|\\infty)\s*[\])]"
)
_LABEL_LINE = re.compile(
    r"[ \t]*(?:[A-Za-z]+[ \t]+){0,3}?(?:total|sum|result|overall|altogether|final|net|grand|answer|solution"
    r"|remaining|difference|product|quotient|cost|price|profit|amount)(?:[ \t]+[A-Za-z]+){0,3}[ \t]*[:=]"
    r"[ \t]*[$€£¥₹\\]*[ \t]*",
    re.IGNORECASE,
)


# ---- markdown bold ------------------------------------------------------------------------------
# "**42**" / "__42__" as markdown: the markers go (so "**Answer:** 42" reads "Answer: 42"), and a
# bold number or $...$ that ends the text or stands alone on its line is a stated answer.  The
# flanking rules keep Python's "2**3" a power.
_BOLD = re.compile(
    r"(?<![\w*\\])\*\*(?=[^\s*])([^*\n]{1,200}?)(?<=[^\s*\\])\*\*(?![\w*])"
    r"|(?<![\w\\])__(?=[^\s_])([^_\n]{1,200}?)(?<=[^\s_\\])__(?!\w)"
)


def _unbold(tail: str) -> tuple[str, list[tuple[int, int]]]:
    """The tail without markdown bold markers, and the spans of the bold texts in it."""
    if "**" not in tail and "__" not in tail:
        return tail, []
    parts, spans, pos, n = [], [], 0, 0
    for m in _BOLD.finditer(tail):
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        parts.append(tail[pos : m.start()])
        n += m.start() - pos
        spans.append((n, n + len(inner)))
        parts.append(inner)
        n += len(inner)
        pos = m.end()
    parts.append(tail[pos:])
    return "".join(parts), spans[-MAX_MARKERS:]


def _bold_answers(tail: str, spans: list[tuple[int, int]]) -> list[Statement]:
    out: list[Statement] = []
    for i, (a, b) in enumerate(spans):
        text = tail[a:b].strip()
        seg = _MATH_SEGMENT.fullmatch(text)
        inner = next((g for g in seg.groups() if g is not None), "").strip() if seg else text
        value = read_number(inner) or (inner if seg or _BARE_FRAC.fullmatch(inner) else None)
        if not value:
            continue
        line_start = tail.rfind("\n", 0, a) + 1
        line_end = tail.find("\n", b)
        alone = not tail[line_start:a].strip() and not tail[
            b : len(tail) if line_end < 0 else line_end
        ].strip(" .")
        if alone:
            out.append(((4, -a), b, [value]))
        elif i == len(spans) - 1 and _ends_text(tail, a, b):
            sentence = tail[_sentence_start(tail, a) : b]
            if not (tail[b:].strip().endswith((".", "!")) or tail[:a].rstrip().endswith("=")):
                continue  # "**7** **8**": the text stops on it, it does not state it
            nums = _numbers(sentence)
            hedge = len(nums) > 1 and _HEDGE.search(sentence)
            out.append(((4, -a), b, _several(sentence, nums) if hedge else [value]))
    return out


def _ends_text(tail: str, start: int, end: int) -> bool:
    """Whether what spans start..end plainly ends the text: a short remainder, no number, question or
    operator after it, no operator before it."""
    remainder = tail[end:]
    rest = remainder.strip()
    if len(rest) > MAX_REMAINDER or "?" in remainder or _OPERATOR_AFTER.match(remainder):
        return False
    if _NEW_SENTENCE.search(rest) or any(c.isdigit() for c in rest):
        return False
    return not _OPERATOR_BEFORE.search(tail[max(0, start - 12) : start])


def _sentence_start(tail: str, pos: int) -> int:
    return max(
        tail.rfind("\n", 0, pos),
        *(m.end() for m in _SENTENCE_BREAK.finditer(tail, max(0, pos - 400), pos)),
        0,
    )


_SENTENCE_BREAK = re.compile(r"[.!?;](?!\d)\s")


# ---- boxes quoted from the problem statement ----------------------------------------------------
# A blank to fill in is never an answer.  A box that repeats one of the prompt's boxes is quoted
# when it holds no number ("\boxed{A} + \boxed{B} = 10") or is copied with the words before it: a
# number the model boxes in its own words ("so the sum is \boxed{15}") is its answer, even when the
# prompt boxed the same number.
_PLACEHOLDER = re.compile(
    r"(?:\s|~|\?|\.|\\[,;:! ]|\\$|\\q?quad\b|\\(?:square|Box|blacksquare|ldots|cdots|dots|dotsc)\b|\\?_"
    r"|\\hspace\s*\*?\{[^{}]*\}|\\(?:text|mathrm|mbox|underline)\s*\{\s*\}|\{\s*\})*"
)
Quoted = dict[str, set[str]]  # a prompt box's content -> the words just before it


def _context(s: str, start: int) -> str:
    return re.sub(r"[\s$]", "", s[max(0, start - 40) : start])[-12:]


def _key(content: str) -> str:
    return re.sub(r"\s+", "", content)


def quoted_boxes(prompt: str | None, *, math: bool = False) -> Quoted:
    """The boxes of a task's prompt, for :func:`extract_answers` to recognise quotes of them
    (``math``: normalized as the math path normalizes the completion)."""
    if not prompt or ("\\boxed" not in prompt and "\\fbox" not in prompt):
        return {}
    text = normalize(prompt[-TAIL_CHARS:], math=math)
    out: Quoted = {}
    for start, _, content in _boxes(text):
        out.setdefault(_key(content), set()).add(_context(text, start))
    return out


def _is_quoted(tail: str, start: int, content: str, quoted: Quoted) -> bool:
    contexts = quoted.get(_key(content))
    if contexts is None:
        return False
    mine = _context(tail, start)  # copied words may start the completion: a suffix of the prompt's
    return clean_number(content) is None or any(
        c == mine or (len(mine) >= 4 and c.endswith(mine)) for c in contexts
    )


# ---- revisions ----------------------------------------------------------------------------------
# "The answer is 7. Wait, actually it is 8." states 8: the answers before the last revision marker
# are retracted, and the answers after it are judged (they must agree, like any others).  It stays
# a hedge when the revision still offers alternatives (a hedge word in the marker's sentence or in
# the final answer's: "7, or actually 8", "Actually, it could also be 8"), and a chain of more than
# MAX_REVISED distinct answers is a spray: all of them count, so it fails like a hedge.
MAX_REVISED = 3
_REVISION = re.compile(
    r"\b(?:wait|actually|oops|correction|on\s+second\s+thought|scratch\s+that|hold\s+on|mistake|wrong"
    r"|incorrect|error|i\s+was\s+wrong|mis(?:read|count|counted|calculated|computed)"
    r"|re-?(?:check|comput|calculat|count|do|examin|consider|evaluat|think)\w*|double[- ]check\w*)\b"
    r"|(?:^|(?<=[.!?;:]\s)|(?<=\n))[ \t]*no\b[ \t]*[,.!:;]",
    re.IGNORECASE | re.MULTILINE,
)
_REVISION_HEDGE = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibl[ey]|might|may|could|unless|otherwise|alternatively|depending"
    r"|probably|not\s+sure|unsure|as\s+well|also\s+(?:be|works?|valid|possible|correct|right|an?))\b"
    r"|\btoo\s*(?:[.!,;)]|$)",
    re.IGNORECASE,
)


def _sentence(tail: str, pos: int) -> str:
    end = _SENTENCE_END.search(tail, pos)
    return tail[_sentence_start(tail, pos) : end.end() if end else len(tail)]


def _revised(tail: str, stmts: list[Statement], numeric: bool) -> list[Statement]:
    """The statements that stand once revisions are applied (all of them when nothing is revised)."""
    marks = list(_REVISION.finditer(tail))[-4 * MAX_MARKERS :]
    if not marks:
        return stmts
    bounds = [0, *(m.start() for m in marks), len(tail)]
    chain: list[list[Statement]] = []
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        seg = [st for st in stmts if lo < st[1] <= hi]
        if not seg and numeric:
            base = marks[i - 1].end() if i else 0
            fallback, fs, fe = _final_number(tail[base:hi], revised=i > 0)
            if fallback and says_wrong(_sentence(tail, base + fs)):  # "a mistake in step 2"
                fallback = []
            seg = [((9, -(base + fs)), base + fe, fallback)] if fallback else []
        if seg:
            chain.append(seg)
    if len(chain) < 2:
        return stmts if stmts else (chain[0] if chain else [])
    everything = [st for seg in chain for st in seg]
    final = chain[-1]
    cut = max(m.start() for m in marks if m.start() < min(st[1] for st in final))
    region = _sentence(tail, cut) + " ".join(_sentence(tail, max(0, st[1] - 1)) for st in final)
    distinct = {a for st in everything for a in st[2]}
    if _REVISION_HEDGE.search(region) or len(distinct) > MAX_REVISED:
        return everything
    return final


def extract_answers(
    text: str | None, *, numeric: bool = True, prompt: str | None = None, tuples: bool = False
) -> list[str]:
    """Every distinct answer the completion states, the one that ranks first first (see module doc).

    Empty: no answer.  More than one: the completion hedges, unless the caller finds them all
    equivalent (``0.5`` and ``\\frac{1}{2}``); one answer holding :data:`LIST_SEP` is a list.
    ``prompt``: the task's prompt, whose boxes are quotes when the completion repeats them, not
    answers.  ``tuples`` (the gold is a tuple): a final ``x = 3, y = -1`` is the answer ``(3, -1)``.
    """
    if not text:
        return []
    if not isinstance(text, str):
        text = str(text)
    tail, bold, alternatives = normalize(text[-TAIL_CHARS:], math=numeric), [], []
    if numeric:  # text answers (exact, regex) are compared as written, markdown included
        tail, bold = _unbold(tail)
        tail, alternatives = split_parenthetical(tail)
        found = system_answers(tail) if tuples else []
        if found:
            return found
    stmts = _stated(tail, numeric, bold, quoted_boxes(prompt, math=numeric))
    stmts = _revised(tail, stmts, numeric)
    if numeric and stmts and retracted(tail[max(st[1] for st in stmts) :]):
        return []  # "The answer is 12. Wait, I forgot the" : taken back, and no new answer
    if not stmts and numeric:
        found, start, end = _final_number(tail)
        stmts = [((9, -start), end, found)] if found else []
    ranked = sorted(stmts, key=lambda st: st[0])
    out: list[str] = []
    for _, _, answers in ranked:
        for a in answers:
            if a and a not in out:
                out.append(a)
    if numeric and out:
        start, end = _answer_span(tail, ranked[0])
        items = {x for a in out for x in a.split(LIST_SEP)}
        for a in conditional_alternatives(tail, start, end) + alternatives:
            if a not in items:  # "3 or 7" already names its 7
                out.append(a)
                items.add(a)
        out = [as_interval(a) or a for a in out]
    return out[:MAX_ANSWERS]


def _answer_span(tail: str, st: Statement) -> tuple[int, int]:
    """Where the answer of a statement starts and ends in the tail: a box whole, the first number
    after a marker, the fallback's number."""
    (rule, neg_start), end = st[0], st[1]
    start = -neg_start
    if rule in (0, 9):
        return start, end
    m = NUMBER.search(tail, start, end)
    return (m.start(), m.end()) if m else (start, end)


def extract_choices(text: str | None, *, prompt: str | None = None) -> list[str]:
    """The option letters the completion states (rldata.verify.choice), the final one first; several:
    a hedge.  Revisions apply as to any answer (``The answer is (B). Wait, it is (A).`` states A)."""
    if not text:
        return []
    tail, _ = _unbold(normalize(str(text)[-TAIL_CHARS:]))
    quoted = quoted_boxes(prompt)
    boxes = [b for b in _boxes(tail) if not _is_quoted(tail, b[0], b[2], quoted)]
    stmts = _revised(tail, choice_statements(tail, boxes), numeric=False)
    out: list[str] = []
    for _, _, letters in sorted(stmts, key=lambda st: st[0]):
        out.extend(x for x in letters if x not in out)
    return out[:MAX_ANSWERS]


def extract_answer(text: str | None, *, numeric: bool = True, prompt: str | None = None) -> str | None:
    """The first-ranked answer (a boxed one before ``####`` before ``answer is`` before ``Answer:``).

    Use :func:`extract_answers` to see a hedge: this returns one answer even when there are several.
    """
    found = extract_answers(text, numeric=numeric, prompt=prompt)
    return found[0] if found else None
