"""A real S3-API server (moto in server mode) on 127.0.0.1, started once per test session.

moto honours ``If-None-Match: *`` on PutObject (checked by test_s3_store.py), which is what delta-rs
1.x relies on for concurrent commits to S3.  But moto checks "is the key absent?" and then writes, in
two steps, on a threaded server: two simultaneous commits of one version could both pass the check.
S3 makes the check and the write one atomic step, so the fixture does the same for moto by holding one
lock around each conditional PutObject (all other requests run concurrently, as before).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from s3_helpers import S3, options_for


@pytest.fixture(scope="session")
def s3_server():
    """The server runs in its own process (moto_server.py says why); stopped when the session ends."""
    here = Path(__file__).parent
    proc = subprocess.Popen(
        [sys.executable, str(here / "moto_server.py")],
        cwd=here,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.isdigit(), f"moto server did not start (exit {proc.poll()})"
        endpoint = f"http://127.0.0.1:{line}"
        yield S3(endpoint=endpoint, options=options_for(endpoint))
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def s3_uri(s3_server):
    """``s3://<fresh bucket>/store``."""
    return f"s3://{s3_server.bucket()}/store"


@pytest.fixture
def s3_store(s3_server, s3_uri):
    from rldata import open_store

    return open_store(s3_uri, storage_options=s3_server.options)
