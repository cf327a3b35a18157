"""A store on S3 (the loopback moto server): reads, SQL pushdown, compact, CLI options, credential hygiene."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import boto3
import polars as pl
import pytest
from s3_helpers import SECRET, options_for
from s3_proxy import FaultProxy

from rldata import open_store
from rldata._remote import parse_storage_options, redact
from rldata.errors import RldataError
from rldata.schemas import TABLES


def _tasks(n: int, start: int = 0, pad: int = 0) -> list[dict]:
    def noise(i):  # incompressible padding: a wide column that really is wide on the wire
        return (hashlib.sha256(str(i).encode()).hexdigest() * (pad // 64 + 1))[:pad]

    return [
        {
            "task_id": f"t{i:06d}",
            "source": "s3test",
            "domain": "math",
            "prompt": f"{i} + 1 = ?" + noise(i),
            "answer": str(i + 1),
        }
        for i in range(start, start + n)
    ]


def test_server_refuses_a_second_conditional_put(s3_server):
    """delta-rs's safe S3 commits need If-None-Match: * honoured; moto does."""
    c = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key=SECRET,
    )
    bucket = s3_server.bucket()
    c.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(c.exceptions.ClientError, match="PreconditionFailed"):
        c.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert c.get_object(Bucket=bucket, Key="k")["Body"].read() == b"1"


def test_commits_are_conditional_puts(s3_server, s3_uri):
    with FaultProxy(s3_server.endpoint) as proxy:
        store = open_store(s3_uri, storage_options=options_for(proxy.endpoint))
        store.append("tasks", _tasks(5))
    commits = [
        (p, h) for m, p, h in proxy.requests if m == "PUT" and "/_delta_log/" in p and p.endswith(".json")
    ]
    assert len(commits) == len(TABLES) + 1  # one creation per table + 1 append
    assert all({k.lower(): v for k, v in h.items()}.get("if-none-match") == "*" for _, h in commits)


def test_reads_sql_and_time_travel(s3_store):
    s3_store.append("tasks", _tasks(10))
    s3_store.append("tasks", _tasks(5, start=10))
    assert s3_store.sql("SELECT count(*), max(task_id) FROM tasks").fetchall() == [(15, "t000014")]
    assert s3_store.sql("SELECT count(*) FROM tasks", as_of=1).fetchall() == [(10,)]
    assert s3_store.read("tasks").height == 15 and s3_store.read("tasks", version=1).height == 10
    hit = s3_store.scan("tasks").filter(pl.col("answer") == "3").select("task_id").collect()
    assert hit["task_id"].to_list() == ["t000002"]
    assert s3_store.dataset("tasks").count_rows() == 15
    assert s3_store.append("tasks", _tasks(15), dedupe=True) == 0  # merges work remotely too
    assert s3_store.sql("SELECT count(*) FROM runs").fetchall() == [(0,)]  # an empty remote table


