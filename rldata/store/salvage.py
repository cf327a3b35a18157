"""Salvage rows that a damaged commit or a killed write left outside a table's log (``rldata doctor``).

- :func:`salvage_commit` rebuilds a commit file that was cut short or garbled.  Every complete line
  is kept; a broken line still gives the path of its ``add`` or ``remove`` when the path's closing
  quote survives.  An add is kept (or rebuilt from its file) when its data file is intact: present,
  a readable Parquet footer, and the row count (and size) its commit recorded.  The removes are
  applied only when every add of the commit was recovered (the commit's ``commitInfo`` counts them):
  a remove without its add would hide rows, so without them the retired rows read again (and may
  repeat a key, which ``doctor``'s duplicates check finds).  Removes cut off before their path are
  inferred from the keys: the files live before the commit whose every key the commit's adds hold
  again, when exactly as many as the commit says it removed.
- :func:`classify` tells, for a data file no commit references, whether its rows are superseded (the
  table holds every key of it: a retried or killed write whose rows landed since), whether it holds
  rows the table lacks (the only copy: never moved), or whether it is no readable Parquet at all.

Files are reached through a small accessor (:class:`LocalFiles`; on object storage
``rldata.doctor.remote.RemoteFiles``) so the same rules hold for both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

__all__ = ["LocalFiles", "Salvage", "classify", "file_rows", "live_paths", "salvage_commit"]

# the path of an add or remove action whose line was cut or garbled after it (the path's own
# closing quote must survive: a path cut in the middle names no file)
_ACTION_PATH = re.compile(rb'\{\s*"(add|remove)"\s*:\s*\{\s*"path"\s*:\s*"((?:[^"\\]|\\.)*)"')
_SIZE = re.compile(rb'"size"\s*:\s*(\d+)\s*[,}]')
_ROWS = re.compile(rb'numRecords\\?"\s*:\s*(\d+)\s*[,}]')


class LocalFiles:
    """A local table directory's data files, as :func:`salvage_commit` and :func:`classify` read them."""

    def __init__(self, table_dir: Path):
        self.table_dir = Path(table_dir)

    def size(self, rel: str) -> int | None:
        try:
            return (self.table_dir / rel).stat().st_size
        except OSError:
            return None

    def open(self, rel: str):
        return open(self.table_dir / rel, "rb")

    def live_before(self, version: int) -> list[str]:
        """The data files (paths relative to the table) of version ``version - 1``."""
        from deltalake import DeltaTable

        return live_paths(DeltaTable(str(self.table_dir), version=version - 1))


def live_paths(dtable) -> list[str]:
    """The data files of a DeltaTable's loaded version, as paths relative to the table."""
    import pyarrow as pa

    return [unquote(p) for p in pa.table(dtable.get_add_actions(flatten=False)).column("path").to_pylist()]


def file_rows(files, rel: str, *, columns: Sequence[str] | None = None):
    """(row count, None) of a readable Parquet data file, or (None, why not); with ``columns``, the
    rows of those columns as an Arrow table in place of the count (None where a column is missing)."""
    import pyarrow.parquet as pq

    try:
        with files.open(rel) as f:
            pf = pq.ParquetFile(f)
            if columns is None:
                return pf.metadata.num_rows, None
            names = set(pf.schema_arrow.names)
            if not set(columns) <= names:
                return None, "does not hold the table's key columns"
            return pf.read(columns=list(columns)), None
    except FileNotFoundError:
        return None, "is missing"
    except OSError as e:
        return None, f"cannot be read ({e.strerror or e})"
    except Exception as e:  # noqa: BLE001 - pyarrow's errors for a corrupt file vary by kind of damage
        return None, f"is not readable Parquet ({str(e).splitlines()[0][:100]})"


@dataclass
class Salvage:
    """A rebuilt commit: its actions (without commitInfo), what the repair says, and the data files of
    adds that could not be recovered (they stay where they are: they may hold the only copy of rows)."""

    keep: list[dict] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    rows: int = 0  # rows of the recovered adds


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _remove(path: str) -> dict:
    return {
        "remove": {"path": path, "dataChange": True, "partitionValues": {}, "deletionTimestamp": _now_ms()}
    }


def _add_of(path: str, size: int, rows: int) -> dict:
    """An add action rebuilt from a cut line's path and its intact file (no column statistics: a
    reader cannot skip the file, which is always correct)."""
    return {
        "add": {
            "path": path,
            "partitionValues": {},
            "size": size,
            "modificationTime": _now_ms(),
            "dataChange": True,
            "stats": json.dumps({"numRecords": rows}),
        }
    }


def _intact(files, add: dict, line: bytes | None) -> tuple[int | None, str | None]:
    """(rows, None) when the add's file is intact, else (None, why)."""
    rel = unquote(add["path"])
    want_size, want_rows = add.get("size"), None
    stats = add.get("stats")
    if isinstance(stats, str):
        try:
            want_rows = json.loads(stats).get("numRecords")
        except (ValueError, AttributeError):
            want_rows = None
    if line is not None:  # a cut line: what survived of its size and row count
        m, r = _SIZE.search(line), _ROWS.search(line)
        want_size = int(m.group(1)) if m else None
        want_rows = int(r.group(1)) if r else None
    have = files.size(rel)
    if have is None:
        return None, "is missing"
    if want_size is not None and have != want_size:
        return None, f"is {have} bytes where its commit recorded {want_size}"
    rows, why = file_rows(files, rel)
    if why:
        return None, why
    if want_rows is not None and rows != want_rows:
        return None, f"holds {rows} rows where its commit recorded {want_rows}"
    return rows, None


