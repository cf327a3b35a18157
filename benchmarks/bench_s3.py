"""A store on S3 (a moto server on 127.0.0.1) side by side with a local-directory store, in one run.

    python benchmarks/bench_s3.py [--ingest-rows 1000000] [--sql-rows 2000000] [--repeat 2]

1. ingest: ``rldata.ingest.ingest`` of bench_ingest.py's synthetic tasks (Parquet) into a fresh store.
2. SQL: bench_sql.py's GROUP BY through ``Store.sql`` over ``--sql-rows`` trajectories (written with
   bench_sql.py's batches, 1M rows a commit); for the S3 store also through the previous remote path
   (DuckDB scanning delta-rs's own pyarrow dataset) and the bytes each path fetches from the server.
3. a sample-job commit batch: what ``rldata sample``'s driver commits per batch of 128 tasks x 16
   samples (append trajectories, append verifications, upsert the batch's ledger rows).

The S3 server runs in its own process (``python -m moto.server``), so its Python request handling does
not share the benchmark's interpreter.  Best of ``--repeat`` for the SQL and commit timings.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ingest import WORK, make_input, timed  # reuse the ingest and SQL benchmarks' inputs and query
from bench_sql import BATCH, QUERIES, _batch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "s3"))
from s3_proxy import FaultProxy

SECRET = "bench-secret"


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):  # bounded wait for the port
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("moto server did not start")
    return proc, f"http://127.0.0.1:{port}"


def s3_options(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }


def new_stores(endpoint: str, tag: str):
    import shutil

    import boto3

    from rldata import open_store

    bucket = f"bench-{tag}-{uuid.uuid4().hex[:8]}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key=SECRET,
    ).create_bucket(Bucket=bucket)
    root = WORK / f"bench-s3-local-{tag}"
    shutil.rmtree(root, ignore_errors=True)
    return {
        "local": open_store(root),
        "s3": open_store(f"s3://{bucket}/store", storage_options=s3_options(endpoint)),
    }


def bench_ingest(endpoint: str, rows: int) -> None:
    from rldata.ingest import ingest

    _, parquet = make_input(rows)
    for kind, store in new_stores(endpoint, "ingest").items():
        wall, cpu, summary = timed(lambda s=store: ingest(s, parquet, record_run=False))
        print(
            f"ingest {rows:,} tasks  {kind:5s} {wall:7.2f} s (cpu {cpu:6.2f})  {summary.added / wall:10,.0f} rows/s"
            f"  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )


def bench_sql(endpoint: str, rows: int, repeat: int) -> None:
    from rldata import open_store

    stores = new_stores(endpoint, "sql")
    t0 = time.perf_counter()
    for start in range(0, rows, BATCH):
        trajectories, _ = _batch(start, min(BATCH, rows - start))
        for store in stores.values():
            store.append("trajectories", trajectories)
    print(f"generated {rows:,} trajectories in both stores ({time.perf_counter() - t0:.0f} s)", flush=True)
    q = QUERIES["group_by"]
    best = min(timed(lambda: stores["local"].sql(q).to_arrow_table())[0] for _ in range(repeat))
    print(
        f"GROUP BY {rows:,} rows  local via Store.sql (DuckDB read_parquet)   {best:7.2f} s  load "
        f"{os.getloadavg()[0]:.1f}",
        flush=True,
    )
    s3 = stores["s3"]
    size = sum(f.size for f in _s3_files(s3))
    import duckdb

    def pyarrow_s3(store):  # the candidate: pyarrow's own S3 client over the version's file list
        from rldata.schemas import get as table_schema

        con = duckdb.connect()
        con.register(
            "trajectories",
            remote_dataset(
                store.table("trajectories").file_uris(),
                table_schema("trajectories").schema,
                store.storage_options,
            ),
        )
        return con.sql(q).to_arrow_table()

    paths = {
        "Store.sql (delta-rs dataset)": lambda st: st.sql(q).to_arrow_table(),
        "pyarrow S3FileSystem dataset": pyarrow_s3,
    }
    for name, fn in paths.items():
        best = min(timed(lambda f=fn: f(s3))[0] for _ in range(repeat))
        with FaultProxy(endpoint) as proxy:  # bytes counted at a loopback proxy, in a separate run
            fn(open_store(s3.root, storage_options=s3_options(proxy.endpoint)))
        print(
            f"GROUP BY {rows:,} rows  s3    via {name:29s} {best:7.2f} s  fetched {proxy.parquet_bytes / 2**20:7.1f}"
            f" MiB of {size / 2**20:.1f} MiB of Parquet  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )


def _s3_files(store):
    fs = arrow_s3_filesystem(store.storage_options)
    return fs.get_file_info([f.split("://", 1)[1] for f in store.table("trajectories").file_uris()])


def _option(opts: dict[str, str], *names: str) -> str | None:
    """The first of ``names`` set in ``opts`` (any case) or, failing that, in the environment."""
    lower = {k.lower(): v for k, v in opts.items()}
    for n in names:
        if n.lower() in lower:
            return lower[n.lower()]
    for n in names:
        if os.environ.get(n.upper()):
            return os.environ[n.upper()]
    return None


def arrow_s3_filesystem(storage_options: dict[str, str] | None):
    """pyarrow's S3 filesystem configured like delta-rs would be (options first, then ``AWS_*``): the
    candidate reader this benchmark compares with delta-rs's dataset."""
    from pyarrow import fs

    opts = storage_options or {}
    kw: dict[str, Any] = {}
    endpoint = _option(opts, "aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kw["endpoint_override"] = host.rstrip("/") if host else endpoint
        kw["scheme"] = scheme if host else "https"
    if (_option(opts, "aws_allow_http", "allow_http") or "").lower() == "true" and "scheme" not in kw:
        kw["scheme"] = "http"
    region = _option(opts, "aws_region", "region", "aws_default_region")
    if region:
        kw["region"] = region
    key, secret = (
        _option(opts, "aws_access_key_id", "access_key_id"),
        _option(opts, "aws_secret_access_key", "secret_access_key"),
    )
    if key and secret:
        kw.update(
            access_key=key,
            secret_key=secret,
            session_token=_option(opts, "aws_session_token", "session_token"),
        )
    if (
        _option(opts, "aws_virtual_hosted_style_request", "virtual_hosted_style_request") or ""
    ).lower() != "true":
        kw["force_virtual_addressing"] = False
    # bounded: a dead endpoint must fail the query, not hang it
    kw.update(
        connect_timeout=10, request_timeout=60, retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=5)
    )
    return fs.S3FileSystem(**kw)


