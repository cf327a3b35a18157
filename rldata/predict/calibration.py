"""Beta arithmetic, the empirical-Bayes prior strength, and the calibration metrics of a prediction.

A prediction of a task's pass rate p is a ``Beta(a, b)``: mean ``a / (a + b)``, strength ``s = a + b``
(how many samples the prediction is worth).  The cross-task model gives a mean ``m`` per task; the
strength is not set by hand but by the predictor's measured calibration: the ``s`` that maximises
the beta-binomial likelihood of the counts ``(k, n)`` of tasks the model did not see, under
``Beta(s m, s (1 - m))`` (:func:`eb_strength`).  A model whose means are far off gets a small ``s``
(its predictions count for little against a task's own draws); a sharp one a large ``s``.

Metrics of predicted means ``p`` against observed counts ``(k, n)`` (:func:`metrics`): Spearman's rho
against ``k / n``, the AUC of "in band" (``P(lo <= p <= hi)`` against the observed rate in band),
the Brier score per sample, the mean beta-binomial log-likelihood, the coverage of the predictive
interval and a reliability table (observed rate per bin of predicted mean).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats

from rldata.errors import RldataError

__all__ = [
    "STRENGTH_BOUNDS",
    "beta_from_mean",
    "betabinom_logpmf",
    "eb_strength",
    "interval",
    "mean_of",
    "metrics",
    "prob_outside",
    "reliability",
]

STRENGTH_BOUNDS = (0.05, 1e4)  # the search range of the empirical-Bayes strength
_EPS = 1e-4  # means are kept inside (eps, 1 - eps): a Beta needs a > 0 and b > 0


def beta_from_mean(mean, strength) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b) = (s m, s (1 - m))``, the mean clipped into ``(eps, 1 - eps)``."""
    m = np.clip(np.asarray(mean, dtype=np.float64), _EPS, 1.0 - _EPS)
    s = np.asarray(strength, dtype=np.float64)
    return s * m, s * (1.0 - m)


def mean_of(a, b) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a / (a + b)


