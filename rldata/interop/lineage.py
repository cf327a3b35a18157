"""Export manifests: what an exported dataset was made from, and whether it changed since.

Every export writes ``rldata-manifest.json`` next to its files.  It records the store versions the
export read, the selection and its filter parameters, row counts, one SHA-256 per file and a
``content_hash`` over the exported rows.  A trainer keeps ``content_hash`` with its checkpoint and,
on resume, compares it with :func:`dataset_hash` of the path it is given: a re-export of a changed
selection, or a file edited by hand, shows up as a different hash (or as a :func:`verify` problem).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from rldata.errors import RldataError

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "dataset_changed",
    "dataset_hash",
    "file_sha256",
    "find_manifest",
    "read_manifest",
    "rows_hash",
    "verify",
    "write_manifest",
]

MANIFEST_NAME = "rldata-manifest.json"
MANIFEST_VERSION = 1
_CHUNK = 1 << 20


def rows_hash(table: pa.Table) -> str:
    """SHA-256 over the rows of ``table`` in order: one SHA-256 of each row's JSON, joined by newlines.

    The hash depends on the exported values only (not on Parquet or Arrow file encodings), so two
    exports of the same data in the same format hash the same whenever they are made.  DuckDB
    renders and hashes the rows (a Python loop over ``json.dumps`` took 60 µs a row).
    """
    import duckdb

    con = duckdb.connect()
    try:
        con.register("__rows", table)
        # __row names the whole row (a struct, fields in schema order) unless a column shadows it
        hashes = con.sql("SELECT sha256(to_json(__row)::VARCHAR) AS h FROM __rows AS __row").to_arrow_table()
    finally:
        con.close()
    h = hashlib.sha256()
    for v in hashes.column("h").to_pylist():
        h.update(v.encode())
        h.update(b"\n")
    return f"sha256:{h.hexdigest()}"


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def find_manifest(path: str | Path) -> Path:
    """The manifest for ``path``: the export directory, the manifest itself, or a file inside the export."""
    p = Path(path)
    if not p.exists():
        raise RldataError(f"{p}: no such file or directory")
    if p.is_file() and p.name == MANIFEST_NAME:
        return p
    start = p if p.is_dir() else p.parent
    for d in (start, *list(start.parents)[:2]):  # hf exports keep shards two levels down (data/, dataset/)
        if (d / MANIFEST_NAME).is_file():
            return d / MANIFEST_NAME
    raise RldataError(f"{p}: no {MANIFEST_NAME} found (was it written by `rldata export`?)")


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of the export at ``path`` (see :func:`find_manifest`), as a dict."""
    mpath = find_manifest(path)
    try:
        manifest = json.loads(mpath.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise RldataError(f"{mpath}: not a readable manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != "rldata-export":
        raise RldataError(f"{mpath}: not an rldata export manifest")
    if int(manifest.get("manifest_version", 0)) > MANIFEST_VERSION:
        raise RldataError(
            f"{mpath}: manifest version {manifest['manifest_version']} is newer than this rldata's"
        )
    return manifest


def write_manifest(out_dir: str | Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest`` as ``out_dir/rldata-manifest.json`` (stable key order, readable)."""
    path = Path(out_dir) / MANIFEST_NAME
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n")
    return path


def verify(path: str | Path) -> list[str]:
    """Check every file the manifest lists against its recorded size and SHA-256; return the problems."""
    mpath = find_manifest(path)
    manifest = read_manifest(mpath)
    problems = []
    for entry in manifest.get("files", []):
        f = mpath.parent / entry["path"]
        if not f.is_file():
            problems.append(f"{entry['path']}: missing")
        elif f.stat().st_size != entry.get("bytes") or file_sha256(f) != entry.get("sha256"):
            problems.append(f"{entry['path']}: modified since export (sha256 differs)")
    return problems


def dataset_hash(path: str | Path) -> str:
    """The content hash recorded for the export at ``path``; raises if its files no longer match it."""
    problems = verify(path)
    if problems:
        raise RldataError(f"{find_manifest(path).parent}: export changed after it was written: {problems[0]}")
    return read_manifest(path)["content_hash"]


def dataset_changed(path: str | Path, expected_hash: str) -> bool:
    """True when the export at ``path`` is not the dataset ``expected_hash`` names (for trainer resumes)."""
    try:
        return dataset_hash(path) != expected_hash
    except RldataError:
        return True
