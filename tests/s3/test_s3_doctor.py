"""`doctor` on an S3 store (issue 29): an orphaned object at the store root is a stray (a problem,
moved aside by repair), a data file no commit added is a leftover (listed, not a problem); damaged logs and
data files are found by file and repaired as on a local store, what is replaced set aside under the
store's `.rldata-doctor/<time>/` prefix."""

from __future__ import annotations

import errno
import importlib
import json

import boto3
import pytest
from s3_helpers import SECRET

from rldata.doctor.core import doctor
from rldata.errors import RldataError
from rldata.ingest import ingest


def _client(s3_server):
    return boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key=SECRET,
    )


def _put(s3_server, uri: str, key: str, size: int | bytes) -> None:
    bucket, prefix = uri.removeprefix("s3://").split("/", 1)
    body = b"\0" * size if isinstance(size, int) else size
    _client(s3_server).put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=body)


def _get(s3_server, uri: str, key: str) -> bytes:
    bucket, prefix = uri.removeprefix("s3://").split("/", 1)
    return _client(s3_server).get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read()


def _keys(s3_server, uri: str, under: str = "") -> list[str]:
    bucket, prefix = uri.removeprefix("s3://").split("/", 1)
    pages = (
        _client(s3_server)
        .get_paginator("list_objects_v2")
        .paginate(Bucket=bucket, Prefix=f"{prefix}/{under}")
    )
    return sorted(o["Key"][len(prefix) + 1 :] for page in pages for o in page.get("Contents", []))


def test_doctor_lists_orphaned_objects(s3_server, s3_uri, s3_store):
    s3_store.append("runs", [{"run_id": "ok", "kind": "x", "status": "done"}])
    assert [f for f in doctor(s3_store) if f.problem] == []  # a healthy store: nothing to report
    _put(
        s3_server,
        s3_uri,
        "runs/part-00001-0123abcd-0000-4000-8000-000000000000-c000.snappy.parquet",
        2_000_000,
    )
    _put(s3_server, s3_uri, "dump.bin", 1000)
    found = {(f.check, f.table): f for f in doctor(s3_store, repair=True)}
    assert set(found) == {("leftover", "runs"), ("stray", "-")}
    left, stray = found["leftover", "runs"], found["stray", "-"]
    assert "2,000,000 bytes" in left.detail and not left.problem and not left.repaired
    assert "dump.bin" in stray.detail and stray.repaired and f"{s3_uri}/.rldata-doctor/" in stray.detail
    assert [k for k in _keys(s3_server, s3_uri) if k.endswith("dump.bin")] == [
        next(k for k in _keys(s3_server, s3_uri, ".rldata-doctor/") if k.endswith("/stray/dump.bin"))
    ]  # moved aside (a copy, then a delete), never deleted; the young leftover stays where it is


def test_a_damaged_checkpoint_on_s3_takes_down_only_its_table(s3_server, s3_uri, s3_store):
    from rldata import open_store

    s3_store.append(
        "tasks", [{"task_id": "a", "source": "s", "domain": "math", "prompt": "a?", "answer": "1"}]
    )
    s3_store.append("runs", [{"run_id": "ok", "kind": "x", "status": "done"}])
    s3_store.table("tasks").create_checkpoint()
    _put(s3_server, s3_uri, f"tasks/_delta_log/{1:020d}.checkpoint.parquet", 100)  # garbage
    store = open_store(s3_uri, storage_options=s3_server.options)
    assert list(store.damaged) == ["tasks"] and "'tasks'" in store.damaged["tasks"]
    assert store.sql("SELECT count(*) FROM runs").fetchall() == [(1,)]
    assert [(f.check, f.table) for f in doctor(store) if f.problem] == [("log", "tasks")]


def _three_appends(store) -> None:
    for batch in range(3):  # tasks versions 1, 2, 3 (version 0 created the table)
        store.append(
            "tasks",
            [
                {
                    "task_id": f"b{batch}-{k}",
                    "source": "s",
                    "domain": "math",
                    "prompt": f"{batch} {k}?",
                    "answer": "1",
                }
                for k in range(5)
            ],
        )


def _tasks_count(s3_uri, s3_server) -> int:
    from rldata import open_store

    return (
        open_store(s3_uri, storage_options=s3_server.options)
        .sql("SELECT count(*) FROM tasks")
        .fetchall()[0][0]
    )


