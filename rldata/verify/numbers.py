"""Numbers as models write them, read whole and normalized; and the text normalization before it.

:func:`normalize`: NFKC (full-width ``４２`` is ``42``, no-break and thin spaces are spaces),
superscript exponents become ``^{..}`` (before NFKC would glue ``10²³`` into ``1023``), the unicode
minus is ``-``, LaTeX ``{,}`` is ``,``, ``\\,`` between digits is a space, and ``\\phantom{..}``
(which shows nothing) is dropped.

:data:`NUMBER` reads numbers whole: ``.5``, ``1.5e3``, ``6.02 x 10^23``, thousands separators
``1,000``, ``1 000``, ``1'000``, ``1.000.000`` and Indian ``1,00,000``; :func:`clean_number` gives
them normalized (``1000``, ``0.5``, ``6.02*10^(23)``).  A single ``1.000`` is the decimal 1.000, and
``1,5`` is left as written (a list or a decimal comma: ambiguous, so it never equals a plain number).
Split out of :mod:`rldata.verify.extract`, which re-exports the public names.
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

from rldata.verify.words import words_to_digits

__all__ = ["NUMBER", "canon", "canon_at", "clean_number", "math_normalize", "normalize", "read_number"]

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

_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺"
_SUPERSCRIPT_RUN = re.compile(f"[{_SUPERSCRIPTS}]+")
_SUPER_TO_ASCII = str.maketrans(_SUPERSCRIPTS, "0123456789-+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_LATEX_THIN_SPACE = re.compile(r"(?<=\d)\\[,;:! ](?=\d)")
# \phantom{..} takes space but shows nothing: what it holds is not written (one level of braces inside)
_PHANTOM = re.compile(r"\\[hv]?phantom\s*\{(?:[^{}]|\{[^{}]*\})*\}")


def normalize(text: str, *, math: bool = False) -> str:
    """NFKC plus the fixes it needs (see the module docstring); ``math``: also the rewrites of
    :func:`math_normalize` (the math verifier's answers, never text answers)."""
    text = _SUPERSCRIPT_RUN.sub(lambda m: "^{" + m.group().translate(_SUPER_TO_ASCII) + "}", text)
    if math:  # "5½" is five and a half, not the "51/2" that NFKC would make of it
        text = _DIGIT_VULGAR.sub(r"\1 ", text)
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\u2212", "-").replace("\u2044", "/").replace("{,}", ",")
    text = _LATEX_THIN_SPACE.sub(" ", text)
    text = _PHANTOM.sub("", text) if "phantom" in text else text
    text = _CONTROL.sub(" ", text)
    return math_normalize(text) if math else text


def canon(m: re.Match) -> str:
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
    return canon(num) if num is not None and num["amb"] is None else None


def canon_at(m: re.Match, text: str) -> str:
    """:func:`canon` of a NUMBER match in ``text``, with ``%`` kept when a percent sign or word
    follows it: a percent is compared as a percent (rldata.verify.math), never as the bare number."""
    out = canon(m)
    return out + "%" if _PERCENT_AFTER.match(text, m.end()) and m["amb"] is None else out


def read_number(s: str) -> str | None:
    """:func:`clean_number`, keeping a percent: ``"40%"``, ``"40\\%"``, ``"40 percent"`` are ``"40%"``."""
    num = clean_number(s)
    if num is None:
        return None
    return num + "%" if _PERCENT_END.search(s) else num


_PERCENT_AFTER = re.compile(r"[ \t]*(?:\\%|%|\\text\{\s*percent\s*\}|per[ \t]?cent\b)")
_PERCENT_END = re.compile(r"(?:\\%|%|percent)\s*\.?\s*$")

# ---- the math verifier's rewrites ---------------------------------------------------------------
# Forms models write that mean a plain number, rewritten to one before answers are read.
_VULGAR = "¼½¾⅐⅑⅒⅓⅔⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞"
_DIGIT_VULGAR = re.compile(f"(\\d)(?=[{_VULGAR}])")
# A dash before a number where a sign can stand ("–3", "= —12") is a minus; an en dash between two
# spaced numbers ("7 – 3") is a subtraction; between two digits ("3–5") a range ("3 to 5").
_DASHES = "\u2012\u2013\u2014\u2015\ufe58"
_UNARY_DASH = re.compile(f"(?<![\\w)\\]}}.])[{_DASHES}](?=\\.?\\d)")
_BINARY_DASH = re.compile(r"(?<=\d)[ \t]+\u2013[ \t]+(?=\d)")
_RANGE_DASH = re.compile(r"(?<=\d)\u2013(?=\d)")
_RELATIONS = {"≤": " \\le ", "⩽": " \\le ", "≥": " \\ge ", "⩾": " \\ge ", "≠": " \\ne "}
_RELATION = re.compile("[≤⩽≥⩾≠]")
# Repeating decimals: 0.\overline{3}, 0.1\bar{6}, 0.\dot{3}; 0.333..., 0.1666..., 0.142857142857...
_OVERLINE = re.compile(
    r"(?<![\d.])(\d{1,12})?\.(\d{0,12})\s*\\(?:overline|bar|dot)\s*(?:\{\s*(\d{1,12})\s*\}|(\d))"
)
_ELLIPSIS = re.compile(r"(?<![\d.])(\d{1,12})\.(\d{2,24})(?=\s*(?:\.\.\.|\\[lc]?dots\b))")
# Mixed numbers: "3 1/2", "2\frac{3}{4}", "2 \tfrac34" (a proper fraction after a whole number).
_MIXED = re.compile(
    r"(?<![\w.,/)}])(-?)(\d{1,9})(?:[ \t]+(\d{1,9})/(\d{1,9})"
    r"|[ \t]*\\[dt]?frac\s*(?:\{\s*(\d{1,9})\s*\}\s*\{\s*(\d{1,9})\s*\}|(\d)(\d)))(?![\d/]|\.\d)"
)
_MIXED_HINT = re.compile(r"\d[ \t]+\d{1,9}/\d|\d[ \t]*\\[dt]?frac")
# European grouping where it is unambiguous: dot groups before a decimal comma (1.234,56), or a euro
# amount with one dot group (4.800 €, €12.000: a currency has 2 decimals, not 3) or a decimal comma
# (12,50 €).  A bare 1.000 or 2,5 stays ambiguous.
_EURO = r"(?:€|\bEUR\b|\beuros?\b)"
_EU_HINT = re.compile(r"\d\.\d{3},\d")
_EU_DECIMAL = re.compile(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})+),(\d{1,2})(?![\d,])")
_EU_AMOUNT = re.compile(
    rf"(?<![\d.,])(?:(?<=€)|(?<=€ )|(?<=EUR )|(?<=EUR))(\d{{1,3}})(?:\.(\d{{3}})|,(\d{{2}}))(?![\d,]|\.\d)"
    rf"|(?<![\d.,])(\d{{1,3}})(?:\.(\d{{3}})|,(\d{{2}}))(?=[ \t]?{_EURO})"
)
# "4 dollars and 25 cents" is 4.25 dollars
_DOLLARS_CENTS = re.compile(
    r"(?<![\d.,])(\d+)[ \t]+dollars?[ \t]+and[ \t]+(\d{1,2})[ \t]+cents?\b", re.IGNORECASE
)


