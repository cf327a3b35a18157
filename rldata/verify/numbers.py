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

__all__ = ["NUMBER", "canon", "clean_number", "normalize"]

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


def normalize(text: str) -> str:
    """NFKC plus the fixes it needs (see the module docstring)."""
    text = _SUPERSCRIPT_RUN.sub(lambda m: "^{" + m.group().translate(_SUPER_TO_ASCII) + "}", text)
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\u2212", "-").replace("\u2044", "/").replace("{,}", ",")
    text = _LATEX_THIN_SPACE.sub(" ", text)
    text = _PHANTOM.sub("", text) if "phantom" in text else text
    return _CONTROL.sub(" ", text)


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
