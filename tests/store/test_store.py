"""The store against real Delta tables in a temp dir, with real DuckDB and Polars."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from deltalake import DeltaTable

from rldata import open_store, schemas
from rldata.errors import RldataError, SchemaError
from rldata.store.core import StaleReadError


def tasks(n: int, start: int = 0, **kw) -> list[dict]:
    return [
        {"task_id": f"t{i}", "source": "s", "domain": "math", "prompt": f"{i}+1=", "answer": str(i + 1), **kw}
        for i in range(start, start + n)
    ]


def test_open_creates_every_table_empty(tmp_path):
    store = open_store(tmp_path / "s")
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted(schemas.TABLES)
    summary = store.summary()
    assert summary["rows"].to_list() == [0] * len(schemas.TABLES)
    assert summary["version"].to_list() == [0] * len(schemas.TABLES)
    assert open_store(tmp_path / "s").versions() == store.versions()  # reopening changes nothing


def test_open_uses_env_var_when_no_root(tmp_path, monkeypatch):
    monkeypatch.setenv("RLDATA_STORE", str(tmp_path / "env-store"))
    assert open_store().root == str(tmp_path / "env-store")


def test_a_newer_schema_version_is_refused(tmp_path):
    root = tmp_path / "s"
    ts = schemas.get("metrics")
    DeltaTable.create(str(root / "metrics"), ts.schema, description=f"rldata.schema_version={ts.version + 1}")
    with pytest.raises(RldataError, match="schema version 2, newer than this rldata's 1"):
        open_store(root)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"bogus": 1}, "table 'tasks', row 2, field 'bogus': unknown field"),
        ({"prompt": None}, "table 'tasks', row 2, field 'prompt': missing required field"),
        ({"answer": 7}, "table 'tasks', row 2, field 'answer': expected string, got int 7"),
    ],
)
def test_a_bad_row_fails_the_whole_write_and_nothing_lands(store, bad, message):
    store.append("tasks", tasks(2, start=100))
    before = (store.version("tasks"), store.count("tasks"))
    rows = tasks(3)
    rows[2].update(bad)
    with pytest.raises(SchemaError) as ei:
        store.append("tasks", rows)
    assert str(ei.value) == message
    assert (store.version("tasks"), store.count("tasks")) == before
    assert sorted(store.read("tasks")["task_id"]) == ["t100", "t101"]


def test_append_counts_and_dedupe_is_insert_if_absent(store):
    assert store.append("tasks", tasks(3)) == 3
    assert store.append("tasks", tasks(5), dedupe=True) == 2  # t0..t2 exist
    v = store.version("tasks")
    assert store.append("tasks", tasks(5), dedupe=True) == 0
    dup_in_batch = tasks(1, start=9) + tasks(1, start=9, prompt="other")
    assert store.append("tasks", dup_in_batch, dedupe=True) == 1
    df = store.read("tasks")
    assert df.height == 6 and df["task_id"].n_unique() == 6
    assert df.filter(pl.col("task_id") == "t9")["prompt"].to_list() == ["9+1="]  # the first copy won
    assert store.version("tasks") == v + 1
    assert store.append("tasks", []) == 0


def test_append_if_unchanged_commits_only_on_an_unchanged_table(store):
    v = store.version("tasks")
    assert store.append_if_unchanged("tasks", tasks(2), version=v) == 2
    assert store.append_if_unchanged("tasks", tasks(3), version=v + 1) == 1  # insert-if-absent by key
    stale = store.version("tasks") - 1
    before = store.read("tasks").height
    # any commit since `stale`, even of rows with other keys, makes the write stale: nothing lands
    with pytest.raises(StaleReadError, match="changed since version"):
        store.append_if_unchanged("tasks", tasks(1, start=50), version=stale)
    assert store.read("tasks").height == before
    assert store.append_if_unchanged("tasks", [], version=stale) == 0


def test_keyed_writes_read_only_the_files_in_the_new_rows_task_range(store):
    """trajectories are keyed by traj_id, a hash: the merge is bounded by the rows' task_id range
    (prune_by), so it skips files of other tasks and still finds every stored copy in range."""

    def trajs(task: str, n: int) -> list[dict]:
        return [
            {
                "traj_id": f"{task}-{i}",
                "task_id": task,
                "run_id": "r",
                "sample_idx": i,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
                "completion": "1",
            }
            for i in range(n)
        ]

    names = ["a'1", "b", "c", "d", "e'5"]  # quotes must survive the literal range
    for t in names:  # one file per task, as a job writes batch by batch
        store.append("trajectories", trajs(t, 4))
    assert store.append("trajectories", trajs("c", 6), dedupe=True) == 2  # c-0..c-3 are stored
    assert store.last_merge["num_target_files_scanned"] == 1
    assert store.last_merge["num_target_files_skipped_during_scan"] == len(names) - 1
    # a batch spanning two tasks (quotes included) reads those two files, and inserts only new keys
    assert store.append("trajectories", trajs("a'1", 5) + trajs("b", 4), dedupe=True) == 1
    assert store.last_merge["num_target_files_scanned"] == 2
    assert store.upsert("trajectories", trajs("e'5", 2)) == 2  # an update in range is found
    assert store.last_merge["num_target_files_scanned"] == 1
    df = store.read("trajectories")
    assert df.height == df["traj_id"].n_unique() == 4 * len(names) + 2 + 1


def test_upsert_replaces_by_key_and_keeps_the_last_copy(store):
    store.append("tasks", tasks(3))
    n = store.upsert(
        "tasks", tasks(1, start=1, answer="new") + tasks(1, start=3) + tasks(1, start=3, answer="last")
    )
    assert n == 2
    df = store.read("tasks").sort("task_id")
    assert df["task_id"].to_list() == ["t0", "t1", "t2", "t3"]
    assert df["answer"].to_list() == ["1", "new", "3", "last"]


def test_overwrite_with_predicate_and_delete(store):
    store.append("tasks", tasks(4))
    store.overwrite("tasks", tasks(1, start=1, answer="x"), predicate="task_id = 't1'")
    assert dict(store.read("tasks").select("task_id", "answer").iter_rows()) == {
        "t0": "1",
        "t1": "x",
        "t2": "3",
        "t3": "4",
    }
    assert store.delete("tasks", "task_id IN ('t0', 't2')") == 2
    assert sorted(store.read("tasks")["task_id"]) == ["t1", "t3"]
    store.overwrite("tasks", tasks(1, start=7))
    assert store.read("tasks")["task_id"].to_list() == ["t7"]


def test_scan_read_and_sql(store):
    store.append("tasks", tasks(5))
    store.append("tasks", tasks(2, start=10, domain="code"))
    lazy = store.scan("tasks")
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.filter(pl.col("domain") == "code").collect().height == 2
    assert store.read("tasks").height == 7
    rel = store.sql("SELECT domain, count(*) AS n FROM tasks GROUP BY domain ORDER BY domain")
    assert rel.fetchall() == [("code", 2), ("math", 5)]
    assert store.sql("SELECT count(*) FROM trajectories").fetchall() == [(0,)]  # empty tables are queryable
    joined = store.sql("SELECT count(*) FROM tasks t LEFT JOIN verifications v USING (task_id)").fetchall()
    assert joined == [(7,)]
    with pytest.raises(RldataError, match="SQL error"):
        store.sql("SELECT nope FROM tasks")


def test_sql_rows_equal_the_table_rows_for_every_column_type(store):
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    store.append("tasks", tasks(2) + tasks(1, start=5, messages=msgs, category="c", metadata='{"a": 1}'))
    via_sql = store.sql("SELECT * FROM tasks ORDER BY task_id").pl()
    direct = store.read("tasks").sort("task_id")
    assert via_sql.columns == schemas.get("tasks").columns
    assert via_sql.to_dicts() == direct.to_dicts()
    assert via_sql.filter(pl.col("task_id") == "t5")["messages"].to_list() == [msgs]


def test_sql_never_reads_files_an_overwrite_retired_even_before_vacuum(store):
    store.append("tasks", tasks(3))
    store.overwrite("tasks", tasks(1, start=50))
    assert len(list(Path(store.uri("tasks")).glob("*.parquet"))) == 2  # the old file is still on disk
    assert store.sql("SELECT task_id FROM tasks").fetchall() == [("t50",)]
    assert store.sql("SELECT count(*) FROM tasks", as_of=1).fetchall() == [(3,)]


def test_time_travel_by_version_timestamp_and_per_table(store):
    store.append("tasks", tasks(2))  # version 1
    t1 = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    store.append("tasks", tasks(3, start=2))  # version 2
    store.append("metrics", [{"run_id": "r", "step": 0, "name": "m", "value": 1.0}])
    q = "SELECT count(*) FROM tasks"
    assert store.sql(q).fetchall() == [(5,)]
    assert store.sql(q, as_of=1).fetchall() == [(2,)]
    assert store.sql(q, as_of=0).fetchall() == [(0,)]
    assert store.sql(q, as_of=t1).fetchall() == [(2,)]
    both = "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM metrics)"
    assert store.sql(both, as_of={"tasks": 1}).fetchall() == [(2, 1)]
    assert store.scan("tasks", version=1).collect().height == 2
    with pytest.raises(RldataError, match="table 'tasks' has no version 9"):
        store.sql(q, as_of=9)


def test_summary_reports_rows_versions_and_files(store):
    store.append("tasks", tasks(3))
    store.append("tasks", tasks(2, start=3))
    row = store.summary().filter(pl.col("table") == "tasks").to_dicts()[0]
    assert row == {
        "table": "tasks",
        "rows": 5,
        "version": 2,
        "files": 2,
        "schema_version": schemas.get("tasks").version,
    }


def _parquet_files(path: Path) -> set[str]:
    return {p.name for p in path.glob("*.parquet")}


def test_queries_after_overwrite_compact_and_vacuum_see_only_live_files(store):
    for i in range(4):
        store.append("tasks", tasks(5, start=5 * i))
    tdir = Path(store.uri("tasks"))
    old_files = _parquet_files(tdir)
    store.overwrite("tasks", tasks(3, start=100))
    store.append("tasks", tasks(2, start=200))
    stats = store.compact(retention_hours=0)
    assert stats["tasks"]["files_removed"] == 2 and stats["tasks"]["files_added"] == 1
    assert stats["tasks"]["files_vacuumed"] == len(old_files) + 2  # the 4 overwritten and the 2 compacted
    live = _parquet_files(tdir)
    assert len(live) == 1 and not live & old_files  # retired files are gone from disk
    ids = sorted(r[0] for r in store.sql("SELECT task_id FROM tasks").fetchall())
    assert ids == ["t100", "t101", "t102", "t200", "t201"]
    assert store.read("tasks").height == 5
    assert store.scan("tasks").collect().height == 5


def test_compact_keeps_retired_files_within_retention(store):
    store.append("tasks", tasks(2))
    store.append("tasks", tasks(2, start=2))
    store.compact()  # default retention: a week
    assert store.sql("SELECT count(*) FROM tasks", as_of=1).fetchall() == [(2,)]  # old version still readable
    assert store.count("tasks") == 4


_WORKER = """
import sys
from rldata import open_store
store, proc, batches, size, dedupe = open_store(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
for b in range(batches):
    base = 0 if dedupe else proc * batches * size
    rows = [{"task_id": f"t{base + b * size + i}", "source": f"p{proc}", "domain": "math", "prompt": "p",
             "answer": "a"} for i in range(size)]
    store.append("tasks", rows, dedupe=dedupe)
"""


def _run_workers(root, n_proc: int, batches: int, size: int, *, dedupe: bool) -> None:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                str(root),
                str(p),
                str(batches),
                str(size),
                "1" if dedupe else "0",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(n_proc)
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * n_proc, errors


@pytest.mark.slow
def test_four_processes_appending_at_once_lose_and_double_nothing(store):
    _run_workers(store.root, 4, 20, 50, dedupe=False)  # 4 processes x 1,000 rows, 80 racing commits
    df = store.read("tasks")
    assert df.height == 4000
    assert df["task_id"].n_unique() == 4000
    assert df.group_by("source").len().sort("source")["len"].to_list() == [1000] * 4
    assert store.version("tasks") == 80


@pytest.mark.slow
def test_concurrent_dedupe_appends_of_the_same_keys_land_once(store):
    _run_workers(store.root, 3, 4, 50, dedupe=True)  # every process inserts the same 200 keys
    df = store.read("tasks")
    assert df.height == 200
    assert df["task_id"].n_unique() == 200