def _fraction(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def _repeating(whole: str | None, fixed: str, period: str) -> str:
    base = Fraction(int(whole or 0)) + (Fraction(int(fixed), 10 ** len(fixed)) if fixed else 0)
    return _fraction(base + Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed)))


def _overline(m: re.Match) -> str:
    return _repeating(m[1], m[2], m[3] or m[4])


def _ellipsis(m: re.Match) -> str:
    """0.1666... -> 1/6: the shortest fixed part and period that repeats at least twice to the end
    (a single digit at least twice: 0.33...); otherwise left as written (3.14159...)."""
    digits = m[2]
    for fixed in range(min(len(digits) - 1, 6) + 1):
        rest = digits[fixed:]
        for size in range(1, len(rest) // 2 + 1):
            if rest == rest[:size] * (len(rest) // size) and len(rest) % size == 0:
                return _repeating(m[1], digits[:fixed], rest[:size])
    return m.group()


def _mixed(m: re.Match) -> str:
    sign, whole = m[1], int(m[2])
    num, den = (m[3], m[4]) if m[3] else (m[5], m[6]) if m[5] else (m[7], m[8])
    num, den = int(num), int(den)
    if not 0 < num < den:
        return m.group()  # "2 3/2", "2\\frac{4}{2}": not a mixed number
    q = whole + Fraction(num, den)
    return _fraction(-q if sign else q)


def _eu_amount(m: re.Match) -> str:
    whole, thousands, cents = (m[1], m[2], m[3]) if m[1] else (m[4], m[5], m[6])
    return whole + thousands if thousands else f"{whole}.{cents}"


def math_normalize(text: str) -> str:
    """The math verifier's rewrites (after :func:`normalize`): number words as digits, dashes as
    minus signs, ``≤``/``≥`` as ``\\le``/``\\ge``, repeating decimals and mixed numbers as fractions,
    unambiguous European grouping and ``N dollars and M cents`` as plain numbers."""
    text = words_to_digits(text)
    if any(c in text for c in _DASHES):
        text = _UNARY_DASH.sub("-", text)
        text = _BINARY_DASH.sub(" - ", text)
        text = _RANGE_DASH.sub(" to ", text)
    if _RELATION.search(text):
        text = _RELATION.sub(lambda m: _RELATIONS[m.group()], text)
    if "overline" in text or "bar" in text or "dot" in text:
        text = _OVERLINE.sub(_overline, text)
    if "..." in text or "dots" in text:
        text = _ELLIPSIS.sub(_ellipsis, text)
    if _MIXED_HINT.search(text):  # a plain prefix: scanned fast, unlike _MIXED itself
        text = _MIXED.sub(_mixed, text)
    if "," in text and _EU_HINT.search(text):
        text = _EU_DECIMAL.sub(lambda m: m[1].replace(".", "") + "." + m[2], text)
    if "€" in text or "EUR" in text or "euro" in text:
        text = _EU_AMOUNT.sub(_eu_amount, text)
    if "cent" in text:
        text = _DOLLARS_CENTS.sub(lambda m: f"{m[1]}.{int(m[2]):02d} dollars", text)
    return text
