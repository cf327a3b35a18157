"""The ledger counts distinct samples: one (task, seed, sample index) per model, params hash and
environment, however many rows hold it (real Delta store, DuckDB)."""

from __future__ import annotations

import datetime as dt

from rldata.ledger.core import recompute_passrates

T0 = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)


def _sample(traj_id, idx, *, seed=0, task="t1", env=None, ph="h"):
    return {
        "traj_id": traj_id,
        "task_id": task,
        "run_id": "r",
        "sample_idx": idx,
        "model": "m",
        "policy_version": 0,
        "params_hash": ph,
        "seed": seed,
        "created_at": T0,
        **({"env_id": env, "env_version": "1"} if env else {}),
    }


def _verdict(traj_id, passed, *, task="t1", error=None):
    return {
        "traj_id": traj_id,
        "task_id": task,
        "verifier": "math",
        "verifier_version": "1",
        "layer": "answer",
        "passed": passed,
        "error": error,
        "created_at": T0,
    }


def _counts(store, **kw):
    rows = recompute_passrates(store, model="m", params_hash="h", verifier_keys=["math@1"], write=False, **kw)
    return {(r["task_id"], r["env_version"]): (r["n"], r["n_correct"], r["n_error"]) for r in rows}


def test_a_sample_held_twice_counts_once_and_its_verified_copy_wins(store):
    store.append(
        "trajectories",
        [
            _sample("a0", 0),
            _sample("b0", 0),  # the same sample (seed 0, index 0) under another id: an upgraded store
            _sample("a1", 1),
            _sample("b1", 1),
            _sample("a2", 2),
            _sample("s1-0", 0, seed=1),  # another seed: another sample
            _sample("e0", 0, env="calc"),  # another environment: another ledger row
        ],
    )
    store.append(
        "verifications",
        [
            _verdict("a0", True),
            _verdict("b0", True),
            _verdict("a1", None, error="timeout"),  # one copy timed out, the other was judged
            _verdict("b1", False),
            _verdict("a2", None, error="timeout"),
            _verdict("s1-0", True),
            _verdict("e0", False),
        ],
    )
    assert _counts(store) == {("t1", ""): (3, 2, 1), ("t1", "calc@1"): (1, 0, 0)}


def test_unseeded_samples_are_only_themselves(store):
    # without a seed, index 0 of two jobs are two different draws
    store.append("trajectories", [_sample("u0", 0, seed=None), _sample("v0", 0, seed=None)])
    store.append("verifications", [_verdict("u0", True), _verdict("v0", False)])
    assert _counts(store) == {("t1", ""): (2, 1, 0)}
    assert _counts(store, task_ids=["other"]) == {}
