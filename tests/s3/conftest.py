"""A real S3-API server (moto in server mode) on 127.0.0.1, started once per test session.

moto honours ``If-None-Match: *`` on PutObject (checked by test_s3_store.py), which is what delta-rs
1.x relies on for concurrent commits to S3.  But moto checks "is the key absent?" and then writes, in
two steps, on a threaded server: two simultaneous commits of one version could both pass the check.
S3 makes the check and the write one atomic step, so the fixture does the same for moto by holding one
lock around each conditional PutObject (all other requests run concurrently, as before).
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass, field

import pytest

SECRET = "s3cr3t-" + uuid.uuid4().hex  # a credential value no table, manifest or printed line may contain


@dataclass
class S3:
    endpoint: str
    options: dict[str, str] = field(default_factory=dict)

    def env(self, **extra) -> dict[str, str]:
        """The environment of a subprocess that reaches the server through the standard AWS variables."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        return {**base, **{k.upper(): v for k, v in self.options.items()}, "RAY_ADDRESS": "",
                "VLLM_ENABLE_V1_MULTIPROCESSING": "0", **extra}

    def bucket(self) -> str:
        """A new empty bucket (one per test keeps tests independent)."""
        import boto3

        name = "t-" + uuid.uuid4().hex[:16]
        boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key=SECRET).create_bucket(Bucket=name)
        return name


def options_for(endpoint: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": SECRET}


def _atomic_conditional_puts() -> None:
    import threading

    from moto.s3.responses import S3Response

    if getattr(S3Response.put_object, "_rldata_atomic", False):
        return
    lock, put = threading.Lock(), S3Response.put_object

    def put_object(self):
        if self.headers.get("If-None-Match") or self.headers.get("If-Match"):
            with lock:
                return put(self)
        return put(self)

    put_object._rldata_atomic = True
    S3Response.put_object = put_object


@pytest.fixture(scope="session")
def s3_server():
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    _atomic_conditional_puts()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    assert host == "127.0.0.1"
    endpoint = f"http://{host}:{port}"
    yield S3(endpoint=endpoint, options=options_for(endpoint))
    server.stop()


@pytest.fixture
def s3_uri(s3_server):
    """``s3://<fresh bucket>/store``."""
    return f"s3://{s3_server.bucket()}/store"


@pytest.fixture
def s3_store(s3_server, s3_uri):
    from rldata import open_store

    return open_store(s3_uri, storage_options=s3_server.options)
