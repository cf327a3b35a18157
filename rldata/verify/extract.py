"""Pull the final answer out of a model's completion.

Priority (the first rule that finds something wins; within a rule the LAST occurrence wins,
because models restate and correct themselves before concluding):

1. ``\\boxed{...}`` / ``\\fbox{...}``, brace-balanced (nested braces fine, ``\\{`` ignored)
2. ``#### 42`` (GSM8K style)
3. ``The answer is 42`` / ``The final answer is $\\frac{1}{2}$.`` (case-insensitive)
4. ``A: 42`` / ``Answer: 42``
5. the final number in the text (ints, decimals, negatives, fractions ``3/4``, ``1,234``)

Rule 5 is skipped with ``numeric=False`` (text answers), where rules 2-4 return the rest of the
line instead of the first number in it.

Work is bounded whatever the input: only the last :data:`TAIL_CHARS` characters are scanned,
every pattern is linear (no nested quantifiers over the same characters), and brace matching is
one pass over brace tokens, so a 10 MB completion or ``"\\boxed{" * 10000`` costs the same as a
normal one.
"""

from __future__ import annotations

import re

__all__ = ["NUMBER", "TAIL_CHARS", "clean_number", "extract_answer"]

TAIL_CHARS = 8192  # answers sit at the end; a model that rambles for more than 8 KB after it lost it
MAX_MARKERS = 16  # occurrences of one marker tried, from the last
MAX_LINE = 256  # what follows a marker ("The answer is ...") is read up to here

# A number: 1,234 (thousands groups of exactly 3) | 1234, optional decimals, optional /denominator.
# A minus counts as a sign only when no digit, letter or closing bracket precedes it: the final
# number of "10-3" is "3", not "-3".
_CORE = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?"
NUMBER = re.compile(rf"(?:(?<![\w)\]}}.])-)?{_CORE}")
_FULL_NUMBER = re.compile(rf"\s*\\?\$?\s*(-?{_CORE})\s*%?\s*\.?\s*")

_BOX_TOKENS = re.compile(r"\\(?:boxed|fbox)\s*\{|\\[{}]|[{}]")
_HASHES = re.compile(r"####[ \t]*")
_ANSWER_IS = re.compile(r"\banswer\s+is\b[ \t]*:?[ \t]*", re.IGNORECASE)
_ANSWER_COLON = re.compile(r"(?:\b(?i:answer)|(?<![\w])A)[ \t]*:[ \t]*")
# "$...$" or "\(...\)" right after a marker: a LaTeX answer
_MATH_DELIM = re.compile(rf"\$\$?([^$\n]{{1,{MAX_LINE}}})\$\$?|\\\(((?:(?!\\\)).){{1,{MAX_LINE}}})\\\)")


def clean_number(s: str) -> str | None:
    """``"$1,234."`` -> ``"1234"``; None if ``s`` is not a single number (with optional $, %, period)."""
    m = _FULL_NUMBER.fullmatch(s)
    return m.group(1).replace(",", "") if m else None


def _last_box(s: str) -> tuple[int, int, int] | None:
    """(box start, content start, content end) of the \\boxed{} that closes last, or None."""
    starts = [i for i in (s.find("\\boxed"), s.find("\\fbox")) if i >= 0]
    if not starts:
        return None
    stack: list[tuple[int, int] | None] = []  # per open brace: (box start, content start) or None
    best = None
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
                best = (opened[0], opened[1], m.start())
    return best


def _boxed(tail: str) -> str | None:
    """Content of the \\boxed{} that closes last (for nested boxes, the innermost whole one)."""
    span = _last_box(tail)
    if span is None:
        return None
    content = tail[span[1]:span[2]].strip()
    for _ in range(8):  # \boxed{\boxed{3}}: the answer is 3 (bounded: adversarial nesting)
        inner = _last_box(content)
        if inner is None or inner[0] != 0 or inner[2] != len(content) - 1:
            break
        content = content[inner[1]:inner[2]].strip()
    return content or None


def _after_marker(rest: str, numeric: bool) -> str | None:
    """What a marker ("####", "The answer is", "Answer:") points at, from the rest of its line."""
    rest = rest.split("\n", 1)[0]
    m = _MATH_DELIM.match(rest.lstrip())
    if m:
        inner = (m.group(1) or m.group(2) or "").strip()
        num = clean_number(inner)
        if num is not None:
            return num
        if inner:
            return inner
    if numeric and rest.lstrip().startswith("\\"):  # undelimited LaTeX: "is \frac{1}{2}."
        return rest.strip().rstrip(".").strip() or None
    if numeric:
        m = NUMBER.search(rest)
        return m.group().replace(",", "") if m else None
    text = rest.strip().rstrip(".").strip()
    if text.startswith("$") and text.endswith("$") and len(text) > 1:
        text = text.strip("$").strip()
    return text or None


def _last_marker(pattern: re.Pattern, tail: str, numeric: bool) -> str | None:
    # Only the last few markers: a tail full of "A:" must not cost one line scan per marker.
    for m in list(pattern.finditer(tail))[-MAX_MARKERS:][::-1]:
        ans = _after_marker(tail[m.end():m.end() + MAX_LINE], numeric)
        if ans is not None:
            return ans
    return None


def extract_answer(text: str | None, *, numeric: bool = True) -> str | None:
    """The answer a completion gives, or None when it gives none (see the module docstring)."""
    if not text:
        return None
    if not isinstance(text, str):
        text = str(text)
    tail = text[-TAIL_CHARS:].replace("\u2212", "-")  # unicode minus, as some tokenizers emit
    boxed = _boxed(tail)
    if boxed is not None:
        num = clean_number(boxed)
        return num if num is not None else boxed
    for pattern in (_HASHES, _ANSWER_IS, _ANSWER_COLON):
        ans = _last_marker(pattern, tail, numeric)
        if ans is not None:
            return ans
    if not numeric:
        return None
    last = None
    for last in NUMBER.finditer(tail):
        pass
    return last.group().replace(",", "") if last else None
