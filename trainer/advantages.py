"""Group-relative advantages: a small registry of plain functions on rewards shaped [num_groups, G].

Row g holds the G rewards of the samples drawn for one prompt.  Every estimator returns an array of
the same shape, float64.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rldata.errors import ConfigError
from rldata.registry import Registry

__all__ = ["ESTIMATORS", "compute_advantages", "drgrpo", "grpo", "register", "zero_variance_groups"]

Estimator = Callable[..., np.ndarray]
ESTIMATORS: Registry = Registry("advantage estimator", error=ConfigError, field="advantage", sort_known=False)


def register(name: str) -> Callable[[Estimator], Estimator]:
    """Function decorator: ``@register("grpo")``."""
    return ESTIMATORS.register(name)


def _as_groups(rewards) -> np.ndarray:
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2 or r.shape[1] < 1:
        raise ValueError(f"rewards must be shaped [num_groups, G], got {r.shape}")
    if not np.isfinite(r).all():
        raise ValueError("rewards must be finite")
    return r


@register("grpo")
def grpo(rewards, *, eps: float = 1e-6) -> np.ndarray:
    """(r - group mean) / (group std + eps), as in DeepSeekMath's GRPO.

    The std is the sample std (ddof=1), as TRL computes it; a group of one has no spread, so its
    advantage is 0.
    """
    r = _as_groups(rewards)
    mean = r.mean(axis=1, keepdims=True)  # [num_groups, 1]
    std = r.std(axis=1, ddof=1, keepdims=True) if r.shape[1] > 1 else np.zeros_like(mean)  # [num_groups, 1]
    return (r - mean) / (std + eps)  # [num_groups, G]


@register("drgrpo")
def drgrpo(rewards, *, eps: float = 1e-6) -> np.ndarray:
    """r - group mean (Dr. GRPO): no division by the std, which up-weights near-uniform groups."""
    del eps  # accepted so every estimator takes the same arguments
    r = _as_groups(rewards)
    return r - r.mean(axis=1, keepdims=True)  # [num_groups, G]


def compute_advantages(rewards, *, estimator: str = "grpo", eps: float = 1e-6) -> np.ndarray:
    return ESTIMATORS.resolve(estimator)(rewards, eps=eps)


def zero_variance_groups(rewards, *, tol: float = 0.0) -> np.ndarray:
    """[num_groups] bool: groups whose rewards are all equal (within tol).

    Their advantages are all zero, so they add nothing to the policy gradient; dynamic sampling
    drops and replaces them.
    """
    r = _as_groups(rewards)
    return (r.max(axis=1) - r.min(axis=1)) <= tol
