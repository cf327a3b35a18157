"""A real S3-API server (moto in server mode) on 127.0.0.1, started once per test session.

moto honours ``If-None-Match: *`` on PutObject (checked by test_s3_store.py), which is what delta-rs
1.x relies on for concurrent commits to S3.
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


@pytest.fixture(scope="session")
def s3_server():
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
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