@pytest.mark.parametrize("cut", ["after_path", "in_path"])
def test_a_truncated_commit_on_s3_is_rebuilt_keeping_later_commits(s3_server, s3_uri, s3_store, cut):
    """Its add cut mid-line: after the path (the object is found and checked: every row reads again)
    or inside it (the object cannot be named: its 5 rows stay in it, named by doctor, not moved)."""
    from rldata import open_store

    _three_appends(s3_store)
    key = f"tasks/_delta_log/{2:020d}.json"
    whole = _get(s3_server, s3_uri, key)
    path_at = whole.index(b'"path":"', whole.rindex(b'{"add"')) + len(b'"path":"')
    keep = whole.index(b'"', path_at) + 1 if cut == "after_path" else path_at + 4
    _put(s3_server, s3_uri, key, whole[:keep])
    store = open_store(s3_uri, storage_options=s3_server.options)
    assert "tasks" in store.damaged
    (found,) = [f for f in doctor(store) if f.problem]
    assert (found.check, found.table) == ("log", "tasks") and f"{2:020d}.json" in found.detail, found
    assert "1 later commit(s) intact" in found.detail and not found.repaired

    (fixed,) = [f for f in doctor(store, repair=True) if f.check == "log"]
    assert fixed.repaired and "later commits kept" in fixed.detail, fixed.detail
    assert f"{s3_uri}/.rldata-doctor/" in fixed.detail  # where the damaged commit went, in the store
    aside = _keys(s3_server, s3_uri, ".rldata-doctor/")
    assert [k for k in aside if k.endswith(f"log/tasks/_delta_log/{2:020d}.json")], aside
    assert _get(s3_server, s3_uri, next(k for k in aside if k.endswith(".json"))) != whole  # the damaged one
    left = [f for f in doctor(open_store(s3_uri, storage_options=s3_server.options)) if f.problem]
    if cut == "after_path":  # batches 0, 1 and 2: the cut commit's add recovered from its object
        assert "recovered 1 add(s) (5 row(s)) of the 1 the commit made" in fixed.detail, fixed.detail
        assert _tasks_count(s3_uri, s3_server) == 15 and left == []
        return
    assert "could not recover 1 add(s) cut off before their path" in fixed.detail, fixed.detail
    assert _tasks_count(s3_uri, s3_server) == 10  # batches 0 and 2: the later commit's rows are not hidden
    (unref,) = left
    assert unref.check == "unreferenced" and "hold 5 row(s) the table lacks" in unref.detail, unref
    assert len([k for k in _keys(s3_server, s3_uri, "tasks/") if k.endswith(".parquet")]) == 3  # not moved


def test_a_garbage_checkpoint_on_s3_is_moved_aside(s3_server, s3_uri, s3_store):
    from rldata import open_store

    _three_appends(s3_store)
    s3_store.table("tasks").create_checkpoint()
    _put(s3_server, s3_uri, f"tasks/_delta_log/{3:020d}.checkpoint.parquet", b"PAR1 not parquet")
    store = open_store(s3_uri, storage_options=s3_server.options)
    (found,) = [f for f in doctor(store) if f.problem]
    assert found.table == "tasks" and f"{3:020d}.checkpoint.parquet" in found.detail, found.detail
    (fixed,) = [f for f in doctor(store, repair=True) if f.check == "log"]
    assert fixed.repaired and "reads from its commits 0..3" in fixed.detail, fixed.detail
    assert f"tasks/_delta_log/{3:020d}.checkpoint.parquet" not in _keys(s3_server, s3_uri, "tasks/")
    assert _keys(s3_server, s3_uri, ".rldata-doctor/")  # set aside, not deleted
    assert _tasks_count(s3_uri, s3_server) == 15


def test_a_deleted_data_file_on_s3_is_removed_by_a_commit(s3_server, s3_uri, s3_store):
    from rldata import open_store

    _three_appends(s3_store)
    victim = min(
        k for k in _keys(s3_server, s3_uri, "tasks/") if k.endswith(".parquet") and "_delta_log" not in k
    )
    _client(s3_server).delete_object(
        Bucket=s3_uri.removeprefix("s3://").split("/", 1)[0], Key=f"store/{victim}"
    )
    store = open_store(s3_uri, storage_options=s3_server.options)
    (found,) = [f for f in doctor(store) if f.problem]
    assert (found.check, found.table) == ("data_files", "tasks") and "deleted outside rldata" in found.detail
    assert "5 row(s)" in found.detail
    (fixed,) = [f for f in doctor(store, repair=True) if f.check == "data_files"]
    assert fixed.repaired and "version 4 removes 1 unreadable data file(s) (5 row(s) lost)" in fixed.detail
    assert _tasks_count(s3_uri, s3_server) == 10  # the other files read again
    assert [f for f in doctor(open_store(s3_uri, storage_options=s3_server.options)) if f.problem] == []


def test_an_ingest_whose_run_was_lost_is_found_and_recorded(s3_store, tmp_path, monkeypatch):
    """The tasks history read works on S3: the tagged commit without its run row is found, repaired."""
    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join(json.dumps({"prompt": f"{i} + 2?", "answer": str(i + 2)}) + "\n" for i in range(3))
    )

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(importlib.import_module("rldata.ingest.files"), "_record_run", full)
    with pytest.raises(RldataError, match="could not record the run"):
        ingest(s3_store, path)
    monkeypatch.undo()
    [f] = doctor(s3_store, repair=True)
    assert (f.check, f.count, f.repaired) == ("unrecorded_ingest", 1, True)
    [row] = s3_store.read("runs").to_dicts()
    assert (row["kind"], row["status"], json.loads(row["summary"])["added"]) == ("ingest", "done", 3)
    assert doctor(s3_store) == []
