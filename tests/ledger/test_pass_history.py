"""rldata.ledger.history.run_pool: a run's task pool, rebuilt from the train config it stored, in this
release's nested form (``config.eval``) and in the previous release's flat one."""

from __future__ import annotations

import json

import pytest

from rldata import open_store
from rldata.configs.sampling import HELDOUT_WHERE
from rldata.ledger.history import run_info, run_pool
from rldata.runs.core import record_run
from rldata.trainer.config import TrainConfig


@pytest.fixture
def store(tmp_path):
    st = open_store(tmp_path / "s")
    rows = [
        {
            "task_id": f"t{i}",
            "source": "u",
            "domain": "math",
            "prompt": f"{i}+1=",
            "metadata": json.dumps({"split": "heldout" if i < 3 else "train"}),
        }
        for i in range(6)
    ]
    st.append("tasks", rows)
    return st


def _pool(store, run_id, args):
    with record_run(store, "train", args, run_id=run_id):
        pass
    return run_pool(store, run_info(store, run_id))


def test_the_pool_leaves_out_the_held_out_tasks_of_a_nested_or_an_old_flat_config(store, capsys):
    # this release: the eval section as TrainConfig.to_dict() stores it
    nested = TrainConfig.from_dict({"eval": {"heldout": True, "size": 2}}).to_dict()
    assert nested["eval"]["heldout"] is True and "eval_size" not in nested
    # the previous release: flat eval_size in the config, the predicate in the driver's options
    old = {"config": {"eval_size": 2}, "options": {"eval_where": HELDOUT_WHERE, "tasks_where": None}}
    assert _pool(store, "new", {"config": nested, "options": {}}) == ["t2", "t3", "t4", "t5"]
    assert _pool(store, "old", old) == ["t2", "t3", "t4", "t5"]
    # without an eval the pool is every task
    assert _pool(store, "none", {"config": TrainConfig().to_dict(), "options": {}}) == [
        f"t{i}" for i in range(6)
    ]


def test_an_old_runs_stored_flat_config_loads_as_the_nested_one(capsys):
    """A run written by the previous release stored flat eval_* keys: they still load (resume reads
    the same file), with one warning line per old key naming its new key."""
    old = {"steps": 3, "eval_every": 2, "eval_n": 4, "eval_size": 5, "eval_temperature": 0.5}
    cfg = TrainConfig.from_dict(old)
    assert cfg == TrainConfig.from_dict(
        {"steps": 3, "eval": {"every": 2, "n": 4, "size": 5, "temperature": 0.5}}
    )
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"rldata: warning: eval_{k} is deprecated, use eval.{k} (the old name goes in the next release)"
        for k in ("every", "n", "size", "temperature")
    ]
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg and capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "live, age",
    [
        ({"decay": 0.8, "age": "drawn"}, "drawn"),  # stored by this release: the whole LiveConfig
        ({"decay": 0.8, "age": "version"}, "version"),
        ({"decay": 0.8}, "version"),  # stored before `age` existed: those runs aged by version
        (None, "version"),  # stored before live samplers existed
    ],
)
def test_run_info_reads_the_age_the_run_used(store, live, age):
    config = {"steps": 2} if live is None else {"steps": 2, "live": live}
    with record_run(store, "train", {"config": config}, run_id="r1"):
        pass
    info = run_info(store, "r1")
    assert info.live.age == age
    assert info.live.decay == (0.8 if live else 0.9)


def test_a_train_config_stores_its_age():
    # what record_run stores for a training run is the whole config, `live.age` included
    assert TrainConfig().to_dict()["live"]["age"] == "drawn"
