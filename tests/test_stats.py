"""Wilson intervals and unbiased pass@k: known values, edge cases, and scalar == vectorized."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import polars as pl
import pytest

from rldata.stats import Z95, pass_at_k, pass_at_k_columns, wilson_interval, with_intervals


def _score_test_bounds(c, n, z=Z95):
    """Independent check: the Wilson interval is where |p_hat - p| <= z sqrt(p(1-p)/n); bisect for it."""
    p_hat = c / n

    def inside(p):
        return abs(p_hat - p) <= z * math.sqrt(p * (1 - p) / n)

    def edge(lo, hi):  # lo outside, hi inside (or the reverse): find the boundary
        for _ in range(200):
            mid = (lo + hi) / 2
            if inside(mid) == inside(hi):
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2

    low = 0.0 if c == 0 else edge(0.0, p_hat)
    high = 1.0 if c == n else edge(1.0, p_hat)
    return low, high


def test_wilson_known_value_3_of_16():
    lo, hi = wilson_interval(3, 16)
    assert lo == pytest.approx(0.065916, abs=1e-6)
    assert hi == pytest.approx(0.430089, abs=1e-6)


@pytest.mark.parametrize(
    ("c", "n"), [(0, 1), (1, 1), (0, 16), (16, 16), (3, 16), (8, 16), (1, 1000), (999, 1000)]
)
def test_wilson_matches_score_test_inversion(c, n):
    lo, hi = wilson_interval(c, n)
    ref_lo, ref_hi = _score_test_bounds(c, n)
    assert lo == pytest.approx(ref_lo, abs=1e-9)
    assert hi == pytest.approx(ref_hi, abs=1e-9)
    assert 0.0 <= lo <= c / n <= hi <= 1.0


def test_wilson_no_samples_is_the_whole_interval():
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_narrows_with_n_and_z():
    assert wilson_interval(50, 100)[0] > wilson_interval(5, 10)[0]
    lo90, hi90 = wilson_interval(5, 10, z=1.644854)
    lo95, hi95 = wilson_interval(5, 10)
    assert lo95 < lo90 < hi90 < hi95


@pytest.mark.parametrize(("c", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_bad_counts(c, n):
    with pytest.raises(ValueError):
        wilson_interval(c, n)


def _exact_pass_at_k(n, c, k):
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (16, 3, 1, 3 / 16),  # pass@1 is the pass rate
        (16, 0, 1, 0.0),  # c = 0
        (16, 0, 16, 0.0),
        (16, 16, 1, 1.0),  # c = n
        (16, 1, 16, 1.0),  # k = n with one correct
        (16, 13, 4, 1.0),  # n - c < k: every draw of 4 holds a correct one
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (10, 2, 3, 1 - 56 / 120),  # 1 - C(8,3)/C(10,3)
    ],
)
def test_pass_at_k_known_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n", "c"), [(16, 5), (64, 1), (200, 7), (1000, 3), (1000, 500)])
def test_pass_at_k_matches_exact_fractions(n, c):
    for k in (1, 2, 4, 8, 16, n):
        assert pass_at_k(n, c, k) == pytest.approx(_exact_pass_at_k(n, c, k), rel=1e-9, abs=1e-12)


def test_pass_at_k_is_monotone_in_k():
    vals = [pass_at_k(32, 3, k) for k in range(1, 33)]
    assert all(a <= b + 1e-15 for a, b in itertools.pairwise(vals))


@pytest.mark.parametrize(("n", "c", "k"), [(4, 1, 5), (4, 1, 0), (4, 5, 1)])
def test_pass_at_k_rejects_undefined(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def _frame():
    rows = [(16, 3), (16, 0), (16, 16), (4, 4), (0, 0), (1000, 1), (8, 2), (1, 1)]
    return pl.DataFrame(
        {
            "task_id": [f"t{i}" for i in range(len(rows))],
            "n": [r[0] for r in rows],
            "n_correct": [r[1] for r in rows],
        },
        schema_overrides={"n": pl.Int32, "n_correct": pl.Int32},
    )


def test_with_intervals_matches_scalar():
    df = with_intervals(_frame())
    for row in df.iter_rows(named=True):
        lo, hi = wilson_interval(row["n_correct"], row["n"])
        assert row["ci_low"] == pytest.approx(lo, abs=1e-12) and row["ci_high"] == pytest.approx(
            hi, abs=1e-12
        )
        assert row["pass_rate"] == (row["n_correct"] / row["n"] if row["n"] else 0.0)


def test_pass_at_k_columns_match_scalar_and_are_null_past_n():
    ks = (1, 2, 4, 8, 16)
    df = pass_at_k_columns(_frame(), ks=ks)
    assert [f"pass@{k}" for k in ks] == df.columns[-len(ks) :]
    for row in df.iter_rows(named=True):
        for k in ks:
            got = row[f"pass@{k}"]
            if k > row["n"]:
                assert got is None
            else:
                assert got == pytest.approx(pass_at_k(row["n"], row["n_correct"], k), rel=1e-9, abs=1e-12)


def test_frame_functions_work_lazily():
    lazy = pass_at_k_columns(with_intervals(_frame().lazy()), ks=(1,))
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.collect().height == _frame().height
