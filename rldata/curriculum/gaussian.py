"""The ``gaussian`` sampler's arithmetic: the Nemotron-3-Nano curriculum (its technical report, §3.2.2).

Per batch, the phase's bucket weights pick a bucket per draw (one bucket, ``all``, without a
curriculum); the draws of a bucket are split over its tasks' domains in proportion to the domain's
share of the bucket (:func:`domain_quota`: fixed domain ratios, up to rounding); within a domain a task
is drawn with weight ``exp(-(p - mean)^2 / (2 width^2))`` (:func:`gaussian_weight`), where ``p`` is its
pass rate (:meth:`rldata.curriculum.live.LiveState.rate`: the live posterior's mean once the run has
evidence of the task, else the offline ledger's rate) and ``mean`` moves linearly from ``gauss_start``
(easy: a high pass rate) at the first step to ``gauss_end`` at the last (:func:`target_rate`).  Tasks
far from the mean are rarely drawn; a domain whose tasks all are drawn as if uniformly.

Re-profiling (``live.reprofile_after`` K): when held-out accuracy has not risen above its best for K
evaluations in a row (:func:`reprofile_due`), the trainer samples every pool task at the current policy
through the ordinary sample job (ledger rows under the checkpoint's model name) and feeds the counts to
the live posteriors as evidence of the current version (``rldata.trainer.reprofile``); the count starts
again after each re-profile.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

__all__ = ["domain_quota", "gaussian_weight", "reprofile_due", "target_rate"]

_TINY = 1e-12  # every task keeps a sliver of weight: a domain far from the mean is drawn uniformly


def target_rate(step: int, total_steps: int, *, start: float, end: float) -> float:
    """The Gaussian's mean for the batch of step ``step + 1`` (``step`` batches drawn before it):
    ``start`` at the first step, ``end`` at the last (step ``total_steps``), linear between, ``end``
    after."""
    if total_steps <= 1:
        return end
    frac = min(max(step, 0) / (total_steps - 1), 1.0)
    return start + (end - start) * frac


def gaussian_weight(rate: float, mean: float, width: float) -> float:
    """A task's weight: the unnormalised Gaussian density of its pass rate (peak 1 at the mean)."""
    z = (rate - mean) / width
    return max(math.exp(-0.5 * z * z), _TINY)


def domain_quota(k: int, sizes: Mapping[str, int], rng: random.Random) -> dict[str, int]:
    """Split ``k`` draws over domains in proportion to ``sizes``: each domain gets the floor of its
    share, and the draws left over go to distinct domains by systematic sampling over the fractional
    parts (one uniform offset, points 1 apart along their running sum), so a domain gets one more draw
    with probability exactly its fractional part and its expected count is exactly its share."""
    total = sum(sizes.values())
    names = sorted(d for d, n in sizes.items() if n > 0)
    if k <= 0 or not names:
        return {d: 0 for d in names}
    exact = {d: k * sizes[d] / total for d in names}
    quota = {d: math.floor(exact[d]) for d in names}
    left = k - sum(quota.values())
    if left:
        frac = [(d, exact[d] - quota[d]) for d in names if exact[d] > quota[d]]
        scale = left / sum(f for _, f in frac)  # 1 up to rounding: the fractions sum to ``left``
        u = rng.random()
        points = [u + j for j in range(left)]  # each fraction is < 1: at most one point per domain
        lo = 0.0
        for i, (d, f) in enumerate(frac):
            hi = lo + f * scale
            if points and (points[0] < hi or i == len(frac) - 1):
                quota[d] += 1
                points.pop(0)
            lo = hi
    return quota


def reprofile_due(accuracies: Sequence[float], patience: int) -> list[bool]:
    """Per held-out evaluation (in order, the first is step 0's): whether a re-profile follows it.
    One is due when ``patience`` evaluations in a row have not beaten the best accuracy so far; the
    count restarts after a re-profile and after every improvement.  ``patience`` 0: never."""
    out, best, since = [], -math.inf, 0
    for i, acc in enumerate(accuracies):
        if i == 0 or acc > best:
            best, since = max(best, acc), 0
            out.append(False)
            continue
        since += 1
        due = patience > 0 and since >= patience
        if due:
            since = 0
        out.append(due)
    return out
