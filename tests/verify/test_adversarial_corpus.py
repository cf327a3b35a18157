"""rldata's math verifier on the adversarial corpus: no false positive, and at least bare
math-verify's agreement with the labels (both computed here, on the real math-verify).

The held-out sets (math_adversarial_heldout*.jsonl) were written before the extraction rules they
cover and were not tuned on: each must keep 0 false positives; its agreement is measured, and the
floor below is the figure it had when it was first scored after its rules (tests/data/README.md)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rldata.verify.agreement import agreement, bare_math_verify, load_labelled, rldata_math

CORPUS = Path(__file__).parents[1] / "data" / "math_adversarial.jsonl"
HELDOUT = Path(__file__).parents[1] / "data" / "math_adversarial_heldout.jsonl"
HELDOUT2 = Path(__file__).parents[1] / "data" / "math_adversarial_heldout2.jsonl"
HELDOUT3 = Path(__file__).parents[1] / "data" / "math_adversarial_heldout3.jsonl"
# issue 44: answers as models write them (development rows adv44-*; held-out set 3)
FORMS = {
    "money",
    "number_words",
    "percent_fraction",
    "mixed_number",
    "interval",
    "system",
    "repeating",
    "european",
    "dash_minus",
    "leading_dot",
    "choice",
    "final_box",
    "parenthetical",
    "rate_units",
    "list_set",
    "total_line",
    "conditional_hedge",
    "cutoff_retraction",
}
CLASSES = {
    "plain",
    "hedge",
    "echo",
    "self_correction",
    "truncation",
    "units",
    "percent",
    "sci",
    "separators",
    "latex",
    "unicode",
    "whole_number",
    "empty",
    "huge",
    "revision",
    "bold",
    "quoted_box",
} | FORMS


HELDOUT_FLOOR = 47  # of 48: its first score, before one bug it showed was fixed (README)
HELDOUT2_FLOOR = 38  # of 38: its first, untuned score (README); never tuned on
HELDOUT3_FLOOR = 199  # of 199: its first score after the issue-44 rules (README); never tuned on
CORPUS_FLOOR = 411  # of 413: the corpus after issue 44 (2 deliberate misses, benchmarks/RESULTS.md)


@pytest.fixture(scope="module")
def rows():
    return load_labelled(CORPUS)


def test_corpus_covers_every_class(rows):
    assert len(rows) >= 150
    counts = Counter(r["class"] for r in rows)
    assert set(counts) == CLASSES
    assert len({r["id"] for r in rows}) == len(rows)
    assert 0.3 < sum(r["label"] for r in rows) / len(rows) < 0.7  # both labels well represented


def test_no_false_positive_and_at_least_bare_math_verify_agreement(rows):
    labels = [r["label"] for r in rows]
    ours = agreement(rldata_math(rows), labels)
    bare = agreement([bare_math_verify(r["gold"], r["completion"]) for r in rows], labels)
    assert ours.false_pos == 0, ours
    assert ours.agree >= bare.agree and ours.agree >= CORPUS_FLOOR, (ours, bare)
    assert bare.false_pos > 0  # the corpus does catch a verifier that trusts the last number


def test_heldout_half_no_false_positive():
    rows = load_labelled(HELDOUT)
    assert {r["class"] for r in rows} == {"revision", "hedge", "bold", "quoted_box"}
    assert not {r["completion"] for r in rows} & {r["completion"] for r in load_labelled(CORPUS)}
    ours = agreement(rldata_math(rows), [r["label"] for r in rows])
    assert ours.false_pos == 0, ours
    assert ours.agree >= HELDOUT_FLOOR, ours


def test_second_heldout_set_no_false_positive():
    rows = load_labelled(HELDOUT2)
    assert len(rows) == 38 and {r["class"] for r in rows} == {"revision", "hedge", "bold", "quoted_box"}
    seen = {r["completion"] for r in load_labelled(CORPUS)} | {
        r["completion"] for r in load_labelled(HELDOUT)
    }
    assert not {r["completion"] for r in rows} & seen
    ours = agreement(rldata_math(rows), [r["label"] for r in rows])
    assert ours.false_pos == 0 and ours.agree >= HELDOUT2_FLOOR, ours


def test_third_heldout_set_answers_as_models_write_them():
    """Written and scored before the issue-44 rules; every class has right and wrong rows."""
    rows = load_labelled(HELDOUT3)
    assert len(rows) == 199 and {r["class"] for r in rows} == FORMS
    assert all({r["label"] for r in rows if r["class"] == c} == {True, False} for c in FORMS)
    seen = {r["completion"] for path in (CORPUS, HELDOUT, HELDOUT2) for r in load_labelled(path)}
    # one row repeats adv127 of the corpus word for word (same gold and label; found after it was written)
    assert {r["completion"] for r in rows} & seen == {"The answer is 1.000"}
    labels = [r["label"] for r in rows]
    ours = agreement(rldata_math(rows), labels)
    assert ours.false_pos == 0 and ours.agree >= HELDOUT3_FLOOR, ours
    bare = agreement([bare_math_verify(r["gold"], r["completion"]) for r in rows], labels)
    assert bare.false_pos > 0  # the set catches a verifier that reads forms loosely


def test_agreement_counts():
    a = agreement([True, True, False, False], [True, False, True, False])
    assert (a.n, a.agree, a.false_pos, a.false_neg, a.rate) == (4, 2, 1, 1, 0.5)
    with pytest.raises(ValueError):
        agreement([True], [])
