"""The sequential rule with each task's predicted prior (``rldata sample --skip-predicted C --adaptive sequential``).

The sequential rule (rldata.adaptive.rules) gives every task the same Jeffreys prior.  A prediction
(``rldata predict``, docs/predict.md) gives each task its own ``Beta(a, b)``; with it the predictive
probability that fixed N decides the same way is computed exactly as before, from that prior, so a
task the prediction already places well below the band settles after its first draw.  What alpha
guarantees carries over with the prior changed: for tasks whose p follows their predicted Beta, the
disagreement with fixed N on the same samples is at most alpha, so it holds as far as the prediction
is calibrated (``rldata predict --backtest`` measures that).

Ledger rows stopped this way have ``stop_rule`` :data:`PREDICTED`; the prior each task used is a row
of ``sample_predictions`` (keyed by the sampling run and the task), which is how ``rldata filter``
re-decides such a row (:func:`stored_priors`).  Priors are rounded (:func:`quantize`) before a job
uses them, so tasks share rule tables and the stored prior is exactly the one the rule ran with.

:class:`PredictedPlan` is what a sampling job is handed: the priors, and the tasks it skips (those the
prediction puts outside the band with probability at least ``conf``), each with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from rldata.adaptive.rules import PRIOR, AdaptiveSpec, decide_frame
from rldata.errors import RldataError

__all__ = ["PREDICTED", "SKIP_REASONS", "PredictedPlan", "decide_with_priors", "quantize", "stored_priors"]

PREDICTED = "predicted"  # passrates.stop_rule: sequential, each task with its predicted prior
SKIP_REASONS = ("predicted_too_hard", "predicted_too_easy")
_STEP = 0.125  # quantization grid of log a and log b (a factor of 1.09)


def quantize(a: float, b: float) -> tuple[float, float]:
    """``(a, b)`` rounded on a grid of log a and log b (steps of 1/8): priors within 4.5 % share a
    rule table; the rounded pair is the prior the rule uses and the one stored."""
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        raise RldataError(f"a Beta prior needs a > 0 and b > 0, got ({a}, {b})")
    return (
        float(round(math.exp(round(math.log(a) / _STEP) * _STEP), 6)),
        float(round(math.exp(round(math.log(b) / _STEP) * _STEP), 6)),
    )


@dataclass(frozen=True)
class PredictedPlan:
    """What a sampling job takes from a prediction.

    priors: task -> quantized Beta (a, b) of its pass rate, for the sequential rule.
    skips: task -> (reason, P(outside the band), predicted mean): tasks not to sample at all.
    conf: the probability a skip needed; band: the band (text) it was about; fit_id: the prediction.
    """

    priors: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    skips: Mapping[str, tuple[str, float, float]] = field(default_factory=dict)
    conf: float = 1.0
    band: str = ""
    fit_id: str = ""
    p_out: Mapping[str, float] = field(default_factory=dict)  # every task's P(outside the band)
    p_mean: Mapping[str, float] = field(default_factory=dict)


def decide_with_priors(df: pl.DataFrame, spec: AdaptiveSpec, *, n_max: int | str = "n_max") -> pl.DataFrame:
    """:func:`rldata.adaptive.rules.decide_frame` with each row's prior from ``spec.priors`` (by its
    ``task_id``; a task without one gets :data:`PRIOR`).  Rows keep their order."""
    if "task_id" not in df.columns:
        raise RldataError("decide_with_priors: the frame needs a task_id column")
    priors = spec.priors or {}
    base = replace(spec, priors=None)
    keyed = df.with_columns(
        pl.int_range(pl.len()).alias("_order"),
        pl.col("task_id")
        .replace_strict(
            {t: f"{a!r},{b!r}" for t, (a, b) in priors.items()}, default="", return_dtype=pl.String
        )
        .alias("_prior"),
    )
    parts = []
    for (text,), part in keyed.group_by("_prior", maintain_order=True):
        if text:
            a, b = (float(x) for x in text.split(","))
            prior = ((a, b), PRIOR[1])
        else:
            prior = PRIOR
        parts.append(decide_frame(part.drop("_prior"), base, n_max=n_max, prior=prior))
    if not parts:
        return decide_frame(df, base, n_max=n_max)
    return pl.concat(parts).sort("_order").drop("_order")


def stored_priors(store, rows: pl.DataFrame) -> dict[str, tuple[float, float]]:
    """task -> (a, b): the prior each ledger row's sampling run used (``rows``: task_id, run_id)."""
    if rows.height == 0:
        return {}
    import pyarrow as pa

    got = store.sql(
        "SELECT s.task_id, s.prior_alpha, s.prior_beta FROM sample_predictions s "
        "JOIN _rows r ON r.task_id = s.task_id AND r.run_id = s.run_id "
        "WHERE s.prior_alpha IS NOT NULL AND s.prior_beta IS NOT NULL",
        extra={
            "_rows": pa.table(
                {"task_id": rows["task_id"].to_arrow(), "run_id": rows["run_id"].cast(pl.String).to_arrow()}
            )
        },
    ).fetchall()
    return {t: (float(a), float(b)) for t, a, b in got if np.isfinite(a) and np.isfinite(b)}
