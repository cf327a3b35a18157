"""``doctor`` on a store in object storage (``s3://``): the same log and data-file checks and repairs
as on a local store, run on a local copy of a table's ``_delta_log``.

A table's log is copied down (every object under ``<table>/_delta_log/``), :mod:`rldata.store.damage`
finds and repairs its damage there exactly as it does locally, and the difference is applied back:
first every file the repair set aside is uploaded under the store's ``.rldata-doctor/<time>/``
prefix, then new or rebuilt commits are written, and only then are the replaced objects deleted,
so a repair interrupted half-way leaves the quarantined copy and never loses an object.  Object
storage has no rename: a move is a copy and a delete.

A commit the repair adds (data-file removal) is written only when that version does not exist yet;
object storage offers no atomic create here, so a writer committing at the same moment could still
race it: run ``doctor --repair`` while no job writes (as on a local store, it is an offline fix).
Data files are checked against the sizes their commits recorded (missing, overwritten); their
Parquet footers are not read on object storage.  Strays and old leftovers are moved aside the same
way (:func:`move_aside`).
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from rldata.errors import RldataError
from rldata.store.damage import QUARANTINE

__all__ = ["RemoteFiles", "mirrored_log", "move_aside", "object_sizes", "remote_fs"]


def remote_fs(store):
    """A pyarrow S3 filesystem from the store's deltalake options (or the ``AWS_*`` environment), and
    the store's root as ``bucket/prefix``."""
    import pyarrow.fs as pafs

    opts = {k.upper(): v for k, v in (store.storage_options or {}).items()}

    def get(k):
        return opts.get(k) or os.environ.get(k)

    endpoint = get("AWS_ENDPOINT_URL") or ""
    kwargs = {
        "access_key": get("AWS_ACCESS_KEY_ID"),
        "secret_key": get("AWS_SECRET_ACCESS_KEY"),
        "session_token": get("AWS_SESSION_TOKEN"),
        "region": get("AWS_REGION") or get("AWS_DEFAULT_REGION"),
    }
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs.update(endpoint_override=host, scheme=scheme)
    fs = pafs.S3FileSystem(**{k: v for k, v in kwargs.items() if v})
    return fs, store.root.split("://", 1)[1].rstrip("/")


def _files(fs, prefix: str) -> dict[str, int]:
    """{path relative to ``prefix``: size} of every object under it."""
    import pyarrow.fs as pafs

    infos = fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
    return {i.path[len(prefix) + 1 :]: i.size or 0 for i in infos if i.type == pafs.FileType.File}


def object_sizes(store, table: str) -> dict[str, int]:
    """{path relative to the table: size} of the table's objects (data files and log)."""
    fs, base = remote_fs(store)
    return _files(fs, f"{base}/{table}")


def _put(fs, path: str, data: bytes) -> None:
    with fs.open_output_stream(path) as f:
        f.write(data)


@contextmanager
def mirrored_log(store, table: str):
    """Yield ``(root, push)``: ``root`` a local directory holding ``<table>/_delta_log`` as the store
    has it; ``push()`` applies what changed there (and what was set aside under
    ``root/.rldata-doctor/``) back to the store, quarantine first, deletions last."""
    fs, base = remote_fs(store)
    log = f"{table}/_delta_log"
    with tempfile.TemporaryDirectory(prefix="rldata-doctor-") as tmp:
        root = Path(tmp)
        pulled: dict[str, bytes] = {}
        for rel in sorted(_files(fs, f"{base}/{log}")):
            with fs.open_input_stream(f"{base}/{log}/{rel}") as f:
                pulled[rel] = f.read()
            target = root / log / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(pulled[rel])
        (root / log).mkdir(parents=True, exist_ok=True)

        def push() -> None:
            aside = root / QUARANTINE
            for p in sorted(aside.rglob("*")) if aside.is_dir() else []:
                if p.is_file():
                    _put(fs, f"{base}/{p.relative_to(root).as_posix()}", p.read_bytes())
            now = {p.relative_to(root / log).as_posix(): p for p in (root / log).rglob("*") if p.is_file()}
            for rel, p in sorted(now.items()):
                data = p.read_bytes()
                if pulled.get(rel) == data:
                    continue
                if rel not in pulled and fs.get_file_info(f"{base}/{log}/{rel}").size is not None:
                    raise RldataError(
                        f"table {table!r}: {log}/{rel} appeared while doctor repaired the table (a writer is "
                        "running): nothing replaced; run doctor --repair again when no job writes"
                    )
                _put(fs, f"{base}/{log}/{rel}", data)
            for rel in sorted(set(pulled) - set(now)):
                fs.delete_file(f"{base}/{log}/{rel}")

        yield root, push


def move_aside(store, rels: list[str], dest_rel: str) -> int:
    """Copy each object ``rels`` (relative to the store root) under ``dest_rel`` (relative to the
    store root, the same relative path below it), then delete it; returns how many existed."""
    fs, base = remote_fs(store)
    moved = 0
    for rel in rels:
        src = f"{base}/{rel}"
        if fs.get_file_info(src).size is None:
            continue
        fs.copy_file(src, f"{base}/{dest_rel}/{rel}")
        fs.delete_file(src)
        moved += 1
    return moved


class RemoteFiles:
    """A table's data files in object storage, as :mod:`rldata.store.salvage` reads them."""

    def __init__(self, store, table: str):
        self.store, self.table = store, table
        self.fs, base = remote_fs(store)
        self.prefix = f"{base}/{table}"

    def size(self, rel: str) -> int | None:
        return self.fs.get_file_info(f"{self.prefix}/{rel}").size

    def open(self, rel: str):
        return self.fs.open_input_file(f"{self.prefix}/{rel}")

    def live_before(self, version: int) -> list[str]:
        from urllib.parse import unquote

        from deltalake import DeltaTable

        dt = DeltaTable(
            self.store.uri(self.table), version=version - 1, storage_options=self.store.storage_options
        )
        return [unquote(p) for p in dt.files()]
