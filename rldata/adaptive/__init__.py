"""Adaptive N: sample a task in rounds and stop once its band decision is settled.

- :mod:`rldata.adaptive.rules`: the stopping rules (exact, sequential) as plain functions over counts;
- :mod:`rldata.adaptive.filter`: how ``filter`` decides ledger rows that a rule stopped early;
- :mod:`rldata.adaptive.sim`: the rules on simulated Bernoulli tasks (error rates, savings).

See docs/adaptive.md.
"""

# the names of rules.py's __all__, listed once there
from rldata.adaptive.rules import *
from rldata.adaptive.rules import __all__  # noqa: F401
