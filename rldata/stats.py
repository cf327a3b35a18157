"""Pass-rate statistics: Wilson score intervals and the unbiased pass@k estimator.

Scalar functions for single rows (the ledger writer) and Polars expressions for whole frames
(``rldata passrates``, reports), computing the same numbers.

Conventions
- ``n`` = verified samples (verifier errors excluded), ``c`` = correct ones.
- n = 0: the Wilson interval is (0, 1), "no information", so a filter on ``ci_low``/``ci_high``
  never mistakes an unsampled task for an easy or a hard one; the pass rate is 0.0, as in the
  ledger.
- pass@k (Chen et al. 2021): the probability that at least one of k samples drawn without
  replacement from the n is correct, ``1 - C(n-c, k) / C(n, k)``, computed in the stable product
  form ``1 - prod_{i=n-c+1..n} (1 - k/i)``.  Defined for 1 <= k <= n; the frame version gives null
  where k > n.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeVar

import polars as pl

from rldata.errors import ConfigError

__all__ = [
    "Z95",
    "pass_at_k",
    "pass_at_k_columns",
    "pass_at_k_expr",
    "wilson_exprs",
    "wilson_interval",
    "with_intervals",
]

Z95 = 1.959964  # two-sided 95% normal quantile
Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)


def _check_counts(n: int, c: int) -> None:
    if n < 0 or c < 0 or c > n:
        raise ConfigError(f"need 0 <= n_correct <= n, got n_correct={c}, n={n}", field="n_correct")


def wilson_interval(n_correct: int, n: int, *, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0.0, 1.0) when n = 0."""
    _check_counts(n, n_correct)
    if n == 0:
        return 0.0, 1.0
    p = n_correct / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from c correct of n samples (1 <= k <= n)."""
    _check_counts(n, c)
    if not 1 <= k <= n:
        raise ConfigError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}", field="k")
    if n - c < k:  # every k-subset contains a correct sample
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def wilson_exprs(n: str = "n", correct: str = "n_correct", *, z: float = Z95) -> tuple[pl.Expr, pl.Expr]:
    """(ci_low, ci_high) as Polars expressions over count columns; (0, 1) where n = 0."""
    nf = pl.col(n).cast(pl.Float64)
    p = pl.col(correct).cast(pl.Float64) / nf
    z2 = z * z
    denom = 1.0 + z2 / nf
    center = (p + z2 / (2.0 * nf)) / denom
    half = z * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt() / denom
    empty = pl.col(n) == 0
    lo = pl.when(empty).then(0.0).otherwise((center - half).clip(lower_bound=0.0))
    hi = pl.when(empty).then(1.0).otherwise((center + half).clip(upper_bound=1.0))
    return lo, hi


def pass_at_k_expr(k: int, n: str = "n", correct: str = "n_correct") -> pl.Expr:
    """pass@k as a Polars expression: the same product form as :func:`pass_at_k`, summed in logs.

    Null where k > n (no unbiased estimate) or the counts are invalid.
    """
    if k < 1:
        raise ConfigError(f"pass@k needs k >= 1, got {k}", field="k")
    nn, c = pl.col(n).cast(pl.Int64), pl.col(correct).cast(pl.Int64)
    # log prod_{i=n-c+1..n} (1 - k/i); the terms are only used where n - c >= k, so all are > 0
    log_miss = pl.int_ranges(nn - c + 1, nn + 1).list.eval((-k / pl.element()).log1p()).list.sum()
    return (
        pl.when((nn < k) | (c < 0) | (c > nn))
        .then(None)
        .when(nn - c < k)
        .then(1.0)
        .otherwise(1.0 - log_miss.exp())
    )


def with_intervals(df: Frame, *, n: str = "n", correct: str = "n_correct", z: float = Z95) -> Frame:
    """Add (or replace) ``pass_rate``, ``ci_low``, ``ci_high`` from the count columns."""
    lo, hi = wilson_exprs(n, correct, z=z)
    rate = pl.when(pl.col(n) > 0).then(pl.col(correct).cast(pl.Float64) / pl.col(n)).otherwise(0.0)
    return df.with_columns(rate.alias("pass_rate"), lo.alias("ci_low"), hi.alias("ci_high"))


def pass_at_k_columns(
    df: Frame, *, ks: Iterable[int] = (1, 2, 4, 8, 16), n: str = "n", correct: str = "n_correct"
) -> Frame:
    """Add one ``pass@k`` column per k (Float64; null where k > n)."""
    return df.with_columns([pass_at_k_expr(k, n, correct).alias(f"pass@{k}") for k in ks])
