"""Faults mid-commit, injected by a loopback proxy in front of the S3 server: a retry or a clear error,
never a half-written table."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from s3_helpers import options_for
from s3_proxy import FaultProxy
from test_s3_store import _tasks

from rldata import open_store

FAST_RETRY = {"max_retries": "2", "retry_timeout": "10s"}  # bounded: a dead server fails in seconds


def _is_commit(method: str, path: str) -> bool:
    return method == "PUT" and "/_delta_log/" in path and path.split("?")[0].endswith(".json")


def _first_commits(action, n: int = 1):
    """A rule that answers the first ``n`` commit PUTs with ``action``, then forwards everything."""
    seen = {"n": 0}

    def rule(method, path, headers):
        if _is_commit(method, path):
            seen["n"] += 1
            if seen["n"] <= n:
                return action
        return None

    return rule


@pytest.mark.parametrize("action", [503, "cut", "cut_after"], ids=["503", "cut-before", "cut-after-commit"])
@pytest.mark.parametrize("dedupe", [False, True], ids=["append", "dedupe"])
def test_a_transient_fault_mid_commit_is_retried_and_rows_land_once(s3_server, s3_uri, action, dedupe):
    open_store(s3_uri, storage_options=s3_server.options)  # the tables exist before the faults start
    with FaultProxy(s3_server.endpoint, _first_commits(action)) as proxy:
        store = open_store(s3_uri, storage_options={**options_for(proxy.endpoint), **FAST_RETRY})
        store.append("tasks", _tasks(10), dedupe=dedupe)
        assert proxy.faults == 1
    store = open_store(s3_uri, storage_options=s3_server.options)
    assert store.sql("SELECT count(*), count(DISTINCT task_id) FROM tasks").fetchall() == [(10, 10)]
    assert store.append("tasks", _tasks(10), dedupe=True) == 0


@pytest.mark.slow  # subprocesses: 10-30 s on a loaded 2-core machine
def test_a_server_that_refuses_every_commit_gives_a_clear_error_and_no_partial_table(s3_server, s3_uri):
    store = open_store(s3_uri, storage_options=s3_server.options)
    store.append("tasks", _tasks(5))
    before = store.versions()
    with FaultProxy(s3_server.endpoint, lambda m, p, h: 500 if _is_commit(m, p) else None) as proxy:
        broken = open_store(s3_uri, storage_options={**options_for(proxy.endpoint), **FAST_RETRY})
        t0 = time.monotonic()
        with pytest.raises(OSError, match="_delta_log"):
            broken.append("tasks", _tasks(50, start=5))
        with pytest.raises(OSError, match="_delta_log"):
            broken.append("tasks", _tasks(50, start=5), dedupe=True)
        assert time.monotonic() - t0 < 60
        # the CLI: one line naming the failed request, non-zero exit
        opts = [
            a
            for k, v in {**options_for(proxy.endpoint), **FAST_RETRY}.items()
            for a in ("--storage-option", f"{k}={v}")
        ]
        from rldata.ingest import sample_path

        p = subprocess.run(
            [sys.executable, "-m", "rldata", "--store", s3_uri, *opts, "ingest", str(sample_path("arith"))],
            capture_output=True,
            text=True,
            check=False,
            env=s3_server.env(),
            timeout=300,
        )
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("rldata: error:")]
    assert p.returncode != 0 and len(err) == 1, p.stderr[-2000:]
    assert "Error performing PUT" in err[0] and "_delta_log" in err[0], err
    store = open_store(s3_uri, storage_options=s3_server.options)
    assert store.versions() == before
    assert store.sql("SELECT count(*) FROM tasks").fetchall() == [(5,)]
    assert store.append("tasks", _tasks(50, start=5)) == 50  # and the table takes the next write
