"""Adaptive N: sample a task in rounds and stop once its band decision is settled.

- :mod:`rldata.adaptive.rules`: the stopping rules (exact, sequential) as plain functions over counts;
- :mod:`rldata.adaptive.filter`: how ``filter`` decides ledger rows that a rule stopped early;
- :mod:`rldata.adaptive.sim`: the rules on simulated Bernoulli tasks (error rates, savings).

See docs/adaptive.md.
"""

from rldata.adaptive.rules import (
    DECIDED,
    MAX_N,
    PRIOR,
    RULES,
    AdaptiveSpec,
    Decision,
    band_text,
    decide,
    decide_frame,
    ledger_columns,
    parse_band_text,
    rule_table,
    settle_distance,
)

__all__ = [
    "DECIDED",
    "MAX_N",
    "PRIOR",
    "RULES",
    "AdaptiveSpec",
    "Decision",
    "band_text",
    "decide",
    "decide_frame",
    "ledger_columns",
    "parse_band_text",
    "rule_table",
    "settle_distance",
]
