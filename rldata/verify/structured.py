"""Answers with a structure: an inequality chain read as an interval, a system's solution read as a
tuple, and what kind of answer a gold is (a choice letter, a tuple, a set, a value).

- :func:`as_interval`: ``-2 \\le x \\le 3`` is ``[-2, 3]``, ``2 < x \\leq 5`` is ``(2, 5]``, ``x \\geq 0``
  is ``[0, \\infty)``, ``7 \\ge x \\ge 2`` is ``[2, 7]``; a chain whose two signs point different ways
  (``1 < x > 3``) is left as written.
- :func:`system_answers`: the final ``x = 3, y = -1`` (also ``$x = 3$ and $y = -1$``, in a box, or
  in any order: the values come ordered by variable name) is ``(3, -1)``; used only when the gold is
  a tuple.
- :func:`gold_kind`: ``choice`` (``C``, ``(C)``, ``\\text{(C)}``), ``tuple`` (``(3, -1)``) or ``value``.
"""

from __future__ import annotations

import re

__all__ = ["CHAIN", "as_interval", "choice_letter", "gold_kind", "system_answers"]

_END = r"-?\s*(?:\d+(?:\.\d+)?(?:/\d+)?|\\[dt]?frac\s*\{\s*-?\d+\s*\}\s*\{\s*\d+\s*\}|\\infty)"
_LESS = r"(?:<|\\lt\b|\\leq?(?:slant)?\b)"
_MORE = r"(?:>|\\gt\b|\\geq?(?:slant)?\b)"
_VAR = r"[a-zA-Z]"
# An inequality chain: "a REL x REL b", "x REL b" or "b REL x" (REL all one way in a two-sided chain).
CHAIN = re.compile(
    rf"(?<![\w\\])(?:(?P<lo>{_END})\s*(?P<r1>{_LESS})\s*(?P<v1>{_VAR})\s*(?P<r2>{_LESS})\s*(?P<hi>{_END})"
    rf"|(?P<hi2>{_END})\s*(?P<r3>{_MORE})\s*(?P<v2>{_VAR})\s*(?P<r4>{_MORE})\s*(?P<lo2>{_END})"
    rf"|(?P<v3>{_VAR})\s*(?P<r5>{_LESS}|{_MORE})\s*(?P<b1>{_END})"
    rf"|(?P<b2>{_END})\s*(?P<r6>{_LESS}|{_MORE})\s*(?P<v4>{_VAR}))(?![\w\\/]|\.\d)"
)


def _strict(rel: str) -> bool:
    return rel in ("<", ">") or rel in ("\\lt", "\\gt")


def _clean(end: str) -> str:
    return re.sub(r"\s+", "", end).replace("-\\infty", "-\\infty")


def as_interval(s: str) -> str | None:
    """The interval an inequality chain states (see the module doc), or None when ``s`` is not one."""
    m = CHAIN.fullmatch(s.strip().strip("$").strip().rstrip(".").strip())
    if m is None:
        return None
    if m["v1"]:  # lo < x < hi
        lo, hi, lo_open, hi_open = m["lo"], m["hi"], _strict(m["r1"]), _strict(m["r2"])
    elif m["v2"]:  # hi > x > lo
        lo, hi, lo_open, hi_open = m["lo2"], m["hi2"], _strict(m["r4"]), _strict(m["r3"])
    else:
        rel = m["r5"] or m["r6"]
        bound = m["b1"] or m["b2"]
        less = re.fullmatch(_LESS, rel) is not None
        if m["b2"]:  # "3 > x" is "x < 3"
            less = not less
        if less:
            lo, hi, lo_open, hi_open = "-\\infty", bound, True, _strict(rel)
        else:
            lo, hi, lo_open, hi_open = bound, "\\infty", _strict(rel), True
    lo, hi = _clean(lo), _clean(hi)
    if "infty" in lo and not lo.startswith("-"):
        return None  # "\infty < x": not an interval
    return f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"


# ---- systems: "x = 3, y = -1" as the tuple (3, -1) ------------------------------------------------
_VALUE = r"-?\s*(?:\d+(?:\.\d+)?(?:/\d+)?|\\[dt]?frac\s*\{\s*-?\d+\s*\}\s*\{\s*\d+\s*\})"
_ASSIGN = rf"\$?\s*(?<![\w\\])({_VAR})\s*=\s*({_VALUE})(?![\w\\/^]|\.\d)\s*\$?"
_JOIN = r"\s*(?:,|;|\band\b|,\s*and\b|\\quad|\\qquad|\\[,;: ]|\\text\s*\{\s*(?:,|and)?\s*\})*\s*"
_RUN = re.compile(rf"{_ASSIGN}(?:{_JOIN}{_ASSIGN}){{1,5}}")
_ONE = re.compile(_ASSIGN)
_HEDGE = re.compile(r"\b(?:or|either|maybe|perhaps|possibly|might|could|alternatively)\b", re.IGNORECASE)
_REVISED = re.compile(r"\b(?:wait|actually|correction|oops|mistake|wrong)\b", re.IGNORECASE)


def _tuple(run: str) -> str | None:
    pairs = [(m[1], re.sub(r"\s+", "", m[2])) for m in _ONE.finditer(run)]
    names = [v for v, _ in pairs]
    if len(set(names)) != len(names):
        return None  # "x = 1, x = 2": a list of values of one variable, not a system
    return "(" + ", ".join(value for _, value in sorted(pairs)) + ")"


def system_answers(tail: str, max_remainder: int = 80) -> list[str]:
    """The final system solution(s) as tuples: the last run of assignments, when it ends the text
    (a short remainder, no new sentence) or sits in the last box; with the run before it when a
    hedge word joins them (``x = 1, y = 2 or x = 2, y = 1``: a hedge) unless a revision does."""
    runs = list(_RUN.finditer(tail))[-8:]
    if not runs:
        return []
    last = runs[-1]
    rest = tail[last.end() :].strip().lstrip("}$").strip()
    if len(rest) > max_remainder or re.search(r"\d|[.!?]\s+\S", rest.rstrip(".!")):
        return []
    found = _tuple(last.group())
    if found is None:
        return []
    out = [found]
    if len(runs) > 1:
        between = tail[runs[-2].end() : last.start()]
        if _HEDGE.search(between) and not _REVISED.search(between):
            other = _tuple(runs[-2].group())
            if other is not None and other != found:
                out.append(other)
    return out


# ---- gold kinds ---------------------------------------------------------------------------------
_CHOICE_GOLD = re.compile(
    r"\s*\$?\s*(?:\\(?:text|textbf|mathrm|mathbf)\s*\{\s*)?\(?\s*([A-J])\s*\)?\s*\}?\s*\$?\s*\.?\s*"
)
_TUPLE_GOLD = re.compile(r"\s*\$?\s*(?:\\left\s*)?\(([^()\[\]]*,[^()\[\]]*)(?:\\right\s*)?\)\s*\$?\s*")


def choice_letter(s: str | None) -> str | None:
    """The option letter ``s`` is (``C``, ``(C)``, ``\\text{(C)}``, ``$C$``), else None."""
    m = _CHOICE_GOLD.fullmatch(s or "")
    return m[1] if m else None


def gold_kind(gold: object) -> str:
    """``choice``, ``tuple`` or ``value``: how the math verifier reads answers against this gold."""
    if not isinstance(gold, str):
        return "value"
    if choice_letter(gold):
        return "choice"
    return "tuple" if _TUPLE_GOLD.fullmatch(gold) else "value"
