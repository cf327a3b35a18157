"""Store damage: find what makes a table unreadable, name the table and the file, repair it.

Each kind of damage is diagnosed from the files themselves (local stores), never from deltalake's
error text, which names no table and no file:

- ``last_checkpoint``: ``_delta_log/_last_checkpoint`` is not JSON, or points at a version whose
  checkpoint file is missing;
- ``checkpoint``: a ``*.checkpoint*.parquet`` file that is not readable Parquet (truncated, garbage);
- ``commit``: a commit file after the last checkpoint that is empty or not complete JSON lines;
- ``data_file``: a data file the current version needs that is missing, or whose size is not the
  size its commit recorded (truncated, overwritten).

The repairs (:func:`repair`) move every file they replace into a quarantine directory at the store
root (never delete), keep every commit that is still readable, and say what they moved.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rldata.errors import RldataError

__all__ = [
    "Damage",
    "commit_files",
    "damaged_commit",
    "data_file_damage",
    "log_damage",
    "repair",
    "repair_data_files",
]

QUARANTINE = ".rldata-doctor"


@dataclass(frozen=True)
class Damage:
    table: str
    kind: str  # last_checkpoint | checkpoint | commit | data_file
    path: Path
    why: str
    version: int | None = None
    rows: int | None = None  # data_file: the rows that file held (from its commit's statistics)

    def message(self) -> str:
        at = f"version {self.version} ({self.path})" if self.kind == "commit" else str(self.path)
        return f"table {self.table!r} is damaged: {at} {self.why}; see rldata doctor"


def commit_files(log_dir: Path) -> list[tuple[int, Path]]:
    """(version, path) of the commit files in a ``_delta_log``, oldest first."""
    if not log_dir.is_dir():
        return []
    out = [(int(p.name[:20]), p) for p in log_dir.iterdir() if re.fullmatch(r"\d{20}\.json", p.name)]
    return sorted(out)


def checkpoint_files(log_dir: Path) -> dict[int, list[Path]]:
    """version -> its checkpoint file(s) (single-file or multi-part)."""
    out: dict[int, list[Path]] = {}
    if log_dir.is_dir():
        for p in log_dir.iterdir():
            if re.fullmatch(r"\d{20}\.checkpoint(\.\d+\.\d+)?\.parquet", p.name):
                out.setdefault(int(p.name[:20]), []).append(p)
    return {v: sorted(ps) for v, ps in sorted(out.items())}


def _hint(log_dir: Path) -> tuple[int | None, str | None]:
    """(version, None) from ``_last_checkpoint``; (None, None) without one; (None, why) if unreadable."""
    path = log_dir / "_last_checkpoint"
    if not path.exists():
        return None, None
    try:
        return int(json.loads(path.read_text())["version"]), None
    except (OSError, ValueError, KeyError, TypeError):
        return None, "is not a readable checkpoint hint (JSON with a version)"


def _bad_parquet(path: Path, *, full: bool) -> str | None:
    import pyarrow.parquet as pq

    try:
        pq.read_table(path) if full else pq.read_metadata(path)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    except Exception as e:  # noqa: BLE001 - pyarrow's errors for a corrupt file vary by kind of damage
        return f"is not readable Parquet ({str(e).splitlines()[0].split('. ')[0][:120]})"
    return None


def log_damage(table: str, log_dir: Path, *, full: bool = False) -> Damage | None:
    """The first damage in a table's log that stops it being read, or None.

    ``full`` reads every row of the checkpoint (``doctor``); otherwise its footer only (every open).
    """
    if not log_dir.is_dir():
        return None
    since, why = _hint(log_dir)
    hint = log_dir / "_last_checkpoint"
    if why:
        return Damage(table, "last_checkpoint", hint, why)
    checkpoints = checkpoint_files(log_dir)
    if since is not None and since not in checkpoints:
        return Damage(
            table, "last_checkpoint", hint, f"points at version {since}, which has no checkpoint file"
        )
    if since is None and checkpoints:  # without a hint, readers list the log and use the newest
        since = max(checkpoints)
    for path in checkpoints.get(since, []):
        bad = _bad_parquet(path, full=full)
        if bad:
            return Damage(table, "checkpoint", path, bad, version=since)
    bad_commit = damaged_commit(log_dir, since=-1 if since is None else since)
    if bad_commit:
        version, path, why = bad_commit
        return Damage(table, "commit", path, why, version=version)
    return None


def damaged_commit(log_dir: Path, *, since: int | None = None) -> tuple[int, Path, str] | None:
    """The first commit file after the last checkpoint that is empty or not complete JSON lines."""
    if since is None:
        since = _hint(log_dir)[0]
        since = -1 if since is None else since
    for version, path in commit_files(log_dir):
        if version <= since:
            continue
        try:
            data = path.read_bytes()
        except OSError as e:
            return version, path, f"cannot be read ({e.strerror})"
        if not data.strip():
            return version, path, "is an empty commit file"
        for i, line in enumerate(data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                action = json.loads(line)
            except ValueError:
                return version, path, f"is not complete JSON (line {i})"
            if not isinstance(action, dict):
                return version, path, f"holds a non-action at line {i}"
    return None


def data_file_damage(
    table: str, table_dir: Path, dtable, *, full: bool = False, sizes: dict[str, int] | None = None
) -> list[Damage]:
    """Data files of ``dtable``'s version that are missing or not the size their commit recorded.

    A stat per file (every write checks this); ``full`` also reads each file's Parquet footer.
    ``sizes``: {path relative to the table: size} from an object store's listing, used instead of
    stat (and no footer is read).
    """
    from urllib.parse import unquote

    import pyarrow as pa

    actions = pa.table(dtable.get_add_actions(flatten=False))
    cols = [c for c in ("path", "size_bytes", "num_records") if c in actions.column_names]
    actions = actions.select(cols).to_pydict()
    rows = actions.get("num_records") or [None] * len(actions["path"])
    out = []
    for rel, size, n in zip(actions["path"], actions["size_bytes"], rows, strict=True):
        path = table_dir / unquote(rel)
        try:
            have = path.stat().st_size if sizes is None else sizes[unquote(rel)]
        except (FileNotFoundError, KeyError):
            why = "is missing: deleted outside rldata (no commit removed it)"
            out.append(Damage(table, "data_file", path, why, dtable.version(), n))
            continue
        if have != size:
            why = f"is {have} bytes where its commit recorded {size} (truncated or overwritten)"
            out.append(Damage(table, "data_file", path, why, dtable.version(), n))
        elif full and sizes is None and (bad := _bad_parquet(path, full=False)):
            out.append(Damage(table, "data_file", path, bad, dtable.version(), n))
    return out


# ---- repairs --------------------------------------------------------------------------------
def _quarantine(paths: list[Path], root: Path, dest: Path) -> list[Path]:
    moved = []
    for p in paths:
        target = dest / p.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(p, target)
        moved.append(target)
    return moved


def _write_commit(log_dir: Path, version: int, actions: list[dict], *, replace: bool = False) -> None:
    """Write commit ``version``; a new one is created exclusively (a concurrent writer wins)."""
    path = log_dir / f"{version:020d}.json"
    data = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()
    tmp = log_dir / f".{path.name}.rldata-doctor.tmp"
    tmp.write_bytes(data)
    if replace:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # fails if another writer took the version
    finally:
        tmp.unlink()


def _commit_info(why: str) -> dict:
    return {
        "commitInfo": {
            "timestamp": int(time.time() * 1000),
            "operation": "RLDATA DOCTOR REPAIR",
            "operationParameters": {"reason": why},
            "clientVersion": "rldata-doctor",
        }
    }


def repair(
    damage: Damage,
    *,
    root: Path,
    dest: Path,
    template_log: Path | None = None,
    files=None,
    key: tuple[str, ...] = (),
) -> str:
    """Fix ``damage`` and say what was moved where; raises OSError if it cannot.  ``root`` holds the
    table's log (a local copy of it for a store on object storage, whose data files ``files`` reads:
    :mod:`rldata.store.salvage`); ``key``: the table's key columns (a commit's lost removes are inferred
    from them)."""
    log_dir = root / damage.table / "_delta_log"
    if damage.kind == "last_checkpoint":  # readers then list the log and use the newest checkpoint
        moved = _quarantine([damage.path], root, dest)
        return f"moved {damage.path.name} to {moved[0].parent}"
    if damage.kind == "checkpoint":
        return _repair_checkpoint(damage, root, dest, log_dir)
    if damage.kind == "commit":
        return _repair_commit(damage, root, dest, log_dir, template_log, files, key)
    if damage.kind == "data_file":
        return repair_data_files([damage], root, dest)
    return "nothing to do"


def _repair_checkpoint(damage: Damage, root: Path, dest: Path, log_dir: Path) -> str:
    version = damage.version or 0
    have = {v for v, _ in commit_files(log_dir)}
    older = [v for v in checkpoint_files(log_dir) if v < version]
    base = max(older) if older else -1
    missing = [v for v in range(base + 1, version + 1) if v not in have]
    if missing:  # the commits the checkpoint summarised were cleaned up: nothing to rebuild from
        raise RldataError(
            f"cannot rebuild {damage.path.name}: commit(s) {missing[0]}..{missing[-1]} it summarised "
            "are gone (log cleanup); restore the table from a backup"
        )
    parts = checkpoint_files(log_dir)[version]
    hint = log_dir / "_last_checkpoint"
    moved = _quarantine(parts + ([hint] if hint.exists() else []), root, dest)
    names = ", ".join(p.name for p in moved)
    return f"moved {names} to {moved[0].parent}; the table reads from its commits 0..{version} instead"


def _repair_commit(
    damage: Damage, root: Path, dest: Path, log_dir: Path, template_log: Path | None, files, key
) -> str:
    """Replace a damaged commit by what can be trusted of it (:func:`rldata.store.salvage.salvage_commit`:
    every add whose path survived and whose file is intact, the removes only when no add was lost);
    every later commit stays.  Data files of adds that could not be recovered stay where they are."""
    # start-up: `rldata tables` does not load rldata.store.salvage
    from rldata.store.salvage import LocalFiles, salvage_commit

    files = files if files is not None else LocalFiles(log_dir.parent)
    got = salvage_commit(damage.path.read_bytes(), files, version=damage.version or 0, key=key)
    keep = got.keep
    if damage.version == 0:  # the table's protocol and schema: from a fresh table's first commit
        have = {next(iter(a)) for a in keep}
        for action in _template_actions(template_log):
            if next(iter(action)) not in have:
                keep.insert(0, action)
    moved = _quarantine([damage.path], root, dest)
    _write_commit(log_dir, damage.version or 0, [_commit_info("rebuilt a damaged commit"), *keep])
    lost = (
        f"; {len(got.lost)} data file(s) left in place (rldata doctor lists their rows)" if got.lost else ""
    )
    return (
        f"moved {damage.path.name} to {moved[0].parent} and rebuilt version {damage.version}: "
        f"{'; '.join(got.said)}{lost}; later commits kept"
    )


def _template_actions(template_log: Path | None) -> list[dict]:
    if template_log is None:
        return []
    path = template_log / f"{0:020d}.json"
    out = []
    for raw in path.read_bytes().splitlines():
        action = json.loads(raw)
        if next(iter(action)) in ("protocol", "metaData"):
            out.append(action)
    return out


def repair_data_files(found: list[Damage], root: Path, dest: Path) -> str:
    """Commit the removal of unreadable data files (their rows are lost; the rest read again)."""
    table_dir = root / found[0].table
    log_dir = table_dir / "_delta_log"
    now = int(time.time() * 1000)
    removes = []
    for d in found:
        rel = d.path.relative_to(table_dir).as_posix()
        removes.append(
            {"remove": {"path": rel, "deletionTimestamp": now, "dataChange": True, "partitionValues": {}}}
        )
    present = [d.path for d in found if d.path.exists()]
    moved = _quarantine(present, root, dest)
    version = max(d.version or 0 for d in found) + 1  # the version they were found at, plus one
    _write_commit(log_dir, version, [_commit_info("removed unreadable data files"), *removes])
    lost = sum(d.rows or 0 for d in found)
    where = f", moved {len(moved)} to {dest}" if moved else ""
    return f"version {version} removes {len(found)} unreadable data file(s) ({lost} row(s) lost){where}"


# ---- writes that cannot land: a read-only directory, a full disk -----------------------------
_ROOM = 1 << 20  # commit file, checkpoint and Parquet footers on top of the rows themselves


def check_room(table: str, table_dir: Path, need: int = 0) -> None:
    """Refuse (one line, naming the table and directory) a write that cannot land: a directory that
    cannot be written (permissions, a read-only mount; probed, since root passes every access check)
    or a disk without room for about ``need`` bytes.  Checked before a command's first commit, so a
    write that fails here leaves nothing behind; deltalake's own failure would print a Rust panic."""
    import shutil

    for d in (table_dir, table_dir / "_delta_log"):
        probe = d / f".rldata-probe-{os.getpid()}"
        try:
            fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
            probe.unlink()
        except OSError as e:
            raise RldataError(f"table {table!r} cannot be written: {d}: {e.strerror}") from None
    free = shutil.disk_usage(table_dir).free
    if free < need + _ROOM:
        raise RldataError(
            f"no room to write table {table!r}: {free:,} bytes free in {table_dir}, the write needs "
            f"about {need + _ROOM:,}"
        )


