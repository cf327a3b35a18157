"""A Hugging Face hub cache laid out as huggingface_hub lays it out after a download, for tests
that resolve hub ids (``rldata.models.hub``) without a network."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

COMMIT = "4f2c1a9e8b7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"  # a 40-hex commit id, as the hub names snapshots


def lay_out_hub_cache(
    cache: Path, hub_id: str, src: Path, *, commit: str = COMMIT, ref: str = "main"
) -> Path:
    """Copy model directory ``src`` into ``cache`` as hub id ``hub_id`` at ``commit``:
    ``models--ORG--NAME/blobs/<hash>`` holds the bytes, ``snapshots/<commit>/<file>`` are relative
    symlinks to them, and ``refs/<ref>`` holds the commit.  Returns the snapshot directory."""
    repo = cache / ("models--" + hub_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir()):
        if not f.is_file():
            continue
        data = f.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snap / f.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / ref).write_text(commit)  # no trailing newline, as huggingface_hub writes it
    return snap
