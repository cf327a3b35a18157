"""The reasoning-gym environment and ``ingest_gym`` against a real store: layout, ids, refusals, difficulty."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("reasoning_gym")

import reasoning_gym

from rldata.envs import EnvSpec, guarded_reset, guarded_step, make_env, resolve
from rldata.envs.catalog import get_env, spec_of
from rldata.gym import INSTRUCTION, GymError, difficulty, knob_sql, rg_version, stored_entry
from rldata.ingest.gym import gym_tasks, ingest_gym

DATASETS = ["basic_arithmetic", "leg_counting", "chain_sum", "spell_backward"]


def _versions(store):
    return {t: store.version(t) for t in ("tasks", "environments", "runs")}


def test_env_is_registered_single_turn_and_versioned_with_reasoning_gym():
    cls = resolve("reasoning-gym")
    assert cls.version == f"1-rg{rg_version()}" and rg_version() == "0.1.25"
    env = make_env(
        EnvSpec("reasoning-gym", config={"dataset": "chain_sum", "config": {"max_terms": 3}, "seed": 1})
    )
    task = {"prompt": "What is 1 + 2?\n\n" + INSTRUCTION}
    opened = guarded_reset(env, task, 0, timeout_s=5)
    assert opened.messages == [{"role": "user", "content": task["prompt"]}]
    step = guarded_step(env, {"role": "assistant", "content": "<answer>3</answer>"}, timeout_s=5)
    assert step.done and step.finish_reason == "env_done" and step.messages == []


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"dataset": "no_such_dataset"}, "unknown reasoning-gym dataset 'no_such_dataset'"),
        ({"dataset": "chain_sum", "config": {"min_terms": 9, "max_terms": 2}}, "rejected the config"),
        ({"dataset": "chain_sum", "config": {"bogus": 1}}, "unexpected keyword argument 'bogus'"),
        ({"dataset": "chain_sum", "config": {"seed": 3}}, "'seed' is set by seed"),
        ({}, "config key 'dataset'"),
    ],
)
def test_env_rejects_bad_generator_config(config, message):
    from rldata.errors import RldataError

    with pytest.raises(RldataError, match=message):
        make_env(EnvSpec("reasoning-gym", config=config))


@pytest.mark.parametrize("name", DATASETS)
def test_ingest_layout_and_stable_ids(store, name):
    s = ingest_gym(store, name, n=60, seed=7)
    assert s.read == 60 and s.added + s.duplicates == 60 and s.added >= 50
    tasks = store.read("tasks").sort("task_id")
    env = get_env(store, f"reasoning-gym.{name}").to_dicts()
    assert len(env) == 1  # ONE environments row for the generator and its config
    assert spec_of(env[0]) == EnvSpec(
        "reasoning-gym", config={"dataset": name, "config": {}, "seed": 7}, max_turns=1
    )
    assert set(tasks["env_id"]) == {env[0]["env_id"]} and set(tasks["env_version"]) == {env[0]["version"]}
    assert env[0]["version"].startswith(f"1-rg{rg_version()}+")
    ds = reasoning_gym.create_dataset(name, size=60, seed=7)
    for row in tasks.head(10).to_dicts():
        meta = json.loads(row["metadata"])
        gen = meta["reasoning_gym"]
        assert gen == {
            "dataset": name,
            "config": {},
            "seed": 7,
            "size": 60,
            "index": gen["index"],
            "version": "0.1.25",
        }
        entry = ds[gen["index"]]  # the stored entry is the generated one (tuples come back as lists)
        assert meta["entry"] == json.loads(json.dumps(entry))
        assert meta["difficulty"] == json.loads(json.dumps(entry["metadata"]["difficulty"]))
        assert row["prompt"] == entry["question"].rstrip() + "\n\n" + INSTRUCTION
        assert (row["answer"], row["domain"], row["category"], row["source"]) == (
            entry["answer"],
            "reasoning-gym",
            name,
            "reasoning-gym",
        )
        assert ds.score_answer(row["answer"], stored_entry(row["metadata"]).entry) == 1.0
    # the same ingest again adds nothing: same ids, no second environment row
    again = ingest_gym(store, name, n=60, seed=7)
    assert again.added == 0 and again.duplicates == 60
    assert store.read("tasks").sort("task_id")["task_id"].to_list() == tasks["task_id"].to_list()
    assert store.count("environments") == 1


def test_repeated_questions_are_duplicates_and_ids_follow_the_content(store):
    s = ingest_gym(store, "chain_sum", n=300, config={"min_terms": 2, "max_terms": 2, "max_digits": 1})
    tasks = store.read("tasks")
    assert s.duplicates > 0 and s.added == tasks.height == tasks["prompt"].n_unique()
    # a second seed: new entries, a second environment version; questions already stored stay once
    s2 = ingest_gym(
        store, "chain_sum", n=300, config={"min_terms": 2, "max_terms": 2, "max_digits": 1}, seed=1
    )
    assert s2.added + s2.duplicates == 300 and store.read("tasks")["prompt"].n_unique() == store.count(
        "tasks"
    )
    assert store.read("environments")["version"].n_unique() == 2


def test_difficulty_knobs_read_back_per_task(store):
    """Two configs of one dataset: the helper (and its SQL) reads each task's knob back."""
    easy = ingest_gym(store, "chain_sum", n=40, config={"min_terms": 2, "max_terms": 2})
    hard = ingest_gym(store, "chain_sum", n=40, config={"min_terms": 5, "max_terms": 5, "min_digits": 3})
    assert easy.added == 40 and hard.added == 40
    df = difficulty(store, dataset="chain_sum")
    assert set(df.columns) == {
        "task_id",
        "category",
        "num_terms",
        "num_terms_range",
        "num_digits",
        "num_digits_range",
    }
    assert set(df["num_terms_range"]) == {"[2,2]", "[5,5]"} and df.height == 80
    for rng, value in (("[2,2]", "2"), ("[5,5]", "5")):
        assert set(df.filter(df["num_terms_range"] == rng)["num_terms"]) == {value}
    # the documented SQL: the knob per environment version, straight from metadata
    rows = store.sql(
        f"SELECT env_version, min(CAST({knob_sql('num_terms')} AS INT)), "
        f"max(CAST({knob_sql('num_terms')} AS INT)), count(*) FROM tasks GROUP BY 1 ORDER BY 2"
    ).fetchall()
    assert [(r[1], r[2], r[3]) for r in rows] == [(2, 2, 40), (5, 5, 40)]
    with pytest.raises(GymError, match="identifier"):
        knob_sql("x'; DROP TABLE tasks; --")


