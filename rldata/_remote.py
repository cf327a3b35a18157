"""Stores on object storage (``s3://bucket/prefix``): storage options, secret redaction, pruned reads.

Settings come from ``--storage-option KEY=VALUE`` (delta-rs/object_store keys, e.g. ``AWS_ENDPOINT_URL``,
``AWS_ALLOW_HTTP``, ``AWS_REGION``) or from the standard ``AWS_*`` environment variables, which delta-rs
and Polars read by themselves.  Secret values are remembered here only so that error lines can be
redacted; they are never written to a table, a manifest or a log.

Remote SQL: DuckDB scans a pyarrow dataset built from the Delta version's file list over pyarrow's
native S3 filesystem, so a query fetches only the column chunks and row groups it needs, by HTTP range
requests, with nothing downloaded ahead.
"""

from __future__ import annotations

import os
import re
from typing import Any

from rldata.errors import RldataError

__all__ = ["arrow_s3_filesystem", "is_remote", "one_line", "parse_storage_options", "redact", "remote_dataset"]

# keys whose values are credentials (lower-cased, delta-rs accepts both spellings)
_SECRET_KEYS = {"aws_secret_access_key", "aws_session_token", "secret_access_key", "session_token",
                "aws_access_key_id", "access_key_id", "google_service_account_key", "azure_storage_account_key",
                "azure_storage_sas_key", "azure_client_secret", "account_key", "client_secret", "sas_token"}
_SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID")
_seen_secrets: set[str] = set()
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def is_remote(uri: str) -> bool:
    return "://" in uri and not uri.startswith("file://")


def parse_storage_options(pairs: list[str] | None) -> dict[str, str] | None:
    """``["KEY=VALUE", ...]`` -> dict (``None`` when empty); remembers secret values for :func:`redact`."""
    if not pairs:
        return None
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise RldataError(f"--storage-option expects KEY=VALUE, got {key.strip() or pair!r}")
        out[key.strip()] = value
        if key.strip().lower() in _SECRET_KEYS and value:
            _seen_secrets.add(value)
    return out


def _secrets() -> list[str]:
    vals = set(_seen_secrets) | {os.environ[k] for k in _SECRET_ENV if os.environ.get(k)}
    return sorted((v for v in vals if len(v) >= 4), key=len, reverse=True)  # 4+: never redact "a" everywhere


def redact(text: str) -> str:
    """``text`` with every known credential value replaced by ``***``."""
    for s in _secrets():
        text = text.replace(s, "***")
    return text


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
    """pyarrow's S3 filesystem configured like delta-rs would be (options first, then ``AWS_*``)."""
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
    key, secret = _option(opts, "aws_access_key_id", "access_key_id"), _option(
        opts, "aws_secret_access_key", "secret_access_key")
    if key and secret:
        kw.update(access_key=key, secret_key=secret, session_token=_option(opts, "aws_session_token", "session_token"))
    if (_option(opts, "aws_virtual_hosted_style_request", "virtual_hosted_style_request") or "").lower() != "true":
        kw["force_virtual_addressing"] = False
    # bounded: a dead endpoint must fail the query, not hang it
    kw.update(connect_timeout=10, request_timeout=60,
              retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=5))
    return fs.S3FileSystem(**kw)


def remote_dataset(files: list[str], schema, storage_options: dict[str, str] | None):
    """A pyarrow dataset over exactly ``files`` (``s3://`` URIs of one Delta version), or ``None`` when
    the files are not on S3 (other object stores use the Delta reader)."""
    if not files or not all(f.startswith(("s3://", "s3a://")) for f in files):
        return None
    import pyarrow.dataset as pads

    paths = [f.split("://", 1)[1] for f in files]
    return pads.dataset(paths, schema=schema, format="parquet", filesystem=arrow_s3_filesystem(storage_options))


def one_line(text: str) -> str:
    """delta-rs/object_store errors are a chain of lines ("Generic S3 error / ↳ Error performing PUT ...
    / ↳ Server returned non-2xx status code"): join the chain so a one-line error keeps its cause."""
    lines = [ln.strip().lstrip("↳").strip() for ln in _ANSI.sub("", text).strip().splitlines()]
    lines = [ln for ln in lines if ln]
    if len(lines) > 1 and any("↳" in ln for ln in text.splitlines()[1:]):
        return ": ".join(lines)
    return lines[0] if lines else ""


