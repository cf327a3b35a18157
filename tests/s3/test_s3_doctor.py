"""`doctor` on an S3 store lists an orphaned object (issue 29): one at the store root is a stray
(a problem), a data file no commit added is a leftover (listed, not a problem); nothing is moved."""

from __future__ import annotations

import boto3
from s3_helpers import SECRET

from rldata.doctor import doctor


def _put(s3_server, uri: str, key: str, size: int) -> None:
    bucket, prefix = uri.removeprefix("s3://").split("/", 1)
    client = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key=SECRET,
    )
    client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b"\0" * size)


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
    assert "dump.bin" in stray.detail and stray.problem and not stray.repaired  # listed, never moved


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
