"""Advantage estimators and the zero-variance test used by dynamic sampling."""

from __future__ import annotations

import numpy as np
import pytest

from rldata.trainer.advantages import ESTIMATORS, compute_advantages, drgrpo, grpo, zero_variance_groups


def test_grpo_known_values():
    # mean 0.25, sample std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5
    adv = grpo([[1.0, 0.0, 0.0, 0.0]], eps=0.0)
    np.testing.assert_allclose(adv, [[1.5, -0.5, -0.5, -0.5]], atol=1e-12)
    # eps enters the denominator
    adv = grpo([[1.0, 0.0, 0.0, 0.0]], eps=0.5)
    np.testing.assert_allclose(adv, [[0.75, -0.25, -0.25, -0.25]], atol=1e-12)


def test_drgrpo_is_mean_only():
    adv = drgrpo([[1.0, 0.0, 0.0, 0.0], [2.0, 4.0, 6.0, 8.0]])
    np.testing.assert_allclose(adv, [[0.75, -0.25, -0.25, -0.25], [-3.0, -1.0, 1.0, 3.0]], atol=1e-12)


def test_groups_are_independent_and_zero_mean():
    rng = np.random.default_rng(0)
    r = rng.random((5, 8))
    for name in ("grpo", "drgrpo"):
        adv = compute_advantages(r, estimator=name)
        assert adv.shape == (5, 8)
        np.testing.assert_allclose(adv.sum(axis=1), 0.0, atol=1e-9)
        np.testing.assert_allclose(compute_advantages(r[2:3], estimator=name), adv[2:3])


def test_zero_variance_group_gets_zero_advantage():
    adv = grpo([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    np.testing.assert_array_equal(adv[:2], 0.0)
    assert np.abs(adv[2]).sum() > 0


def test_zero_variance_groups():
    mask = zero_variance_groups([[1, 1, 1], [0, 0, 0], [0, 1, 0], [0.5, 0.5, 0.5000001]])
    assert mask.tolist() == [True, True, False, False]
    assert zero_variance_groups([[0.5, 0.5, 0.5000001]], tol=1e-3).tolist() == [True]


def test_registry_and_bad_input():
    assert {"grpo", "drgrpo"} <= set(ESTIMATORS)
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        compute_advantages([[1.0, 0.0]], estimator="ppo")
    with pytest.raises(ValueError, match="num_groups, G"):
        grpo([1.0, 0.0])
    with pytest.raises(ValueError, match="finite"):
        grpo([[1.0, float("nan")]])
