"""rldata.quality.normalise: the spellings a copied eval item may arrive in match as one text."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from rldata.quality.normalise import grams, rolling, shingles, subset, token_hashes, tokens, whole

BASE = "Janet sells 1000 eggs at $2 each; what is \\frac{1}{2} of x \\le 3?"


@pytest.mark.parametrize(
    "variant",
    [
        "JANET sells 1,000 eggs at $2 each; what is \\frac{1}{2} of x \\le 3?",  # case, digit grouping
        "Janet  sells\n1{,}000 eggs\tat 2 each; what is \\dfrac{1}{2} of x \\leq 3?",  # whitespace, LaTeX
        "Janet sells 1\\,000 eggs at \\$2 each; what is \\tfrac{1}{2} of \\(x\\) \\leqslant 3?",
        "Janet\u200b sells 1000 eggs at $2 each; what is $\\frac{1}{2}$ of $x \\le 3$?",  # zero-width
        "Ｊａｎｅｔ sells 1000 eggs at $2 each; what is \\displaystyle\\frac{1}{2} of x \\le 3?",  # NFKC
    ],
)
def test_spellings_of_one_text_give_the_same_tokens(variant):
    assert tokens(pl.Series([variant])) == tokens(pl.Series([BASE]))


def test_lists_and_other_numbers_are_not_merged():
    assert tokens(pl.Series(["1, 2, 3 and 1,0000 and 12,345,678"]))[0] == [
        "1", ",", "2", ",", "3", "and", "1", ",", "0000", "and", "12345678",
    ]  # fmt: skip


def test_symbols_are_tokens_so_operators_tell_expressions_apart():
    a, b = tokens(pl.Series(["9*3=", "9+3="]))
    assert a == ["9", "*", "3", "="] and b == ["9", "+", "3", "="]


def test_hashes_grams_and_whole_texts_agree():
    toks = token_hashes(pl.Series(["a b c d", None, "", "a b c d e"]))
    assert toks.lengths.tolist() == [4, 0, 0, 5]
    g, start = rolling(toks, 4)
    assert start.tolist() == [0, 4, 5]  # grams never cross texts
    w = whole(toks)
    assert g[0] == w[0] == g[1]  # "a b c d" as a 4-gram of both texts and as a whole text
    assert w[1] == w[2] == 0
    both = {n: (h.tolist(), s.tolist()) for n, h, s in grams(toks, (2, 4))}
    assert both[4] == (g.tolist(), start.tolist()) and len(both[2][0]) == 3 + 4
    sub = subset(toks, np.array([3, 0]))
    assert sub.lengths.tolist() == [5, 4] and whole(sub)[1] == w[0]


def test_shingles_are_bigrams_and_a_one_token_text_keeps_itself():
    sh = shingles(token_hashes(pl.Series(["a b c", "z", ""])))
    assert sh.lengths.tolist() == [2, 1, 0]
    assert sh.hashes[2] == token_hashes(pl.Series(["z"])).hashes[0]
