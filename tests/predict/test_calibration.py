"""Beta arithmetic, the empirical-Bayes strength and the metrics, checked against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rldata.errors import RldataError
from rldata.predict.calibration import (
    STRENGTH_BOUNDS,
    beta_from_mean,
    betabinom_logpmf,
    eb_strength,
    interval,
    mean_of,
    metrics,
    prob_outside,
    reliability,
)


def test_beta_from_mean_and_back():
    a, b = beta_from_mean([0.25, 0.5], 8.0)
    assert a.tolist() == [2.0, 4.0] and b.tolist() == [6.0, 4.0]
    assert mean_of(a, b).tolist() == [0.25, 0.5]
    a, b = beta_from_mean([0.0, 1.0], 10.0)  # clipped: a Beta needs a > 0 and b > 0
    assert (a > 0).all() and (b > 0).all()


def test_interval_by_hand():
    # Beta(2, 1) has CDF x^2: its 5 % and 95 % quantiles are sqrt(0.05) and sqrt(0.95)
    lo, hi = interval(2.0, 1.0, 0.9)
    assert lo == pytest.approx(math.sqrt(0.05)) and hi == pytest.approx(math.sqrt(0.95))
    lo, hi = interval(1.0, 1.0, 0.8)  # uniform
    assert (lo, hi) == (pytest.approx(0.1), pytest.approx(0.9))
    with pytest.raises(RldataError, match="level"):
        interval(1.0, 1.0, 1.0)


def test_prob_outside_by_hand():
    assert prob_outside(1.0, 1.0, 0.1, 0.9) == pytest.approx(0.2)  # uniform: 0.1 below, 0.1 above
    # Beta(2, 1): P(p < 0.1) = 0.01, P(p > 0.9) = 1 - 0.81 = 0.19
    assert prob_outside(2.0, 1.0, 0.1, 0.9) == pytest.approx(0.20)


def test_betabinomial_by_hand():
    # n = 2 under Beta(1, 1): every k is equally likely, 1/3
    assert np.exp(betabinom_logpmf([0, 1, 2], 2, 1.0, 1.0)) == pytest.approx([1 / 3] * 3)
    # Beta(2, 2), n = 1: P(k=1) = E[p] = 1/2; n = 2: P(k=2) = E[p^2] = a(a+1)/(s(s+1)) = 6/20
    assert math.exp(betabinom_logpmf(1, 1, 2.0, 2.0)) == pytest.approx(0.5)
    assert math.exp(betabinom_logpmf(2, 2, 2.0, 2.0)) == pytest.approx(0.3)


def test_empirical_bayes_strength_by_hand():
    # Mean 1/2, n = 2.  With a = b = s/2: P(k=1) = s / (2 (s + 1)), P(k=0) = P(k=2) = (s + 2) / (4 (s + 1)).
    # With a share f of tasks at k = 1 the log-likelihood's derivative in s vanishes at s = 2f / (1 - 2f):
    # f = 0.4 -> s = 4 (and then P(k=1) = 4 / 10 = f, as it must).
    k = np.array([1] * 40 + [0] * 30 + [2] * 30)
    s = eb_strength(np.full(100, 0.5), k, np.full(100, 2))
    assert s == pytest.approx(4.0, rel=1e-3)
    # f = 0.25 -> s = 1
    k = np.array([1] * 25 + [0] * 38 + [2] * 37)
    assert eb_strength(np.full(100, 0.5), k, np.full(100, 2)) == pytest.approx(0.5 / 0.5, rel=2e-2)


def test_strength_at_the_upper_bound_when_counts_are_binomial():
    # f = 0.5 is exactly binomial(2, 1/2): no spread beyond the binomial, the strength runs to the bound
    k = np.array([1] * 50 + [0] * 25 + [2] * 25)
    assert eb_strength(np.full(100, 0.5), k, np.full(100, 2)) >= 0.99 * STRENGTH_BOUNDS[1]


def test_strength_needs_two_samples_somewhere():
    with pytest.raises(RldataError, match="no task has 2 or more samples"):
        eb_strength([0.5, 0.5], [1, 0], [1, 1])


def test_metrics_by_hand():
    p = np.array([0.2, 0.5, 0.8])
    k, n = np.array([1, 2, 4]), np.array([4, 4, 4])
    m = metrics(p, k, n, band=(0.3, 0.7))
    # Brier per sample: task 1: (1 x 0.8^2 + 3 x 0.2^2) / 4, task 2: 4 x 0.25 / 4, task 3: 4 x 0.2^2 / 4
    brier = ((0.64 + 3 * 0.04) + 4 * 0.25 + 4 * 0.04) / 12
    assert m["brier"] == pytest.approx(brier)
    assert m["spearman"] == pytest.approx(1.0)
    assert m["bias"] == pytest.approx(((0.25 - 0.2) + 0.0 + (1.0 - 0.8)) / 3)
    assert m["auc"] == pytest.approx(1.0)  # the one task in band (0.5) scores highest
    assert metrics(p, k, n, band=(0.0, 1.0))["auc"] is None  # one class: no AUC
    assert m["tasks"] == 3 and m["samples"] == 12


def test_reliability_pools_counts_per_bin():
    rel = reliability([0.05, 0.07, 0.95], [1, 3, 9], [10, 10, 10], bins=10)
    assert rel[0] == {"lo": 0.0, "hi": 0.1, "tasks": 2, "predicted": pytest.approx(0.06), "observed": 0.2}
    assert rel[1]["lo"] == 0.9 and rel[1]["observed"] == 0.9
