"""The live samplers take a stored prediction (rldata predict) as the prior of a task they have no
counts of: by hand, and read back from a real store's predictions table."""

from __future__ import annotations

import pytest

from rldata.curriculum.live import LiveConfig, LiveState, predicted_priors


def test_a_prediction_is_the_prior_of_a_task_without_counts():
    live = LiveState(
        LiveConfig(decay=0.5, age="version"),
        prior={"seen": (3, 1)},
        predicted={"seen": (9.0, 9.0), "new": (0.5, 4.5)},
    )
    assert live.posterior("seen", 0) == (4.0, 2.0)  # the ledger counts win over a prediction
    assert live.posterior("new", 0) == pytest.approx((0.5, 4.5))  # Beta(a, b) itself
    assert live.mean("new") == pytest.approx(0.1)
    assert live.posterior("other", 0) == (1.0, 1.0)  # neither: flat
    # it ages like version-0 evidence: 1 + w (a - 1), still a proper Beta
    assert live.posterior("new", 2) == pytest.approx((1 + 0.25 * -0.5, 1 + 0.25 * 3.5))
    live.update("new", version=1, passes=1, fails=0)
    assert live.posterior("new", 1) == pytest.approx((1 - 0.5 * 0.5 + 1, 1 + 0.5 * 3.5))
    off = LiveState(LiveConfig(predicted=False), predicted={"new": (0.5, 4.5)})
    assert off.posterior("new") == (1.0, 1.0)


def test_predicted_priors_read_the_newest_fit_of_the_model(store):
    def row(task, fit, a, b, version=0):
        return {
            "task_id": task,
            "model": "m@1",
            "fit_id": fit,
            "predictor": "prior",
            "p_mean": a / (a + b),
            "p_low": 0.0,
            "p_high": 1.0,
            "level": 0.9,
            "alpha": a,
            "beta": b,
            "prior_alpha": a,
            "prior_beta": b,
            "n_seen": 0.0,
            "store_version": 1,
            "policy_version": version,
        }

    store.append("predictions", [row("t1", "f1", 1.0, 3.0), row("t2", "f1", 2.0, 2.0)])
    store.append("predictions", [row("t1", "f2", 1.5, 3.5), row("t3", "f2", 1.0, 1.0, version=4)])
    got = predicted_priors(store, "m@1", ["t1", "t2", "t3", "t9"])
    assert got == {"t1": (1.5, 3.5), "t2": (2.0, 2.0)}  # newest fit; a run's version is not the model's
    assert predicted_priors(store, "other@1", ["t1"]) == {} and predicted_priors(store, None, ["t1"]) == {}
