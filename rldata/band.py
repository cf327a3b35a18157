"""Pass-rate bands and the count rule that decides a task against one (a leaf: imports no layer).

``rldata filter`` (:mod:`rldata.select`) and the adaptive stopping rules (:mod:`rldata.adaptive`)
both decide tasks with :func:`decide`; it lives here, below both, so that neither imports the
other to reach it.  The exact-rational band edges are explained in :mod:`rldata.select`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import polars as pl

from rldata.errors import ConfigError

__all__ = ["Band", "band_limits", "band_text", "decide", "default_min_n", "parse_band_text"]


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