class quiet_panics:
    """Keep deltalake's Rust panic messages (and backtraces) off stderr during a write.

    A failed write raises a Python exception that the CLI prints as one line; the panic text Rust
    prints to file descriptor 2 on the way (a full disk, a vanished directory) is collected through
    a pipe and dropped, while every other line written meanwhile goes back to stderr afterwards.
    Re-entrant and shared by threads (a run's heartbeat writes while its job writes): the first to
    enter redirects, the last to leave restores.
    """

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _depth: ClassVar[int] = 0
    _saved: ClassVar[int | None] = None
    _thread: ClassVar[threading.Thread | None] = None
    _chunks: ClassVar[list[bytes]] = []

    def __enter__(self):
        import sys

        cls = quiet_panics
        with cls._lock:
            cls._depth += 1
            if cls._depth > 1:
                return self
            sys.stderr.flush()
            cls._saved = os.dup(2)
            r, w = os.pipe()
            os.dup2(w, 2)
            os.close(w)
            chunks: list[bytes] = []
            cls._chunks = chunks

            def drain():
                while chunk := os.read(r, 65536):
                    chunks.append(chunk)
                os.close(r)

            cls._thread = threading.Thread(target=drain, daemon=True)
            cls._thread.start()
        return self

    def __exit__(self, *exc):
        import sys

        cls = quiet_panics
        with cls._lock:
            cls._depth -= 1
            if cls._depth:
                return False
            sys.stderr.flush()
            os.dup2(cls._saved, 2)  # closes the pipe's last write end: the drain thread ends
            os.close(cls._saved)
            cls._thread.join(timeout=5)
            kept = _drop_panics(b"".join(cls._chunks).decode(errors="replace"))
        if kept:
            sys.stderr.write(kept)
        return False


def _drop_panics(text: str) -> str:
    """``text`` without Rust panic reports: the header, the message, the backtrace, the final note."""
    out, state = [], "text"
    for line in text.splitlines(keepends=True):
        if state == "text" and line.startswith("thread '") and " panicked at " in line:
            state = "message"
        elif state == "message":
            state = (
                "text"
                if line.startswith("note: ")
                else "trace"
                if line.startswith("stack backtrace:")
                else state
            )
        elif state == "trace" and (line.startswith((" ", "\t")) or not line.strip()):
            pass
        elif state == "trace" and line.startswith("note: "):
            state = "text"
        else:
            state = "text"
            out.append(line)
    return "".join(out)
