"""Learnability cards: ``rldata env profile NAME`` answers "can this model learn from this environment?".

This module is the card's arithmetic (no sampling); :mod:`rldata.jobs.profile` measures one.  A card
samples ``tasks`` tasks of the environment ``n`` times each with a model (through the
ordinary ``rldata sample`` job, so the samples land in the store and a killed profile resumes) and
summarises what GRPO-style training would see:

- the pass-rate histogram over tasks (deciles [0, 0.1) .. [0.9, 1]);
- the in-band fraction: tasks whose pass rate lies in [0.1, 0.9] (a group of samples with mixed
  outcomes is the only kind that gives a policy gradient), with its Wilson 95% interval over tasks;
- mean turns, tool-call rate, parse-fail and env-error rates, generated tokens and seconds per
  episode; the model, sampling-parameters hash and environment version it was measured with.

The verdict: ``not learnable by this model`` when the in-band fraction's upper bound is below 5%
(almost every task is always or never solved: there is nothing to learn from); ``learnable`` when
its lower bound is at least 5%; ``undetermined`` otherwise (too few tasks to tell).  Cards are rows
of ``env_profiles`` (one per environment version, model, parameters, n and task set).
"""

from __future__ import annotations

import math
from typing import Any

from rldata.errors import RldataError
from rldata.stats import wilson_interval

__all__ = ["BAND", "LEARNABLE_MIN", "card_from_rates", "card_line", "verdict_of"]

BAND = (0.1, 0.9)  # a task in this band gives mixed groups: a gradient
LEARNABLE_MIN = 0.05  # the in-band fraction below which an environment is not learnable


def verdict_of(lo: float, hi: float) -> str:
    if hi < LEARNABLE_MIN:
        return "not learnable by this model"
    if lo >= LEARNABLE_MIN:
        return "learnable"
    return "undetermined"


def card_from_rates(rates: list[float]) -> dict[str, Any]:
    """Histogram, in-band fraction, its Wilson interval and the verdict of per-task pass rates."""
    hist = [0] * 10
    for r in rates:
        if not (isinstance(r, (int, float)) and math.isfinite(r) and 0.0 <= r <= 1.0):
            raise RldataError(f"pass rate {r!r} is not in [0, 1]")
        hist[min(int(r * 10), 9)] += 1
    k = sum(BAND[0] <= r <= BAND[1] for r in rates)
    lo, hi = wilson_interval(k, len(rates))
    return {
        "histogram": hist,
        "in_band": k / len(rates) if rates else None,
        "in_band_lo": lo,
        "in_band_hi": hi,
        "verdict": verdict_of(lo, hi) if rates else "undetermined",
    }


def card_line(row: dict[str, Any]) -> str:
    """One line for ``env list``: ``in-band 31% [18-47%] learnable (tiny@..., n=16, 32 tasks)``."""
    if row.get("in_band") is None:
        return f"{row['verdict']} ({row['tasks']} tasks)"
    return (
        f"in-band {row['in_band']:.0%} [{row['in_band_lo']:.0%}-{row['in_band_hi']:.0%}] {row['verdict']} "
        f"({row['model']}, n={row['n']}, {row['tasks']} tasks)"
    )
