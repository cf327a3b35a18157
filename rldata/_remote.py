"""Stores on object storage (``s3://bucket/prefix``): storage options and secret redaction.

Settings come from ``--storage-option KEY=VALUE`` (delta-rs/object_store keys, e.g. ``AWS_ENDPOINT_URL``,
``AWS_ALLOW_HTTP``, ``AWS_REGION``) or from the standard ``AWS_*`` environment variables, which delta-rs
and Polars read by themselves.  Secret values are remembered here only so that error lines can be
redacted; they are never written to a table, a manifest or a log.

Remote reads need nothing from here: ``Store.sql`` registers delta-rs's pyarrow dataset of the version's
files, and DuckDB pushes the query's columns and filters into it, so a query fetches only the column
chunks and row groups it needs by range requests (tests/s3/test_s3_store.py measures the bytes;
benchmarks/bench_s3.py compares it with pyarrow's own S3 reader, which was no faster).
"""

from __future__ import annotations

import os
import re

from rldata.errors import ConfigError

__all__ = ["one_line", "parse_storage_options", "polars_storage_options", "redact"]

# keys whose values are credentials (lower-cased, delta-rs accepts both spellings)
_SECRET_KEYS = {
    "aws_secret_access_key",
    "aws_session_token",
    "secret_access_key",
    "session_token",
    "aws_access_key_id",
    "access_key_id",
    "google_service_account_key",
    "azure_storage_account_key",
    "azure_storage_sas_key",
    "azure_client_secret",
    "account_key",
    "client_secret",
    "sas_token",
}
_SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID")
_seen_secrets: set[str] = set()
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_storage_options(pairs: list[str] | None) -> dict[str, str] | None:
    """``["KEY=VALUE", ...]`` -> dict (``None`` when empty); remembers secret values for :func:`redact`."""
    if not pairs:
        return None
    out: dict[str, str] = {}
    for i, pair in enumerate(pairs, 1):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():  # not echoed: a malformed option may hold a secret
            raise ConfigError(
                f"storage_options expects KEY=VALUE: option {i} has no key or no '='", field="storage_options"
            )
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


def one_line(text: str) -> str:
    """delta-rs/object_store errors are a chain of lines ("Generic S3 error / ↳ Error performing PUT ...
    / ↳ Server returned non-2xx status code"): join the chain so a one-line error keeps its cause."""
    lines = [ln.strip().lstrip("↳").strip() for ln in _ANSI.sub("", text).strip().splitlines()]
    lines = [ln for ln in lines if ln]
    if len(lines) > 1 and any("↳" in ln for ln in text.splitlines()[1:]):
        return ": ".join(lines)
    return lines[0] if lines else ""


def polars_storage_options(options: dict[str, str] | None) -> dict[str, object] | None:
    """``options`` as Polars' Delta scan takes them: Polars reads a few keys itself (``max_retries``,
    ``retry_timeout_ms``, ...) and refuses them as strings, while delta-rs wants every value a string."""
    if not options:
        return options
    from polars.io.cloud._utils import POLARS_STORAGE_CONFIG_KEYS

    out: dict[str, object] = {}
    for k, v in options.items():
        if k.lower() in POLARS_STORAGE_CONFIG_KEYS:
            try:
                out[k.lower()] = int(v)
            except ValueError:
                raise ConfigError(
                    f"storage_options {k} expects a whole number", field="storage_options"
                ) from None
        else:
            out[k] = v
    return out
