"""Files rldata writes beside the store (``--out``, a curriculum, rejects, a report, an export) never
land inside it, and a write that fails is an error.

A store directory belongs to Delta: a file written into it can replace a table's commit file (the
table no longer opens) or shows up as ``stray`` in ``rldata doctor``.  :func:`check_output_path` is
the one check, called by the library verbs that write files and by the CLI for the options only it
has; it runs before anything else is done, so a refused path leaves the store as it was.  A store on
object storage (``s3://...``) cannot contain a local path.

An output a command knows before it commits (a curriculum, ingest's rejects) goes through
:func:`staged_output`: written in full before the commit and published after it, so an output that
cannot be written (a full disk, ``/dev/full``) fails the command with the store byte-identical.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rldata.errors import ConfigError, RldataError
from rldata.store.core import DEFAULT_STORE

__all__ = ["check_output_path", "check_writable_file", "os_reason", "staged_output", "write_output"]


def _store_root(store) -> str | None:
    root = getattr(store, "root", store)
    if root is None:
        root = DEFAULT_STORE
    root = os.fspath(root)
    if "://" in root and not root.startswith("file://"):
        return None  # object storage: no local path is inside it
    return os.path.realpath(root.removeprefix("file://"))


def check_output_path(path, *, store, name: str, directory: bool = False) -> Path:
    """Raise a :class:`ConfigError` about field ``name`` when ``path`` is inside the store (or is its
    root); with ``directory=True`` also when the directory would hold the store (an output directory
    may be replaced whole).  ``store`` is a Store, its root, or None for the default store.
    Symbolic links are followed, so a link that points into the store is refused too."""
    if path is None:
        return path
    root = _store_root(store)
    if root is None:
        return Path(path)
    target = Path(os.path.realpath(os.path.expanduser(os.fspath(path))))
    inside = target == Path(root) or Path(root) in target.parents
    holds = directory and Path(root).is_relative_to(target)
    if inside:
        raise ConfigError(
            f"{name} {os.fspath(path)} is inside the store {root}: an output there could overwrite a "
            "table's files; write it outside the store",
            field=name,
        )
    if holds:
        raise ConfigError(
            f"{name} {os.fspath(path)} holds the store {root}: the output directory is replaced whole; "
            "give a directory outside the store",
            field=name,
        )
    return Path(path)


def check_writable_file(path, *, name: str) -> None:
    """Refuse, before the command does anything, a file output that cannot be created: a directory,
    a missing parent directory, no write permission.  A device that opens but refuses every byte
    (``/dev/full``) is found only by writing: outputs known before a commit are staged
    (:func:`staged_output`); a command's summary rows describe its commit and follow it."""
    if path is None:
        return
    p = Path(os.path.expanduser(os.fspath(path)))
    why = None
    if p.is_dir():
        why = "is a directory; give a file path"
    elif not p.exists() and not p.parent.is_dir():
        why = f"directory {p.parent} does not exist"
    elif not os.access(p if p.exists() else p.parent, os.W_OK):
        why = "permission denied"
    if why:
        raise _cannot_write(name, path, why)


def write_output(path, data: str | bytes, *, name: str) -> None:
    """Write ``data`` to ``path``; a failed write (a full disk, ``/dev/full``, a directory) is one
    error naming ``name`` and the path, never a silent success."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        with open(path, "wb") as f:
            f.write(data)
            f.flush()  # a full device refuses here or at close: both inside the try
    except OSError as e:
        raise _cannot_write(name, path, os_reason(e)) from None


@contextmanager
def staged_output(path, data: str | bytes, *, name: str) -> Iterator[None]:
    """Write ``data`` for ``path`` before the block (a store commit) and publish it after, so an
    output that cannot be written fails the command before anything is committed.

    A regular file (or a new one) is written in full beside ``path`` first and renamed over it when
    the block succeeds; when the block fails, the staged copy is removed and ``path`` is untouched.
    A device or pipe (``/dev/stdout``, ``/dev/full``) cannot be staged: it is written before the
    block, so a refusing device still fails before the commit.  ``path`` None: the block alone."""
    if path is None:
        yield
        return
    if isinstance(data, str):
        data = data.encode("utf-8")
    target = Path(os.path.realpath(os.path.expanduser(os.fspath(path))))  # a link: its file is replaced
    if target.exists() and not target.is_file():
        if target.is_dir():
            raise _cannot_write(name, path, "is a directory")
        write_output(path, data, name=name)
        yield
        return
    tmp = _stage(target, data, name=name, shown=path)
    try:
        yield
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _cannot_write(name, path, os_reason(e)) from None


def _stage(target: Path, data: bytes, *, name: str, shown) -> Path:
    """``data`` in a hidden file in ``target``'s directory (where a rename over ``target`` is atomic)."""
    if not target.parent.is_dir():
        raise RldataError(f"{name} {os.fspath(shown)}: directory {target.parent} does not exist", field=name)
    fd, tmp_name = None, None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".rldata-tmp", dir=target.parent)
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
        os.fchmod(fd, mode)  # mkstemp makes 0600: the published file gets what a plain open would
        with os.fdopen(fd, "wb") as f:
            fd = None
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # a full disk or quota refuses here, before the commit
    except OSError as e:
        if fd is not None:
            os.close(fd)
        if tmp_name is not None:
            Path(tmp_name).unlink(missing_ok=True)
        raise _cannot_write(name, shown, os_reason(e)) from None
    return Path(tmp_name)


def _cannot_write(name: str, path, reason) -> RldataError:
    return RldataError(f"{name} {os.fspath(path)}: cannot write: {reason}", field=name)


def os_reason(e: OSError) -> str:
    """The operating system's words for ``e``: its strerror, or (pyarrow and deltalake raise OSErrors
    with only a message, "... Detail: [errno 28] ...") the strerror of the errno in its message."""
    if isinstance(e.errno, int) and e.errno > 0:
        return os.strerror(e.errno)  # pyarrow sets errno but keeps its own sentence in strerror
    if e.strerror:
        return e.strerror
    m = re.search(r"\[errno (\d+)\]", str(e), re.IGNORECASE)
    return os.strerror(int(m.group(1))) if m else str(e)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