def remote_dataset(files: list[str], schema, storage_options: dict[str, str] | None):
    """A pyarrow dataset over exactly ``files`` (``s3://`` URIs of one Delta version)."""
    import pyarrow.dataset as pads

    paths = [f.split("://", 1)[1] for f in files]
    return pads.dataset(
        paths, schema=schema, format="parquet", filesystem=arrow_s3_filesystem(storage_options)
    )


def bench_commit(endpoint: str, repeat: int, tasks: int = 128, n: int = 16) -> None:
    from rldata.ledger.core import rows_from_outcomes

    for kind, store in new_stores(endpoint, "commit").items():
        times = []
        for r in range(repeat + 1):  # the first batch also warms up; best of the rest
            trajectories, verifications = _batch(r * tasks * n, tasks * n)
            outcomes = [
                (t, "math@1", bool(p))
                for t, p in zip(
                    verifications.column("task_id").to_pylist(), verifications.column("passed").to_pylist()
                )
            ]

            def commit(s=store, t=trajectories, v=verifications, o=outcomes):
                s.append("trajectories", t)
                s.append("verifications", v)
                s.upsert("passrates", rows_from_outcomes(o, model="tiny", params_hash="p0", run_id="run0"))

            times.append(timed(commit)[0])
        print(
            f"commit batch ({tasks} tasks x {n})  {kind:5s} {min(times[1:]):7.2f} s  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ingest-rows", type=int, default=1_000_000)
    ap.add_argument("--sql-rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    proc, endpoint = start_server()
    try:
        print(
            f"machine: {os.cpu_count()} cores, load average {os.getloadavg()}; S3 = moto server on {endpoint}",
            flush=True,
        )
        bench_commit(endpoint, args.repeat)
        bench_sql(endpoint, args.sql_rows, args.repeat)
        bench_ingest(endpoint, args.ingest_rows)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
