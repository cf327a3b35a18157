"""Shared by the reliability tests: run the CLI in-process, fingerprint a store's files."""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from pathlib import Path

from rldata import open_store
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
    """The one ``rldata: error:`` line of ``err``; advisory ``note:`` lines printed before it (the
    export's chat-template note) are not part of the error and are left out."""
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("note: ")]
    assert len(lines) == 1, err
    assert lines[0].startswith("rldata: error: "), err
    assert "Traceback" not in err
    return lines[0]


def seed_passrates(store, k: int = 12, *, n: int = 16, offset: int = 2) -> None:
    """``k`` arithmetic tasks t0..t{k-1} and a ledger row each (``offset + i`` of ``n`` correct):
    the store the CLI batteries run against (local or S3)."""
    store.append(
        "tasks",
        [
            {
                "task_id": f"t{i}",
                "source": "s",
                "domain": "math",
                "prompt": f"{i}+1?",
                "answer": str(i + 1),
                "category": "add" if i % 2 else "mul",
            }
            for i in range(k)
        ],
    )
    store.upsert(
        "passrates",
        [
            {
                "task_id": f"t{i}",
                "model": "m",
                "params_hash": "p",
                "verifier_key": "math@1",
                "n": n,
                "n_correct": i + offset,
                "n_error": 0,
                "pass_rate": (i + offset) / n,
            }
            for i in range(k)
        ],
    )


_BANDED: list[Path] = []  # the store banded_store copies, built once per process


def banded_store(root: str | Path) -> str:
    """A local store with :func:`seed_passrates` and the selection ``s1`` (band 0.1-0.9) filtered:
    a copy of one built once per process (building it, 17 tables created, rows written and a filter
    run, took 0.3-0.6 s per test).  A copy reads as the original: its Delta logs name the original's
    location only in the creating commits' information, which no reader uses."""
    if not _BANDED:
        built = Path(tempfile.mkdtemp(prefix="rldata-banded-")) / "store"
        atexit.register(shutil.rmtree, built.parent, True)
        seed_passrates(open_store(built))
        assert main(["--store", str(built), "filter", "--band", "0.1,0.9", "--name", "s1"]) == 0
        _BANDED.append(built)
    shutil.copytree(_BANDED[0], root)
    return str(root)
