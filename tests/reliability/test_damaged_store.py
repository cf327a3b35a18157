"""A damaged Delta log: the other tables keep working, errors name table, version and file, no write
lands on top of it, and `rldata doctor` reports and repairs it and the cross-table invariants."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from rldata import open_store
from rldata.store.core import DamagedTableError
from tests.reliability.helpers import fingerprint, one_error_line, run


@pytest.fixture
def root(tmp_path):
    store = open_store(tmp_path / "store")
    store.append(
        "tasks",
        [
            {"task_id": f"t{k}", "source": "s", "domain": "math", "prompt": f"{k}+1?", "answer": str(k + 1)}
            for k in range(10)
        ],
    )
    store.append(
        "tasks", [{"task_id": "t10", "source": "s", "domain": "math", "prompt": "10+1?", "answer": "11"}]
    )
    store.append(
        "trajectories",
        [
            {
                "traj_id": f"x{k}",
                "task_id": f"t{k}",
                "run_id": "r",
                "sample_idx": 0,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
            }
            for k in range(3)
        ],
    )
    store.append(
        "trajectories",
        [
            {
                "traj_id": "x3",
                "task_id": "t3",
                "run_id": "r",
                "sample_idx": 0,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
            }
        ],
    )
    return tmp_path / "store"


def _commit(root, table, version):
    return root / table / "_delta_log" / f"{version:020d}.json"


def test_truncated_commit_takes_down_only_its_table(root, tmp_path, capsys):
    bad = _commit(root, "trajectories", 2)
    bad.write_bytes(bad.read_bytes()[:40])
    code, out, err = run(capsys, "--store", str(root), "tables", "-f", "csv")
    line = one_error_line(err)
    assert code == 1 and "'trajectories'" in line and "version 2" in line and str(bad) in line
    assert "tasks,11,2," in out  # the other tables are listed
    code, out, err = run(capsys, "--store", str(root), "sql", "SELECT count(*) AS n FROM tasks", "-f", "csv")
    assert (code, out) == (0, "n\n11\n"), err
    code, _, err = run(capsys, "--store", str(root), "sql", "SELECT count(*) FROM trajectories")
    assert code == 1 and str(bad) in one_error_line(err)


def test_no_write_commits_on_top_of_an_empty_commit_file(root, tmp_path, capsys):
    _commit(root, "tasks", 2).write_bytes(b"")  # the tasks' last commit, emptied
    new = tmp_path / "new.jsonl"
    new.write_text('{"prompt": "new?", "answer": "1"}\n')
    before = fingerprint(root / "tasks")
    code, _, err = run(capsys, "--store", str(root), "ingest", str(new))
    line = one_error_line(err)
    assert code == 1 and "'tasks' is damaged: version 2" in line and "empty commit file" in line
    assert fingerprint(root / "tasks") == before
    with pytest.raises(DamagedTableError):
        open_store(root).upsert("tasks", [{"task_id": "z", "source": "s", "domain": "math", "prompt": "z"}])
    assert fingerprint(root / "tasks") == before
    # the other tables still take writes
    assert open_store(root).append("runs", [{"run_id": "ok", "kind": "x", "status": "done"}]) == 1


def test_doctor_reports_then_repairs(root, tmp_path, capsys):
    store = open_store(root)
    # duplicates by key (a plain append bypasses the key), an unverified trajectory, an orphan
    # verification, a wrong ledger row, a stuck run, a stray file, a damaged log
    store.append(
        "trajectories",
        [
            {
                "traj_id": "x0",
                "task_id": "t0",
                "run_id": "r",
                "sample_idx": 0,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
            }
        ],
    )
    store.append(
        "verifications",
        [
            {
                "traj_id": t,
                "task_id": f"t{k}",
                "verifier": "math",
                "verifier_version": "1",
                "layer": "answer",
                "passed": True,
                "score": 1.0,
            }
            for k, t in enumerate(["x0", "x1", "x2", "gone"])
        ],
    )
    store.upsert(
        "passrates",
        [
            {
                "task_id": "t0",
                "model": "m",
                "params_hash": "p",
                "verifier_key": "math@1",
                "n": 5,
                "n_correct": 5,
                "n_error": 0,
                "pass_rate": 1.0,
            }
        ],
    )
    own = {"host": "elsewhere.invalid", "pid": 1, "pid_start": "1"}
    beat = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)).isoformat()
    store.upsert(
        "runs",
        [
            {
                "run_id": "stuck",
                "kind": "sample",
                "status": "running",
                "summary": json.dumps({"owner": own, "heartbeat": beat}),
            }
        ],
    )
    (root / "leak.csv").write_text("x\n")
    bad = _commit(root, "environments", 0)
    bad.write_bytes(bad.read_bytes()[:30])

    code, out, err = run(capsys, "--store", str(root), "doctor", "-f", "json")
    assert code == 1 and "problem(s) remain" in err
    found = {(f["check"], f["table"]): f["count"] for f in json.loads(out)}
    assert found == {
        ("log", "environments"): 1,
        ("duplicates", "trajectories"): 1,
        ("orphans", "trajectories"): 1,
        ("orphans", "verifications"): 1,
        ("ledger", "passrates"): 1,
        ("ledger_missing", "passrates"): 2,  # t1 and t2 were verified but have no ledger row
        ("stuck_runs", "runs"): 1,
        ("stray", "-"): 1,
    }

    code, out, err = run(capsys, "--store", str(root), "doctor", "--repair", "-f", "json")
    assert out, err
    repaired = {(f["check"], f["table"]) for f in json.loads(out) if f["repaired"]}
    assert repaired == {
        ("log", "environments"),
        ("duplicates", "trajectories"),
        ("ledger", "passrates"),
        ("ledger_missing", "passrates"),
        ("stuck_runs", "runs"),
        ("stray", "-"),
    }
    assert code == 1  # the orphans need a person (or a re-run of rldata sample)
    store = open_store(root)
    assert store.sql("SELECT count(*), count(DISTINCT traj_id) FROM trajectories").fetchall()[0] == (4, 4)
    assert store.sql("SELECT n, n_correct FROM passrates WHERE task_id = 't0'").fetchall() == [(1, 1)]
    assert store.sql("SELECT task_id, n, n_correct FROM passrates ORDER BY 1").fetchall() == [
        ("t0", 1, 1),
        ("t1", 1, 1),  # the ledger rows a kill lost, restored from the recount
        ("t2", 1, 1),
    ]
    assert store.sql("SELECT status FROM runs WHERE run_id = 'stuck'").fetchall() == [("failed",)]
    assert not (root / "leak.csv").exists() and store.count("environments") == 0
    code, out, err = run(capsys, "--store", str(root), "doctor", "-f", "json")
    assert {f["check"] for f in json.loads(out)} == {"orphans"}


def test_leftover_data_files_are_listed_not_problems(tmp_path, capsys):
    """A commit that lost a race (or a killed write) leaves a data file no commit added: healthy."""
    root = tmp_path / "healthy"
    open_store(root).append("runs", [{"run_id": "ok", "kind": "x", "status": "done"}])
    name = "part-00001-0123abcd-0000-4000-8000-000000000000-c000.snappy.parquet"
    (root / "runs" / name).write_bytes(b"\0" * 100)
    code, out, err = run(capsys, "--store", str(root), "doctor", "-f", "json")
    assert code == 0, err
    [f] = json.loads(out)
    assert (f["check"], f["table"], f["count"], f["repaired"]) == ("leftover", "runs", 1, False)
    code, out, err = run(capsys, "--store", str(root), "doctor", "--repair", "-f", "json")
    assert code == 0 and (root / "runs" / name).exists()  # younger than an hour: maybe a write in flight
    (root / "runs" / "notes.txt").write_text("x")  # not a data file: a stray, a problem
    code, out, err = run(capsys, "--store", str(root), "doctor", "-f", "json")
    assert code == 1 and {(f["check"], f["table"]) for f in json.loads(out)} == {
        ("leftover", "runs"),
        ("stray", "runs"),
    }


def test_unreferenced_rows_are_a_problem_never_moved_and_superseded_ones_are_leftovers(tmp_path, capsys):
    """Files no commit references, told apart by their rows: one holding rows the table lacks is the
    only copy of them (a problem, left in place even when old); a copy of rows the table holds, an
    incomplete file and a killed commit's 0-byte temporary file are leftovers (moved when old)."""
    import os
    import shutil
    import time

    import polars as pl

    root = tmp_path / "s"
    store = open_store(root)
    store.append("runs", [{"run_id": f"r{k}", "kind": "x", "status": "done"} for k in range(3)])
    tdir = root / "runs"
    live = next(tdir.glob("*.parquet"))
    uuid = "0123abcd-0000-4000-8000-0000000000{:02d}"
    superseded = tdir / f"part-00001-{uuid.format(1)}-c000.snappy.parquet"
    shutil.copy(live, superseded)  # a retried write: its rows landed in the live file
    only = tdir / f"part-00002-{uuid.format(2)}-c000.snappy.parquet#1"  # a staged file never renamed
    pl.read_parquet(live).with_columns(pl.lit("lost").alias("run_id")).head(1).write_parquet(only)
    temp = tdir / "_delta_log" / f"{2:020d}.json#1"
    temp.write_bytes(b"")  # a commit killed between its create and its link
    hour_ago = time.time() - 7200
    for p in (superseded, only, temp):
        os.utime(p, (hour_ago, hour_ago))
    before = fingerprint(root)
    code, out, _ = run(capsys, "--store", str(root), "doctor", "-f", "json")
    found = {f["check"]: f for f in json.loads(out)}
    assert code == 1 and set(found) == {"unreferenced", "leftover"}, out
    assert (
        found["unreferenced"]["count"] == 1
        and "hold 1 row(s) the table lacks" in found["unreferenced"]["detail"]
    )
    assert "left in place (the only copy of those rows)" in found["unreferenced"]["detail"]
    assert found["leftover"]["count"] == 2
    assert "1 data file(s) whose rows the table holds" in found["leftover"]["detail"]
    assert (
        f"1 temporary commit file(s) a killed commit left (_delta_log/{2:020d}.json#1 (0 bytes))"
        in (found["leftover"]["detail"])
    )
    assert fingerprint(root) == before
    code, out, _ = run(capsys, "--store", str(root), "doctor", "--repair", "-f", "json")
    assert code == 1 and only.exists() and not superseded.exists() and not temp.exists(), out
    assert list((root / ".rldata-doctor").rglob(superseded.name)) and list(
        (root / ".rldata-doctor").rglob(temp.name)
    )
    assert open_store(root).count("runs") == 3
