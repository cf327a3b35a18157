"""Verdict: a non-finite score is a verifier error (never a reward above a wrong answer's)."""

from __future__ import annotations

import pytest

from rldata.verify.base import Verdict, all_passed, verdict_rows


@pytest.mark.parametrize("score", [float("nan"), float("inf"), float("-inf"), "high"])
def test_a_non_finite_score_becomes_a_verifier_error(score):
    v = Verdict(True, score, extracted="4")
    assert (v.passed, v.score) == (None, 0.0) and "non-finite score" in v.error
    assert all_passed([v]) is None
    (row,) = verdict_rows("t", "x", "math", "1", [v])
    assert row["score"] == 0.0 and row["passed"] is None


def test_finite_scores_are_kept():
    assert Verdict(True, 1).score == 1 and Verdict(False, 0.25).error is None
