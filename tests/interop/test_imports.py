"""Importing veRL, TRL and generic JSONL rollout dumps into trajectories and verifications."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rldata.errors import InputError, RldataError
from rldata.ingest import normalize_text, task_id
from rldata.interop import ImportConfig, import_rollouts


def write_verl_step(d, step, records):
    d.mkdir(exist_ok=True)
    with open(d / f"{step}.jsonl", "w") as f:
        f.writelines(json.dumps({"step": step, **r}) + "\n" for r in records)


def verl_dump(d, steps=(1, 2)):
    """Per step: two samples of the known task '1+1=' and one of an unknown '5 + 5='."""
    for s in steps:
        write_verl_step(
            d,
            s,
            [
                {"input": "1+1=", "output": "2", "gts": "2", "score": 1.0, "acc": True},
                {"input": "1+1=", "output": "3", "gts": "2", "score": 0.0, "acc": False},
                {"input": "5 +  5=", "output": "10", "gts": "10", "score": 1.0, "acc": True},
            ],
        )
    return d


@pytest.fixture
def known(store):
    store.append(
        "tasks", [{"task_id": "k1", "source": "arith", "domain": "math", "prompt": "1+1=", "answer": "2"}]
    )
    return store


def test_verl_dump_links_tasks_adds_missing_ones_and_is_queryable(known, tmp_path):
    store = known
    res = import_rollouts(
        store, ImportConfig(format="verl", model="qwen-0.5b", path=verl_dump(tmp_path / "dump"))
    )
    assert (res.files, res.records, res.skipped) == (2, 6, 0)
    assert (res.tasks_added, res.trajectories_added, res.verifications_added) == (1, 6, 6)
    tasks = store.sql("SELECT task_id, source, domain, prompt, answer FROM tasks ORDER BY source").fetchall()
    assert tasks[0] == ("k1", "arith", "math", "1+1=", "2")
    assert tasks[1] == (task_id("5 +  5=", "10", "import:verl"), "import:verl", "math", "5 +  5=", "10")
    rows = store.sql(
        "SELECT t.task_id, t.step, t.sample_idx, t.policy_version, t.reward, t.model, t.params_hash, "
        "v.verifier, v.verifier_version, v.layer, v.passed, v.detail "
        "FROM trajectories t JOIN verifications v USING (traj_id) WHERE t.task_id = 'k1' "
        "ORDER BY t.step, t.sample_idx"
    ).fetchall()
    assert [(r[1], r[2], r[3], r[4], r[10]) for r in rows] == [
        (1, 0, 1, 1.0, True),
        (1, 1, 1, 0.0, False),
        (2, 0, 2, 1.0, True),
        (2, 1, 2, 0.0, False),
    ]
    assert {(r[5], r[6], r[7], r[8], r[9]) for r in rows} == {
        ("qwen-0.5b", "imported", "imported:verl", "imported", "answer")
    }
    assert json.loads(rows[0][11]) == {"acc": True}
    run = store.sql("SELECT run_id, kind, status FROM runs").fetchall()
    assert run == [(res.run_id, "import", "done")]
    assert res.run_id.startswith("import:verl:")


def test_reimport_adds_nothing_and_a_grown_dump_adds_only_the_new_step(known, tmp_path):
    store = known
    dump = verl_dump(tmp_path / "dump")
    import_rollouts(store, ImportConfig(format="verl", path=dump))
    versions = {t: store.version(t) for t in ("tasks", "trajectories", "verifications")}
    again = import_rollouts(store, ImportConfig(format="verl", path=dump))
    assert (again.tasks_added, again.trajectories_added, again.verifications_added) == (0, 0, 0)
    assert store.count("trajectories") == 6
    verl_dump(dump, steps=(3,))
    grown = import_rollouts(store, ImportConfig(format="verl", path=dump))
    assert (grown.records, grown.trajectories_added, grown.tasks_added) == (9, 3, 0)
    assert store.sql("SELECT max(step) FROM trajectories").fetchall() == [(3,)]
    assert store.version("tasks") >= versions["tasks"]


def test_missing_required_field_names_file_and_line_and_writes_nothing(known, tmp_path):
    store = known
    dump = verl_dump(tmp_path / "dump", steps=(1,))
    with open(dump / "1.jsonl", "a") as f:
        f.write(json.dumps({"input": "1+1=", "output": "2", "step": 1}) + "\n")  # line 4: no score
    before = store.versions()
    with pytest.raises(InputError) as e:
        import_rollouts(store, ImportConfig(format="verl", path=dump))
    assert str(e.value) == f"{dump / '1.jsonl'}:4: field 'score': missing required field"
    assert store.versions() == before
    assert store.count("trajectories") == 0


def test_on_error_skip_imports_the_rest(known, tmp_path):
    store = known
    dump = verl_dump(tmp_path / "dump", steps=(1,))
    with open(dump / "1.jsonl", "a") as f:
        f.write("{not json\n")
        f.write(json.dumps({"input": "1+1=", "output": 7, "score": 1.0}) + "\n")
    res = import_rollouts(store, ImportConfig(format="verl", on_error="skip", path=dump))
    assert (res.records, res.skipped, res.trajectories_added) == (3, 2, 3)
    assert res.errors[0].endswith(
        "1.jsonl:4: invalid JSON (Expecting property name enclosed in double quotes)"
    )
    assert "1.jsonl:5: field 'output': expected a string" in res.errors[1]


def test_all_records_bad_is_an_error_even_when_skipping(store, tmp_path):
    (tmp_path / "1.jsonl").write_text(json.dumps({"output": "x", "score": 1}) + "\n")
    with pytest.raises(RldataError, match="no valid records"):
        import_rollouts(store, ImportConfig(format="verl", on_error="skip", path=tmp_path / "1.jsonl"))
    assert store.count("trajectories") == 0


def test_trl_log_one_verification_per_reward_column(known, tmp_path):
    store = known
    table = pa.table(
        {
            "step": [3, 3, 3],
            "prompt": [[{"role": "user", "content": "1+1="}]] * 2 + [[{"role": "user", "content": "7+1="}]],
            "completion": [
                [{"role": "assistant", "content": "2"}],
                [{"role": "assistant", "content": "11"}],
                [{"role": "assistant", "content": "8"}],
            ],
            "accuracy_reward": [1.0, 0.0, 1.0],
            "format_reward": [0.5, None, 0.0],
            "advantage": [1.1, -0.9, 0.0],
        }
    )
    pq.write_table(table, tmp_path / "completions_00003.parquet")
    res = import_rollouts(store, ImportConfig(format="trl", path=tmp_path))
    assert (res.records, res.trajectories_added, res.verifications_added, res.tasks_added) == (3, 3, 5, 1)
    rows = store.sql(
        "SELECT t.task_id, t.completion, t.reward, t.advantage, t.step, t.messages IS NOT NULL "
        "FROM trajectories t ORDER BY t.advantage DESC"
    ).fetchall()
    assert rows[0] == ("k1", "2", 1.5, 1.1, 3, True)
    assert rows[2] == ("k1", "11", 0.0, -0.9, 3, True)
    layers = store.sql(
        "SELECT layer, count(*), sum(passed::int) FROM verifications GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert layers == [("accuracy_reward", 3, 2), ("format_reward", 2, 1)]
    added = store.sql("SELECT messages FROM tasks WHERE messages IS NOT NULL").fetchall()
    assert added == [([{"role": "user", "content": "7+1="}],)]


def test_trl_reward_columns_option_and_missing_column(store, tmp_path):
    pq.write_table(
        pa.table({"step": [1], "prompt": ["2+2="], "completion": ["4"], "acc": [1.0], "len": [3]}),
        tmp_path / "c.parquet",
    )
    res = import_rollouts(
        store, ImportConfig(format="trl", reward_columns=("acc",), path=tmp_path / "c.parquet")
    )
    assert store.sql("SELECT layer FROM verifications").fetchall() == [("acc",)]
    assert json.loads(store.sql("SELECT detail FROM verifications").fetchall()[0][0]) == {"len": 3}
    assert res.verifications_added == 1
    pq.write_table(pa.table({"step": [1], "completion": ["4"], "acc": [1.0]}), tmp_path / "d.parquet")
    with pytest.raises(InputError, match=r"d.parquet: field 'prompt': missing required column"):
        import_rollouts(store, ImportConfig(format="trl", path=tmp_path / "d.parquet"))


def test_generic_jsonl_with_a_field_map(known, tmp_path):
    store = known
    lines = [
        {"question": "1+1=", "response": "2", "reward": 1, "gold": "2"},
        {"question": "1+1=", "response": "5", "reward": 0, "gold": "2"},
        {"question": "3+3=", "response": "6"},
    ]  # no score: a trajectory without a verification
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    spec = ImportConfig(
        "jsonl",
        field_map=(
            ("prompt", "question"),
            ("completion", "response"),
            ("score", "reward"),
            ("answer", "gold"),
        ),
    )
    res = import_rollouts(store, spec.replace(path=tmp_path / "r.jsonl"))
    assert (res.trajectories_added, res.verifications_added, res.tasks_added) == (3, 2, 1)
    got = store.sql(
        "SELECT t.task_id, t.sample_idx, v.passed FROM trajectories t "
        "LEFT JOIN verifications v USING (traj_id) ORDER BY t.task_id, t.sample_idx"
    ).fetchall()
    assert got[-2:] == [("k1", 0, True), ("k1", 1, False)]
    assert got[0][2] is None
    (tmp_path / "bad.jsonl").write_text(json.dumps({"question": "1+1="}) + "\n")
    with pytest.raises(InputError, match=r"bad.jsonl:1: field 'response': missing required field"):
        import_rollouts(store, spec.replace(path=tmp_path / "bad.jsonl"))


def test_linking_prefers_the_task_with_the_matching_answer(store, tmp_path):
    store.append(
        "tasks",
        [
            {"task_id": "a", "source": "s1", "domain": "math", "prompt": "What is x?", "answer": "1"},
            {"task_id": "b", "source": "s2", "domain": "math", "prompt": "What  is x? ", "answer": "2"},
        ],
    )
    write_verl_step(
        tmp_path,
        1,
        [
            {"input": "What is x?", "output": "2", "gts": "2", "score": 1.0},
            {"input": "What is x?", "output": "1", "gts": None, "score": 0.0},
        ],
    )
    import_rollouts(store, ImportConfig(format="verl", path=tmp_path / "1.jsonl"))
    assert store.sql("SELECT task_id FROM trajectories ORDER BY completion").fetchall() == [("a",), ("b",)]
    assert normalize_text(" What \n is x?") == "What is x?"


def test_missing_path_and_empty_directory(store, tmp_path):
    with pytest.raises(InputError, match="no such file"):
        import_rollouts(store, ImportConfig(format="verl", path=tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no \*.parquet files"):
        import_rollouts(store, ImportConfig(format="trl", path=tmp_path / "empty"))


def test_import_spec_checks():
    with pytest.raises(ValueError, match="unknown import format 'openrlhf'; known: verl, trl, jsonl"):
        ImportConfig("openrlhf")
    with pytest.raises(ValueError, match="unknown field 'reward'"):
        ImportConfig("jsonl", field_map=(("reward", "r"),))


def test_sql_string_filter_on_imported_rows(known, tmp_path):
    """Merges write string_view Parquet columns; a WHERE on a string column must still work."""
    store = known
    import_rollouts(store, ImportConfig(format="verl", path=verl_dump(tmp_path / "dump")))
    got = store.sql("SELECT count(*) FROM trajectories WHERE task_id = 'k1'").fetchall()
    assert got == [(4,)]