@pytest.mark.parametrize(
    ("name", "n", "message"),
    [
        ("codeio", 12, r"entry 11: not JSON-serializable at \$\.metadata\.input_data\.\w+: key 0 is a int"),
        (
            "rearc",
            1,
            "does not survive JSON storage: its own answer scores 1.0 on the generated entry but 0.05",
        ),
        ("graph_color", 1, "no oracle answer"),
        ("gsm_symbolic", 1, "gives full credit to the wrong answer"),
        ("knights_knaves", 1, "gives full credit to the wrong answer"),
        ("no_such", 1, "unknown reasoning-gym dataset"),
    ],
)
def test_unsound_datasets_are_refused_and_nothing_is_written(store, name, n, message):
    before = _versions(store)
    with pytest.raises(GymError, match=message):
        ingest_gym(store, name, n=n)
    assert _versions(store) == before


@pytest.mark.parametrize("n", [0, -1, True, 2.5])
def test_bad_n(store, n):
    with pytest.raises(GymError, match="^n: expected an integer") as e:
        gym_tasks("chain_sum", n)
    assert e.value.field == "n"


def test_stdout_stays_clean(capsys):
    gym_tasks("bf", 2)  # its compiler prints a dot per optimizer pass: that goes to stderr
    assert capsys.readouterr().out == ""
