"""Text normalisation and tokens for matching tasks against eval items.

Both sides go through the same steps, vectorised over a Polars column (:func:`normalise`):

- Unicode NFKC and the invisible format characters removed (zero-width spaces and joiners, BOM, soft
  hyphen, bidirectional controls): the ingest's own normalisation;
- lower case;
- digit grouping: ``1,000,000``, ``1{,}000`` and ``1\\,000`` are ``1000`` (a comma followed by a space,
  as in a list, is left alone);
- LaTeX spelling: ``\\dfrac`` and ``\\tfrac`` are ``\\frac``, ``\\le``/``\\leqslant`` are ``\\leq`` (and the
  same for ``ge``, ``ne``); ``$``, ``\\(``, ``\\)``, ``\\[``, ``\\]``, ``\\left``, ``\\right``, ``\\text``,
  ``\\mathrm``, ``\\displaystyle`` and the spacing commands are dropped;
- whitespace does not matter: the text is split into tokens.

A token (:data:`TOKEN`) is a run of word characters or one other visible character, except braces,
backslashes, dollars and quotes (``2+3`` is ``2 + 3``, ``x^{2}`` and ``x^2`` are ``x ^ 2``).  Tokens are
hashed to 64-bit integers by Polars (:func:`token_hashes`, one flat array plus offsets), and n-grams are
rolling combinations of those hashes (:func:`grams`), so matching a million tasks never builds a
Python string per token.  :func:`tokens` gives the same tokens as text, for the few matches whose span
is shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

from rldata.ingest.mapping import normalize_series

__all__ = [
    "TOKEN",
    "Tokens",
    "grams",
    "normalise",
    "rolling",
    "shingles",
    "subset",
    "token_hashes",
    "tokens",
    "whole",
]

TOKEN = r"""\w+|[^\w\s{}$\\'"‘’“”`]"""
_SEED = 0x5EED
_P = np.uint64(0x100000001B3)  # the FNV prime: the multiplier of the rolling n-gram hash

# (pattern, replacement), applied in order after lower-casing
_STEPS: tuple[tuple[str, str], ...] = (
    # digit grouping first, while "\," still separates digit groups (twice: "1,000,000" needs two passes)
    (r"(\d)(?:,|\{,\}|\\,)(\d{3})\b", "${1}${2}"),
    (r"(\d)(?:,|\{,\}|\\,)(\d{3})\b", "${1}${2}"),
    (r"\\[dt]frac\b", r"\frac"),
    (r"\\(?:leq?|leqslant)\b", r"\leq"),
    (r"\\(?:geq?|geqslant)\b", r"\geq"),
    (r"\\(?:neq?)\b", r"\neq"),
    (r"\\(?:left|right|bigl|bigr|big|displaystyle|textstyle|text|textrm|mathrm|mbox|operatorname)\b", " "),
    (r"\\[()\[\],;:! ]|\\q?quad\b|~|\$", " "),
)


def normalise(texts: pl.Series) -> pl.Series:
    """The matching form of each text (see the module doc); nulls stay null."""
    s = normalize_series(texts.cast(pl.String)).str.to_lowercase()
    for pattern, repl in _STEPS:
        s = s.str.replace_all(pattern, repl)
    return s


def tokens(texts: pl.Series) -> list[list[str]]:
    """The tokens of each text, as strings (for spans; matching uses :func:`token_hashes`)."""
    return normalise(texts).str.extract_all(TOKEN).to_list()


@dataclass(frozen=True)
class Tokens:
    """Every text's token hashes in one flat array: text i is ``hashes[offsets[i]:offsets[i + 1]]``."""

    hashes: np.ndarray  # uint64
    offsets: np.ndarray  # int64, len(texts) + 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1


def token_hashes(texts: pl.Series) -> Tokens:
    """Normalise, tokenise and hash ``texts`` (a null text has no tokens)."""
    toks = normalise(texts).str.extract_all(TOKEN).fill_null([])
    lengths = toks.list.len().to_numpy().astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = toks.explode(keep_nulls=False, empty_as_null=False)
    hashes = flat.hash(_SEED).to_numpy() if len(flat) else np.zeros(0, dtype=np.uint64)
    return Tokens(np.ascontiguousarray(hashes, dtype=np.uint64), offsets)


def subset(toks: Tokens, idx: np.ndarray) -> Tokens:
    """The texts ``idx`` of ``toks``, in that order."""
    idx = np.asarray(idx, dtype=np.int64)
    lengths = toks.lengths[idx]
    offsets = np.zeros(len(idx) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    pos = np.repeat(toks.offsets[:-1][idx] - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
    return Tokens(toks.hashes[pos], offsets)


def grams(toks: Tokens, ns) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """``(n, hashes, starts)`` for each n of ``ns`` (ascending): the hash of every n-gram that lies
    inside one text, and the position of its first token.

    The hash of tokens ``t_i .. t_{i+n-1}`` is ``((t_i * P + t_{i+1}) * P + ...) + t_{i+n-1}`` (mod 2^64),
    built one length at a time; :func:`whole` combines a text's tokens the same way."""
    h = toks.hashes
    want = sorted(set(ns))
    if not want or not len(h):
        return
    ends = np.repeat(toks.offsets[1:], toks.lengths)
    g = h.copy()
    for n in range(1, want[-1] + 1):
        if n > 1:
            g = g[:-1] * _P + h[n - 1 :]
        if n in want:
            start = np.arange(len(g), dtype=np.int64)
            ok = start + n <= ends[: len(g)]
            yield n, g[ok], start[ok]
        if not len(g):
            return


def rolling(toks: Tokens, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The n-gram hashes and start positions of :func:`grams` for one n."""
    for _, g, start in grams(toks, (n,)):
        return g, start
    return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)


def whole(toks: Tokens) -> np.ndarray:
    """One hash per text over all its tokens, combined as :func:`grams` combines an n-gram's."""
    out = np.zeros(len(toks), dtype=np.uint64)
    lengths = toks.lengths
    first = toks.offsets[:-1]
    for k in range(int(lengths.max()) if len(lengths) else 0):
        live = np.flatnonzero(lengths > k)
        out[live] = out[live] * _P + toks.hashes[first[live] + k]
    return out


def shingles(toks: Tokens, k: int = 2) -> Tokens:
    """Each text's k-token shingles (hashed), the sets MinHash compares; a text shorter than k keeps
    its tokens' combined hash as its one shingle."""
    g, start = rolling(toks, k)
    doc = np.searchsorted(toks.offsets, start, side="right") - 1
    counts = np.bincount(doc, minlength=len(toks)).astype(np.int64)
    short = np.flatnonzero((counts == 0) & (toks.lengths > 0))
    if len(short):
        g = np.concatenate([g, whole(subset(toks, short))])
        doc = np.concatenate([doc, short])
        order = np.argsort(doc, kind="stable")
        g, doc = g[order], doc[order]
        counts[short] = 1
    offsets = np.zeros(len(toks) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Tokens(np.ascontiguousarray(g), offsets)
