"""``rldata filter`` over ledger rows sampled with ``rldata sample --adaptive`` (see rldata.adaptive).

A row stopped early holds fewer than N samples, so the plain count rule would call it
``insufficient_samples``.  Such a row (``stop_rule`` exact or sequential, ``n + n_error < n_max``)
is instead decided by its stopping rule, re-run on the row's recorded counts under the filter's
band and ``min_n`` with the row's own ``n_max`` and ``alpha``:

- ``exact``: the settled decision, which is exactly what fixed-N sampling would have given;
- ``sequential``: the rule's decision at its level alpha (the rule is deterministic in the
  counts, so this is the decision the job stopped on);
- ``predicted``: the same, under the task's predicted prior that the job stored
  (rldata.adaptive.prior; the caller passes ``priors``, a row without one is insufficient_samples);
- a row the rule does not call settled (the filter's band or ``min_n`` differs from the one the
  job stopped for, or more samples were pooled in later) is ``insufficient_samples``: it was
  not sampled enough to decide this question.

Rows with ``stop_rule`` fixed (or null, before schema v3), and adaptive rows that reached
``n_max``, are decided by the count rule, as before.  Which rule decided each row is the
``decided_by`` column of the returned frame (``fixed`` | ``exact`` | ``sequential``); the
selection's ``params`` JSON records the counts per rule (``decided_by``), and the rule of one
stored selection row is its ledger row's at the recorded ``passrates_version``
(:func:`rldata.ledger.select.selection_rules`).  Reasons keep their names (``in_band``, ``too_hard``, ...), so every
existing query, report and count of a selection reads adaptive rows unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from rldata.adaptive.prior import PREDICTED
from rldata.adaptive.rules import AdaptiveSpec, band_text, decide_frame, parse_band_text
from rldata.errors import RldataError
from rldata.stats import Band

__all__ = ["ADAPTIVE_COLUMNS", "EARLY_RULES", "decided_by_expr", "default_n", "early_stop_expr", "redecide"]

ADAPTIVE_COLUMNS = ("stop_rule", "alpha", "n_max", "band")
EARLY_RULES = ("exact", "sequential", PREDICTED)  # stop rules that may stop a task before n_max


def early_stop_expr() -> pl.Expr:
    """True where a ledger row's pass rate comes from optional stopping (fewer than n_max drawn
    by an adaptive rule): its k/n is a biased estimate (docs/adaptive.md)."""
    drawn = pl.col("n").cast(pl.Int64) + pl.col("n_error").fill_null(0).cast(pl.Int64)
    return (
        pl.col("stop_rule").is_in(list(EARLY_RULES)).fill_null(False)
        & pl.col("n_max").is_not_null()
        & (drawn < pl.col("n_max").fill_null(0))
    )


def decided_by_expr() -> pl.Expr:
    """The rule that decides a ledger row in ``rldata filter``: its stop_rule if it stopped early."""
    return pl.when(early_stop_expr()).then(pl.col("stop_rule")).otherwise(pl.lit("fixed"))


def default_n(df: pl.DataFrame) -> pl.Series:
    """What ``default_min_n`` should see per row: N for adaptive rows (their n_max), else the
    samples drawn, so that early stops do not drag the default min_n down."""
    drawn = pl.col("n") + pl.col("n_error")
    return df.select(
        pl.when(pl.col("stop_rule").is_in(list(EARLY_RULES)).fill_null(False) & pl.col("n_max").is_not_null())
        .then(pl.col("n_max").cast(pl.Int64))
        .otherwise(drawn)
        .alias("n")
    )["n"]


def redecide(
    decided: pl.DataFrame,
    band: Band,
    *,
    min_n: int,
    priors: Mapping[str, tuple[float, float]] | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """Re-decide the early-stopped rows of ``select.decide``'s output by their rules.

    ``decided`` has the count columns, the adaptive columns (may be null) and ``reason`` /
    ``decision``; returns it with those replaced on early-stopped rows, plus ``decided_by``, and
    warning lines (band mismatches, rows the rule could not settle).  ``priors``: task -> the
    predicted prior of each ``predicted`` row (rldata.adaptive.prior.stored_priors)."""
    out = decided.with_columns(decided_by_expr().alias("decided_by"), pl.int_range(pl.len()).alias("_row"))
    early = out.filter(pl.col("decided_by") != "fixed")
    if early.height == 0:
        return out.drop("_row"), []
    warnings = []
    want = band_text(band)
    bands = early.group_by("band").len().sort("band")
    for text, count in bands.iter_rows():
        if text is None:
            continue
        try:
            same = parse_band_text(text) == band
        except RldataError:
            raise RldataError(f"passrates: {count} row(s) have an unreadable band {text!r}") from None
        if not same:
            warnings.append(
                f"{count} row(s) were sampled adaptively for band {text}, not the filter's {want}: "
                "re-decided for this band; those the stopping rule cannot settle are insufficient_samples"
            )
    parts, lost_n = [], 0
    for (rule, alpha), group in early.group_by(["stop_rule", "alpha"]):
        if rule in ("sequential", PREDICTED) and (alpha is None or not 0 < alpha < 0.5):
            raise RldataError(
                f"passrates: {group.height} {rule} row(s) (first task {group['task_id'][0]!r}) have "
                f"alpha {alpha!r}: a {rule} row needs the alpha it stopped at, in (0, 0.5)"
            )
        cols = ["_row", "task_id", "n", "n_correct", "n_error", "n_max"]
        if rule == PREDICTED:  # its stored prior; a row without one cannot be re-decided
            have = set(priors or {})
            lost = group.filter(~pl.col("task_id").is_in(list(have)))
            lost_n += lost.height
            if lost.height:
                warnings.append(
                    f"{lost.height} predicted row(s) have no stored prior (sample_predictions): "
                    "insufficient_samples"
                )
                parts.append(lost.select("_row", pl.lit("insufficient_samples").alias("_reason")))
            group = group.filter(pl.col("task_id").is_in(list(have)))
            if group.height == 0:
                continue
            spec = AdaptiveSpec("sequential", alpha, 1, band, min_n, priors=priors)
        else:
            spec = AdaptiveSpec(rule, alpha if rule == "sequential" else None, 1, band, min_n)
        got = decide_frame(group.select(cols), spec, n_max="n_max")
        parts.append(
            got.select(
                "_row",
                pl.when(pl.col("settled"))
                .then(pl.col("reason"))
                .otherwise(pl.lit("insufficient_samples"))
                .alias("_reason"),
            )
        )
    new = pl.concat(parts)
    unsettled = new.filter(pl.col("_reason") == "insufficient_samples").height - lost_n
    if unsettled:
        warnings.append(
            f"{unsettled} early-stopped row(s) are not settled under this band and min_n "
            f"{min_n}: insufficient_samples"
        )
    out = (
        out.join(new, on="_row", how="left")
        .with_columns(pl.coalesce("_reason", "reason").alias("reason"))
        .with_columns(
            pl.when(pl.col("reason") == "in_band")
            .then(pl.lit("keep"))
            .otherwise(pl.lit("drop"))
            .alias("decision")
        )
    )
    return out.sort("_row").drop("_row", "_reason"), warnings
