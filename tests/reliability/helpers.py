"""Shared by the reliability tests: run the CLI in-process, fingerprint a store's files."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rldata.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def fingerprint(root: str | Path) -> dict[str, str]:
    """md5 of every file under ``root`` (relative path -> digest): equal means byte-identical."""
    root = Path(root)
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("rldata: error: "), err
    assert "Traceback" not in err
    return lines[0]
