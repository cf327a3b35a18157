"""What the S3 tests share: the server handle, its options, the secret no output may contain, and the
fix that makes moto's conditional PutObject atomic (see conftest.py).  A module of its own, not
conftest.py: several conftest modules exist in tests/, and only a unique name imports reliably."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

SECRET = "s3cr3t-" + uuid.uuid4().hex  # a credential value no table, manifest or printed line may contain


@dataclass
class S3:
    endpoint: str
    options: dict[str, str] = field(default_factory=dict)

    def env(self, **extra) -> dict[str, str]:
        """The environment of a subprocess that reaches the server through the standard AWS variables."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        return {
            **base,
            **{k.upper(): v for k, v in self.options.items()},
            "RAY_ADDRESS": "",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            **extra,
        }

    def bucket(self) -> str:
        """A new empty bucket (one per test keeps tests independent)."""
        import boto3

        name = "t-" + uuid.uuid4().hex[:16]
        boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key=SECRET,
        ).create_bucket(Bucket=name)
        return name


def options_for(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }


def atomic_conditional_puts() -> None:
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
