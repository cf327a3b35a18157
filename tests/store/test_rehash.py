"""The params hash without N and the map from the hashes earlier releases stored (rldata.store.rehash)."""

from __future__ import annotations

import json

import pytest

from rldata.configs.sampling import SamplingSpec
from rldata.errors import ConfigError
from rldata.store.rehash import _new_hash, current_hash, hash_map, legacy_hash


def test_n_and_seed_are_not_part_of_the_distribution():
    base = SamplingSpec(n=16, temperature=0.7, max_tokens=8, seed=0)
    assert base.params_hash == SamplingSpec(n=32, temperature=0.7, max_tokens=8, seed=5).params_hash
    for other in ({"temperature": 0.8}, {"top_p": 0.9}, {"top_k": 5}, {"max_tokens": 9}, {"stop": ["x"]}):
        assert SamplingSpec(**{**base.to_dict(), **other}).params_hash != base.params_hash, other
    with pytest.raises(ConfigError):
        SamplingSpec(n=0)


def _as_5291bef_stored(spec: SamplingSpec) -> dict:
    """The params JSON that release wrote: without the fields SamplingSpec gained since."""
    return {k: v for k, v in spec.to_dict().items() if k != "chat_template"}


def test_the_old_hash_is_the_one_the_previous_release_stored():
    # printed by tests/data/stores/make_v4.py under commit 5291bef (N was hashed then)
    assert legacy_hash(_as_5291bef_stored(SamplingSpec(n=4, max_tokens=8, seed=0))) == "6f7788aad81728f4"
    assert legacy_hash(_as_5291bef_stored(SamplingSpec(n=8, max_tokens=8, seed=1))) == "18a777003a875ea1"
    assert SamplingSpec(n=4, max_tokens=8).params_hash == SamplingSpec(n=8, max_tokens=8).params_hash


def test_only_rows_holding_the_old_hash_of_their_own_params_are_rehashed():
    spec = SamplingSpec(n=4, max_tokens=8, seed=3)
    old = legacy_hash(spec.to_dict())
    assert _new_hash(old, spec.to_json()) == spec.params_hash
    assert _new_hash(spec.params_hash, spec.to_json()) is None  # already rehashed
    stored = json.dumps(_as_5291bef_stored(spec))  # a row of that release: no chat_template key
    assert _new_hash(legacy_hash(json.loads(stored)), stored) == spec.params_hash
    assert _new_hash("ph0", spec.to_json()) is None  # a hash these params did not produce
    assert _new_hash(old, '{"temperature": 1.0}') is None  # not a whole spec: cannot be recovered
    assert _new_hash(old, "not json") is None and _new_hash("imported", None) is None
    extra = json.dumps({**spec.to_dict(), "min_p": 0.1})
    assert _new_hash(legacy_hash(json.loads(extra)), extra) is None  # a field this release lacks


def test_the_map_comes_from_the_trajectories_before_and_after_their_upgrade(store):
    spec = SamplingSpec(n=8, max_tokens=8, seed=0)
    old = legacy_hash(spec.to_dict())
    row = {"task_id": "t", "run_id": "r", "sample_idx": 0, "model": "m", "policy_version": 0}
    store.append(
        "trajectories",
        [
            {**row, "traj_id": "x", "params_hash": old, "sampling_params": spec.to_json()},
            {**row, "traj_id": "y", "params_hash": spec.params_hash, "sampling_params": spec.to_json()},
            {**row, "traj_id": "z", "params_hash": "imported"},
        ],
    )
    assert hash_map(store) == {old: spec.params_hash}
    assert current_hash(store, old) == spec.params_hash and current_hash(store, "imported") == "imported"
