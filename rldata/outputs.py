"""Files rldata writes beside the store (``--out``, a curriculum, rejects, a report, an export) never
land inside it, and a write that fails is an error.

A store directory belongs to Delta: a file written into it can replace a table's commit file (the
table no longer opens) or shows up as ``stray`` in ``rldata doctor``.  :func:`check_output_path` is
the one check, called by the library verbs that write files and by the CLI for the options only it
has; it runs before anything else is done, so a refused path leaves the store as it was.  A store on
object storage (``s3://...``) cannot contain a local path.
"""

from __future__ import annotations

import os
from pathlib import Path

from rldata.errors import ConfigError, RldataError

__all__ = ["check_output_path", "write_output"]


def _store_root(store) -> str | None:
    root = getattr(store, "root", store)
    if root is None:
        from rldata.store import DEFAULT_STORE

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
        raise RldataError(f"{name} {os.fspath(path)}: cannot write: {e.strerror or e}", field=name) from None
