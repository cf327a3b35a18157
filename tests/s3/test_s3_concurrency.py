"""Four processes appending to one s3:// table at once: every row lands once, every commit is in the log."""

from __future__ import annotations

import json
import multiprocessing as mp

import boto3
import pytest
from s3_helpers import SECRET

from rldata import open_store

WRITERS, BATCHES, ROWS = 4, 5, 40


def _writer(uri: str, options: dict, w: int) -> None:
    store = open_store(uri, storage_options=options)
    for b in range(BATCHES):
        store.append(
            "tasks",
            [
                {
                    "task_id": f"w{w}-b{b}-{i}",
                    "source": "s3test",
                    "domain": "math",
                    "prompt": f"writer {w} batch {b} row {i}",
                    "answer": str(i),
                }
                for i in range(ROWS)
            ],
        )


@pytest.mark.slow  # subprocesses: 10-30 s on a loaded 2-core machine
def test_four_processes_append_to_one_s3_table(s3_server, s3_uri):
    open_store(s3_uri, storage_options=s3_server.options)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(s3_uri, s3_server.options, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    store = open_store(s3_uri, storage_options=s3_server.options)
    n = WRITERS * BATCHES * ROWS
    assert store.sql("SELECT count(*), count(DISTINCT task_id) FROM tasks").fetchall() == [(n, n)]
    # the log: versions 0 (create) .. 20, each a commit file holding one WRITE of one batch
    assert store.version("tasks") == WRITERS * BATCHES
    bucket, prefix = s3_uri.removeprefix("s3://").split("/", 1)
    c = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key=SECRET,
    )
    ops, added = [], 0
    for v in range(WRITERS * BATCHES + 1):
        body = c.get_object(Bucket=bucket, Key=f"{prefix}/tasks/_delta_log/{v:020d}.json")["Body"].read()
        actions = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        ops += [a["commitInfo"]["operation"] for a in actions if "commitInfo" in a]
        added += sum(1 for a in actions if "add" in a)
    assert ops == ["CREATE TABLE"] + ["WRITE"] * (WRITERS * BATCHES)
    assert added == len(store.table("tasks").file_uris()) == WRITERS * BATCHES
