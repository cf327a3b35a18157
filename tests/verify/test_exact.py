"""Exact-match and regex verifiers."""

from __future__ import annotations

import time

import pytest

from rldata.verify import for_domain, get_verifier
from rldata.verify.exact import ExactVerifier, RegexVerifier, normalize_text
from rldata.verify.run import run_verifier, verify_many


def _one(v, completion, answer):
    (verdict,) = run_verifier(v, completion, {"answer": answer}, timeout_s=5.0)
    return verdict


def test_registry():
    assert for_domain("text").name == "exact"
    assert get_verifier("regex").name == "regex"
    assert ExactVerifier.in_process and RegexVerifier.in_process


def test_normalize_text():
    assert normalize_text("  New\n\tYORK  city ") == "new york city"
    assert normalize_text("Straße") == normalize_text("STRASSE")  # casefold, not lower


@pytest.mark.parametrize(
    ("completion", "answer", "passed"),
    [
        ("Paris", "paris", True),
        ("  PARIS \n", "Paris", True),
        ("The answer is Paris.", "Paris", True),
        ("Answer:   new   york", "New York", True),
        ("\\boxed{Paris}", "paris", True),
        ("I think it is Paris", "Paris", False),
        ("Lyon", "Paris", False),
    ],
)
def test_exact(completion, answer, passed):
    v = _one(ExactVerifier(), completion, answer)
    assert v.passed is passed and v.error is None and v.score == float(passed)


@pytest.mark.parametrize("completion", ["", None, "   "])
def test_exact_no_answer(completion):
    v = _one(ExactVerifier(), completion, "Paris")
    assert v.passed is False and v.detail == {"reason": "no_answer"}


def test_exact_missing_gold_is_an_error():
    assert _one(ExactVerifier(), "Paris", None).passed is None


@pytest.mark.parametrize(
    ("completion", "pattern", "passed"),
    [
        ("42", r"\d+", True),
        ("The answer is 42 apples.", r"42\s+apples", True),
        ("Answer: yes", r"(?i)YES|no", True),
        ("42 and more", r"\d+", False),  # fullmatch, not search
        ("  abc  ", "abc", True),  # stripped
    ],
)
def test_regex(completion, pattern, passed):
    v = _one(RegexVerifier(), completion, pattern)
    assert v.passed is passed and v.error is None


@pytest.mark.parametrize("pattern", ["(", "[a-", "*x", "a{2,1}", "[z-a]", "\\"])
def test_bad_regex_is_an_error_verdict(pattern):
    v = _one(RegexVerifier(), "abc", pattern)
    assert v.passed is None and v.error.startswith("bad regex")


def test_catastrophic_regex_times_out_into_an_error():
    rv = RegexVerifier()
    t0 = time.monotonic()
    v = _one(rv, "a" * 40 + "!", r"(a|aa)+$")  # exponential backtracking, one C call
    assert v.passed is None and v.error.startswith("timeout")
    assert time.monotonic() - t0 < 2 * rv.match_timeout_s + 5.0  # the engine checks its clock coarsely


def test_huge_completion():
    v = _one(ExactVerifier(), "x" * 5_000_000 + "\nThe answer is Paris.", "paris")
    assert v.passed is True


def test_verify_many_routes_by_domain_and_name():
    out = verify_many(
        [("text", "Paris", {"answer": "paris"}), ("regex", "a1", {"answer": r"a\d"})], timeout_s=5.0
    )
    assert [vs[0].passed for vs in out] == [True, True]


def test_several_different_stated_answers_are_hedged():
    from rldata.verify.exact import ExactVerifier, RegexVerifier

    for v, gold in ((ExactVerifier(), "Paris"), (RegexVerifier(), "Par.*")):
        out = v.verify("Answer: Paris\nThe answer is London.", {"answer": gold})[0]
        assert out.passed is False and out.detail["reason"] == "hedged"
        assert v.verify("Answer: Paris\nThe answer is Paris.", {"answer": gold})[0].passed is True


def test_an_option_list_is_not_a_hedge():
    from rldata.verify.exact import ExactVerifier

    out = ExactVerifier().verify("A: red\nB: blue\nThe answer is B.", {"answer": "B"})[0]
    assert out.passed is True and out.extracted == "b"
