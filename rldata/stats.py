"""Pass-rate statistics: Wilson score intervals, the unbiased pass@k estimator, and pass-rate bands with
the count rule that decides a task against one.

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

Bands: ``rldata filter`` (:mod:`rldata.ledger.select`) and the adaptive stopping rules
(:mod:`rldata.adaptive`) both decide tasks with :func:`decide`; it lives here, below both, so that
neither imports the other to reach it.  The exact-rational band edges are explained in
:mod:`rldata.ledger.select`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

import polars as pl

from rldata.errors import ConfigError

__all__ = [
    "Z95",
    "Band",
    "accuracy_interval",
    "band_limits",
    "band_text",
    "decide",
    "default_min_n",
    "parse_band_text",
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


def accuracy_interval(pass_rates: Iterable[float], *, z: float = Z95) -> tuple[float, float]:
    """A 95% interval for an accuracy that is the mean of per-task pass rates (held-out evaluation):
    mean +- z * sd / sqrt(tasks), clipped to [0, 1].  Tasks, not samples, are the independent units
    (samples of one task share its difficulty), so this is wider than a Wilson interval over all the
    samples.  Fewer than two tasks: (0.0, 1.0), no information."""
    xs = [float(x) for x in pass_rates]
    t = len(xs)
    if t < 2:
        return 0.0, 1.0
    mean = sum(xs) / t
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (t - 1))
    half = z * sd / math.sqrt(t)
    return max(0.0, mean - half), min(1.0, mean + half)


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


# --- pass-rate bands ------------------------------------------------------------------------------


def _exact(x: float) -> Fraction:
    # str() gives the shortest repr, so 0.1 -> 1/10 rather than the binary double's 3602879701896397/2**55
    return Fraction(str(x)).limit_denominator(10**9)


@dataclass(frozen=True)
class Band:
    low: float
    high: float
    inclusive: bool = True

    def __post_init__(self):
        if not (0.0 <= self.low <= 1.0 and 0.0 <= self.high <= 1.0):
            raise ConfigError(f"band edges must lie in [0, 1], got {self.low},{self.high}", field="band")
        if self.low > self.high:
            raise ConfigError(f"band low {self.low} is above high {self.high}", field="band")

    @classmethod
    def parse(cls, text: str, *, inclusive: bool = True) -> Band:
        """'0.1,0.9' -> Band(0.1, 0.9)."""
        parts = [p.strip() for p in text.split(",")]
        try:
            lo, hi = (float(p) for p in parts)
        except ValueError:
            raise ConfigError(
                f"band must be LO,HI (two numbers in [0, 1]), got {text!r}", field="band"
            ) from None
        return cls(lo, hi, inclusive)

    def fractions(self) -> tuple[Fraction, Fraction]:
        return _exact(self.low), _exact(self.high)


def band_limits(band: Band, n: int) -> tuple[int, int]:
    """The n_correct range [kmin, kmax] kept out of ``n`` samples (empty when kmin > kmax)."""
    lo, hi = band.fractions()
    if band.inclusive:
        return -((-lo.numerator * n) // lo.denominator), (hi.numerator * n) // hi.denominator
    return (lo.numerator * n) // lo.denominator + 1, -((-hi.numerator * n) // hi.denominator) - 1


def decide(df: pl.DataFrame | pl.LazyFrame, band: Band, *, min_n: int) -> pl.DataFrame:
    """Add ``pass_rate``, ``decision`` and ``reason`` to a frame with integer ``n`` and ``n_correct``
    (and ``n_error``, verifier errors, when known; see the module docstring)."""
    lo, hi = band.fractions()
    n = pl.col("n").cast(pl.Int64)
    # the integer forms of band_limits, vectorized (floor division; ceil(a/b) = -((-a) // b))
    if band.inclusive:
        kmin = -((-n * lo.numerator) // lo.denominator)
        kmax = (n * hi.numerator) // hi.denominator
    else:
        kmin = (n * lo.numerator) // lo.denominator + 1
        kmax = -((-n * hi.numerator) // hi.denominator) - 1
    k = pl.col("n_correct")
    cols = df.collect_schema().names() if isinstance(df, pl.LazyFrame) else df.columns
    drawn = n + (pl.col("n_error").fill_null(0).cast(pl.Int64) if "n_error" in cols else 0)
    min_n = max(min_n, 1)
    reason = (
        pl.when(drawn == 0)
        .then(pl.lit("not_sampled"))
        .when((drawn < min_n) | (n < (min_n + 1) // 2))
        .then(pl.lit("insufficient_samples"))
        .when(k < kmin)
        .then(pl.lit("too_hard"))
        .when(k > kmax)
        .then(pl.lit("too_easy"))
        .otherwise(pl.lit("in_band"))
    )
    return (
        df.lazy()
        .with_columns(
            pl.when(n > 0).then(k / n).otherwise(None).alias("pass_rate"),
            reason.alias("reason"),
        )
        .with_columns(
            pl.when(pl.col("reason") == "in_band")
            .then(pl.lit("keep"))
            .otherwise(pl.lit("drop"))
            .alias("decision")
        )
        .collect()
    )


def default_min_n(n: pl.Series) -> int:
    """The most common sample count (ties: the larger), i.e. the N the pass-rate job used.  Give it
    the samples drawn (``n + n_error``), so verifier errors do not lower it."""
    n = n.drop_nulls()
    if n.len() == 0:
        return 1
    counts = n.value_counts(sort=False).sort(["count", n.name], descending=True)
    return int(counts[n.name][0])


def band_text(band: Band) -> str:
    """The ledger's ``band`` value: 'lo,hi' (inclusive) or '(lo,hi)' (exclusive); repr keeps 0.1 exact."""
    text = f"{band.low!r},{band.high!r}"
    return text if band.inclusive else f"({text})"


def parse_band_text(text: str) -> Band:
    """Inverse of :func:`band_text` (and the ``--band`` syntax of ``rldata filter``)."""
    t = text.strip()
    if t.startswith("(") and t.endswith(")"):
        return Band.parse(t[1:-1], inclusive=False)
    return Band.parse(t)