def _metric(metrics: dict, what: str) -> int | None:
    """The commit's own count of the files it added or removed, as deltalake's operations name it
    (a write, a merge, a delete, an optimize)."""
    verb = what.capitalize()
    for name in (f"num_{what}_files", f"num_target_files_{what}", f"numTargetFiles{verb}", f"numFiles{verb}"):
        if isinstance(metrics.get(name), int):
            return metrics[name]
    return None


def salvage_commit(data: bytes, files, *, version: int, key: Sequence[str]) -> Salvage:
    """What can be trusted of a damaged commit file's bytes (see the module docstring)."""
    out = Salvage()
    others, adds, removes, info, broken = [], [], [], None, 0
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError:
            action = None
        if isinstance(action, dict) and len(action) == 1 and isinstance(next(iter(action.values())), dict):
            kind, body = next(iter(action.items()))
            if kind == "commitInfo":
                info = body
            elif kind == "add" and isinstance(body.get("path"), str):
                adds.append((body, None))
            elif kind == "remove" and isinstance(body.get("path"), str):
                removes.append(action)
            else:
                others.append(action)
            continue
        m = _ACTION_PATH.search(line)
        if m is None:
            broken += 1
            continue
        try:
            path = json.loads(b'"' + m.group(2) + b'"')
        except ValueError:
            broken += 1
            continue
        if m.group(1) == b"add":
            adds.append(({"path": path}, line))
        else:
            removes.append(_remove(path))
    metrics = (info or {}).get("operationMetrics") or {}
    want_adds = _metric(metrics, "added")
    want_removes = _metric(metrics, "removed")

    recovered, failed = [], []
    for body, line in adds:
        rows, why = _intact(files, body, line)
        if why:
            failed.append(f"{unquote(body['path'])} {why}")
            out.lost.append(unquote(body["path"]))
            continue
        out.rows += rows
        size = files.size(unquote(body["path"]))
        recovered.append({"add": body} if line is None else _add_of(body["path"], size, rows))
    cut = (want_adds - len(adds)) if want_adds is not None and want_adds > len(adds) else 0
    every_add = want_adds is not None and len(recovered) == want_adds
    out.said.append(
        f"recovered {len(recovered)} add(s) ({out.rows} row(s))"
        + (f" of the {want_adds} the commit made" if want_adds is not None else "")
    )
    if failed:
        out.said.append("could not recover " + "; ".join(failed[:3]) + (" ..." if len(failed) > 3 else ""))
    if cut:
        out.said.append(f"could not recover {cut} add(s) cut off before their path")
    if info is None:
        out.said.append(
            "the commit's own count of its actions was lost (an add cut off before its path cannot be told)"
        )
    if removes or want_removes:
        if every_add:
            missing = (want_removes or 0) - len(removes)
            inferred = _infer_removes(files, version, key, recovered, removes, missing) if missing > 0 else []
            removes += inferred
            out.said.append(
                f"applied {len(removes)} remove(s)"
                + (f" ({len(inferred)} inferred from the keys)" if inferred else "")
            )
            if missing > len(inferred):
                out.said.append(
                    f"{missing - len(inferred)} remove(s) were lost: the rows they retired read again (see duplicates)"
                )
        else:
            out.said.append(
                f"did not apply its {max(len(removes), want_removes or 0)} remove(s): not every add was "
                "recovered, and a remove without its add would hide rows (retired rows read again; see duplicates)"
            )
            removes = []
    if broken:
        out.said.append(f"{broken} unreadable line(s) dropped")
    out.keep = [*others, *recovered, *removes]
    return out


def _infer_removes(
    files, version: int, key, recovered: list[dict], removes: list[dict], missing: int
) -> list[dict]:
    """Removes cut off before their path: the files live before the commit whose every key its adds hold
    again (a merge rewrites a touched file whole), when exactly ``missing`` such files are found."""
    import polars as pl

    if version < 1 or not key:
        return []
    try:
        live = files.live_before(version)
        new = [file_rows(files, unquote(a["add"]["path"]), columns=key)[0] for a in recovered]
    except Exception:  # noqa: BLE001 - no earlier version to read: nothing is inferred
        return []
    if not new or any(t is None for t in new):
        return []
    held = pl.concat([pl.from_arrow(t) for t in new]).unique()
    gone = {unquote(r["remove"]["path"]) for r in removes}
    found = []
    for rel in live:
        if rel in gone:
            continue
        keys, _ = file_rows(files, rel, columns=key)
        if keys is not None and pl.from_arrow(keys).join(held, on=list(key), how="anti").height == 0:
            found.append(rel)
    if len(found) != missing:
        return []
    return [_remove(rel) for rel in found]


def classify(files, rel: str, key: Sequence[str], table_keys) -> tuple[str, int, int]:
    """(kind, rows, rows the table lacks) of a data file no commit references.  ``table_keys``: a Polars
    frame of the table's key columns.  kind: ``superseded`` (every key is in the table), ``only_copy``
    (some rows are nowhere else: never move it), ``unreadable`` (no readable Parquet: a write killed
    before the file was complete), ``foreign`` (Parquet without the table's key columns)."""
    import polars as pl

    keys, why = file_rows(files, rel, columns=key)
    if keys is None:
        return ("foreign" if why and "key columns" in why else "unreadable"), 0, 0
    frame = pl.from_arrow(keys)
    lacking = frame.join(table_keys, on=list(key), how="anti").height
    return ("only_copy" if lacking else "superseded"), frame.height, lacking