def interval(a, b, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """The equal-tailed ``level`` interval of ``Beta(a, b)``."""
    if not 0 < level < 1:
        raise RldataError(f"level must lie in (0, 1), got {level}", field="level")
    t = (1.0 - level) / 2.0
    return stats.beta.ppf(t, a, b), stats.beta.ppf(1.0 - t, a, b)


def prob_outside(a, b, low: float, high: float) -> np.ndarray:
    """``P(p < low) + P(p > high)`` for ``p ~ Beta(a, b)``: the probability a task is out of the band."""
    return stats.beta.cdf(low, a, b) + stats.beta.sf(high, a, b)


def betabinom_logpmf(k, n, a, b) -> np.ndarray:
    """log P(k of n | p ~ Beta(a, b)) = log C(n, k) + log B(k + a, n - k + b) - log B(a, b)."""
    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    log_choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    return log_choose + special.betaln(k + a, n - k + b) - special.betaln(a, b)


def eb_strength(mean, k, n, *, bounds: tuple[float, float] = STRENGTH_BOUNDS) -> float:
    """The strength ``s`` that maximises ``sum_i log P(k_i of n_i | Beta(s m_i, s (1 - m_i)))``.

    ``mean`` must be predictions made without the task's own counts (held-out folds), or the
    strength would reward the model for remembering.  Tasks with ``n < 2`` carry no information about
    the spread (one draw is Bernoulli(m) whatever ``s`` is) and are left out; with none left, the
    spread cannot be measured and this is an error.  The search is over log s, within ``bounds``:
    counts no more spread than binomial ones put it at the upper bound (the model is as good as the
    counts can tell)."""
    m, k, n = (np.asarray(x, dtype=np.float64) for x in (mean, k, n))
    use = n >= 2
    if not use.any():
        raise RldataError(
            "cannot measure the prediction's calibration: no task has 2 or more samples "
            "(sample with --n 2 or more)"
        )
    m, k, n = m[use], k[use], n[use]

    def nll(log_s: float) -> float:
        a, b = beta_from_mean(m, math.exp(log_s))
        return -float(betabinom_logpmf(k, n, a, b).sum())

    lo, hi = math.log(bounds[0]), math.log(bounds[1])
    res = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    best = float(res.x)
    # the bounded search can miss a maximum at a bound: compare with the bounds themselves
    for edge in (lo, hi):
        if nll(edge) < nll(best):
            best = edge
    return math.exp(best)


def reliability(p, k, n, *, bins: int = 10) -> list[dict]:
    """Observed rate (pooled ``sum k / sum n``) per bin of predicted mean: ``[{lo, hi, tasks,
    predicted, observed}]``, empty bins left out."""
    p, k, n = (np.asarray(x, dtype=np.float64) for x in (p, k, n))
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    out = []
    for i in range(bins):
        sel = (which == i) & (n > 0)
        if not sel.any():
            continue
        out.append(
            {
                "lo": round(float(edges[i]), 4),
                "hi": round(float(edges[i + 1]), 4),
                "tasks": int(sel.sum()),
                "predicted": float(np.average(p[sel], weights=n[sel])),
                "observed": float(k[sel].sum() / n[sel].sum()),
            }
        )
    return out


def _auc(score: np.ndarray, label: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    if label.all() or not label.any():
        return None  # one class: no ranking to score
    return float(roc_auc_score(label, score))


def metrics(
    p,
    k,
    n,
    *,
    band: tuple[float, float] = (0.1, 0.9),
    a=None,
    b=None,
    level: float = 0.9,
    bins: int = 10,
    in_band_score=None,
) -> dict:
    """The calibration of predicted means ``p`` (and, when given, their Betas ``(a, b)``) against
    observed counts ``k`` of ``n``, over tasks with ``n > 0``.

    spearman: rank correlation of ``p`` and ``k / n`` (None when either is constant);
    auc: area under the ROC of ``in_band_score`` (default: ``P(lo <= p <= hi)`` under the Beta, else
    ``p``'s distance to the band) against the observed rate lying in the band;
    brier: mean over samples of ``(p - verdict)^2``; loglik: mean beta-binomial log-likelihood per
    task; coverage: share of tasks whose ``k`` lies in the ``level`` predictive interval of the
    beta-binomial; bias: mean of ``k / n - p``."""
    p, k, n = (np.asarray(x, dtype=np.float64) for x in (p, k, n))
    use = n > 0
    p, k, n = p[use], k[use], n[use]
    if a is not None:
        a, b = np.asarray(a, dtype=np.float64)[use], np.asarray(b, dtype=np.float64)[use]
    rate = k / np.maximum(n, 1)
    lo, hi = band
    out: dict = {"tasks": int(use.sum()), "samples": int(n.sum())}
    if p.size == 0:
        return out | {"spearman": None, "auc": None, "brier": None, "bias": None}
    rho = None
    if np.ptp(p) > 0 and np.ptp(rate) > 0:
        rho = float(stats.spearmanr(p, rate).statistic)
    if in_band_score is not None:
        score = np.asarray(in_band_score, dtype=np.float64)[use]
    elif a is not None:
        score = 1.0 - prob_outside(a, b, lo, hi)
    else:
        score = -np.maximum(lo - p, p - hi)  # inside the band scores 0 or more, the farther out the lower
    out |= {
        "spearman": rho,
        "auc": _auc(score, (rate >= lo) & (rate <= hi)),
        "brier": float(((k * (1.0 - p) ** 2 + (n - k) * p**2).sum()) / n.sum()),
        "bias": float((rate - p).mean()),
    }
    if a is not None:
        out["loglik"] = float(betabinom_logpmf(k, n, a, b).mean())
        t = (1.0 - level) / 2.0
        k_lo = stats.betabinom.ppf(t, n, a, b)
        k_hi = stats.betabinom.ppf(1.0 - t, n, a, b)
        out["coverage"] = float(((k >= k_lo) & (k <= k_hi)).mean())
    out["reliability"] = reliability(p, k, n, bins=bins)
    return out