def test_given_options_beat_the_environment_in_every_reader(s3_server, s3_uri, monkeypatch):
    """--storage-option values win over AWS_* variables (here: a dead endpoint, wrong keys), for the Delta
    writer, DuckDB SQL and Polars' scan alike, and retry settings reach them all."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    store = open_store(
        s3_uri, storage_options={**s3_server.options, "max_retries": "2", "retry_timeout": "10s"}
    )
    store.append("tasks", _tasks(3))
    assert store.sql("SELECT count(*) FROM tasks").fetchall() == [(3,)]
    assert store.read("tasks").height == 3 and store.dataset("tasks").count_rows() == 3
    assert store.scan("tasks").filter(pl.col("answer") == "2").collect().height == 1
    with pytest.raises(Exception, match="max_retries"):  # delta-rs names the bad setting
        open_store(s3_uri, storage_options={**s3_server.options, "max_retries": "many"})


def test_remote_sql_fetches_only_the_needed_columns_and_row_groups(s3_server, s3_uri):
    store = open_store(s3_uri, storage_options=s3_server.options)
    # a wide prompt column; files big enough that pyarrow's 64 KiB footer read is not most of the traffic
    store.append("tasks", _tasks(6000, pad=600))
    store.append("tasks", _tasks(6000, start=6000, pad=600))
    files = store.table("tasks").file_uris()
    c = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key=SECRET,
    )
    total = sum(c.head_object(Bucket=f.split("/")[2], Key=f.split("/", 3)[3])["ContentLength"] for f in files)
    with FaultProxy(s3_server.endpoint) as proxy:
        remote = open_store(s3_uri, storage_options=options_for(proxy.endpoint))
        before = proxy.parquet_bytes
        assert remote.sql("SELECT count(DISTINCT answer) FROM tasks").fetchall() == [(12000,)]
        one_column = proxy.parquet_bytes - before
        before = proxy.parquet_bytes
        q = "SELECT count(*) FROM tasks WHERE task_id >= 't009000'"
        assert remote.sql(q).fetchall() == [(3000,)]
        filtered = proxy.parquet_bytes - before
        before = proxy.parquet_bytes
        assert remote.sql("SELECT sum(length(prompt)) FROM tasks").fetchall()[0][0] > 12000 * 600
        wide = proxy.parquet_bytes - before
    # the answer column is a small part of the files; the wide prompt column is most of them
    assert one_column < 0.2 * total < wide, (one_column, wide, total)
    assert filtered < 0.2 * total, (filtered, total)  # the first file's row group is skipped on its stats


def test_compact_keeps_what_retained_versions_need(s3_store):
    for i in range(4):
        s3_store.append("tasks", _tasks(10, start=10 * i))
    s3_store.delete("tasks", "task_id < 't000005'")
    old = s3_store.version("tasks") - 2
    want = s3_store.read("tasks", version=old).sort("task_id")
    stats = s3_store.compact()  # default retention: a week
    assert stats["tasks"]["files_removed"] >= 4 and stats["tasks"]["files_vacuumed"] == 0
    assert len(s3_store.table("tasks").file_uris()) == 1
    assert s3_store.read("tasks", version=old).sort("task_id").equals(want)
    assert s3_store.sql("SELECT count(*) FROM tasks", as_of=old).fetchall() == [(want.height,)]
    assert s3_store.count("tasks") == 35
    # with no retention the old files go, and the old version then fails loudly rather than reading short
    s3_store.compact(retention_hours=0)
    assert s3_store.count("tasks") == 35
    with pytest.raises(Exception):  # noqa: B017 - delta-rs/pyarrow raise their own not-found errors
        s3_store.sql("SELECT count(*) FROM tasks", as_of=old).fetchall()


def test_storage_option_parsing():
    assert parse_storage_options(None) is None
    assert parse_storage_options(["AWS_REGION=eu-west-1", "X=a=b"]) == {"AWS_REGION": "eu-west-1", "X": "a=b"}
    with pytest.raises(RldataError, match="KEY=VALUE"):
        parse_storage_options(["AWS_REGION"])
    parse_storage_options(["AWS_SECRET_ACCESS_KEY=hunter2-secret"])
    assert redact("failed with hunter2-secret in it") == "failed with *** in it"


def _cli(s3_server, *args, env_creds: bool):
    """Run ``rldata`` in a subprocess, credentials given as --storage-option or as AWS_* variables."""
    opts = (
        []
        if env_creds
        else [a for k, v in s3_server.options.items() for a in ("--storage-option", f"{k}={v}")]
    )
    env = s3_server.env() if env_creds else {**s3_server.env(), **{k: "" for k in s3_server.options}}
    return subprocess.run(
        [sys.executable, "-m", "rldata", *opts, *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,
    )


@pytest.mark.slow  # subprocesses: 10-30 s on a loaded 2-core machine
def test_cli_on_s3_never_stores_or_prints_the_secret(s3_server, s3_uri, tmp_path):
    from rldata.ingest import sample_path

    outs = []
    for env_creds in (False, True):
        for args in (
            ["--store", s3_uri, "ingest", str(sample_path("arith"))],
            ["--store", s3_uri, "tables", "--format", "json"],
            ["--store", s3_uri, "sql", "SELECT count(*) AS n FROM tasks", "--format", "csv"],
            ["--store", s3_uri, "compact"],
            ["--store", "s3://no-such-bucket-x/store", "--debug", "sql", "SELECT 1"],
        ):
            p = _cli(s3_server, *args, env_creds=env_creds)
            outs.append((args, p))
    for args, p in outs[:4] + outs[5:9]:
        assert p.returncode == 0, (args, p.stderr[-2000:])
    assert outs[4][1].returncode != 0 and outs[9][1].returncode != 0  # a missing bucket (with a traceback)
    assert outs[2][1].stdout.splitlines()[1] == outs[7][1].stdout.splitlines()[1] != "0"
    for args, p in outs:
        assert SECRET not in p.stdout and SECRET not in p.stderr, args
    # --store via RLDATA_STORE works the same
    p = subprocess.run(
        [sys.executable, "-m", "rldata", "sql", "SELECT count(*) FROM runs", "--format", "csv"],
        capture_output=True,
        text=True,
        check=False,
        env=s3_server.env(RLDATA_STORE=s3_uri),
        timeout=300,
    )
    assert p.returncode == 0 and p.stdout.splitlines()[1] == "2", p.stderr[-2000:]
    store = open_store(s3_uri, storage_options=s3_server.options)
    # an export's files and manifest (rldata-manifest.json) hold no secret either
    ids = [r[0] for r in store.sql("SELECT task_id FROM tasks ORDER BY task_id LIMIT 5").fetchall()]
    store.append(
        "selections",
        [{"selection": "s3sel", "task_id": t, "decision": "keep", "reason": "in_band"} for t in ids],
    )
    p = _cli(
        s3_server,
        "--store",
        s3_uri,
        "export",
        "--selection",
        "s3sel",
        "--format",
        "verl",
        "--out",
        str(tmp_path / "exp"),
        env_creds=False,
    )
    assert p.returncode == 0 and SECRET not in p.stdout + p.stderr, p.stderr[-2000:]
    written = [f for f in (tmp_path / "exp").rglob("*") if f.is_file()]
    assert any(f.name == "rldata-manifest.json" for f in written)
    assert all(SECRET.encode() not in f.read_bytes() for f in written)
    from rldata.schemas import TABLES

    scanned = 0
    for name in TABLES:
        for row in store.read(name).iter_rows():
            scanned += 1
            assert all(SECRET not in str(v) for v in row), name
    assert scanned > 0


def test_a_mistyped_prefix_is_refused_not_created(s3_server, s3_store, s3_uri, capsys):
    from rldata.cli import main
    from rldata.errors import ConfigError

    typo = s3_uri + "x"  # s3://bucket/storex: the bucket exists, the prefix holds nothing
    opts = [f"--storage-option={k}={v}" for k, v in s3_server.options.items()]
    for cmd in (["tables"], ["sql", "SELECT count(*) FROM tasks"], ["runs"]):
        code = main([*opts, "--store", typo, *cmd])
        out, err = capsys.readouterr()
        assert code == 1 and out == "" and err.count("\n") == 1, (cmd, err)
        assert f"--store: no store at {typo}: it holds none of its tables" in err and SECRET not in err
    bucket, prefix = typo.removeprefix("s3://").split("/", 1)
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key=SECRET,
    )
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
    assert listed.get("KeyCount", 0) == 0  # nothing was created there
    with pytest.raises(ConfigError):
        open_store(typo, storage_options=s3_server.options, create=False)
    # the real store opens for reading, and a writing command still creates a new one
    assert open_store(s3_uri, storage_options=s3_server.options, create=False).count("tasks") == 0
    assert main([*opts, "--store", typo + "-new", "ingest", "--sample", "arith"]) == 0
    capsys.readouterr()
