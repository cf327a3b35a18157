"""An output a committing command writes (a curriculum, ingest's rejects) is written before its commit
(issue 29): when the output cannot be written, the command fails with one line and every file of the
store is byte-identical.  Outputs that only describe the commit (``--out`` summary rows of
``ingest``, ``filter``, ``stratify``) are checked before the command runs (a directory, a missing
directory), and when a device refuses them after the commit the one error line says what was
committed.  The commands audited (each writes a file and commits): ``stratify --curriculum``,
``ingest --rejects``, ``rewards --write-metrics --out`` (rows first: tests/rewards/test_compose.py),
``env profile --report`` and ``export-model --out`` (checked before anything runs), and the
summaries above."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from rldata import open_store
from rldata.errors import RldataError
from rldata.store.outputs import staged_output
from tests.reliability.helpers import banded_store, fingerprint, one_error_line, run

_full = pytest.mark.skipif(
    not (os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode)),
    reason="no /dev/full character device here",
)


@pytest.fixture
def root(tmp_path):
    return banded_store(tmp_path / "store")


@pytest.fixture
def bad_jsonl(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"prompt": "new 1?", "answer": "2"}\n{"prompt": "no answer"}\n')
    return path


@pytest.fixture
def full_dir(tmp_path):
    """A directory on a full 1 MiB tmpfs: a regular file there cannot take a byte."""
    disk = tmp_path / "full"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=False, capture_output=True
    )
    if mounted.returncode:
        pytest.skip("needs root and tmpfs mounts to make a full disk")
    try:
        st = os.statvfs(disk)
        (disk / "fill").write_bytes(b"\0" * (st.f_bavail * st.f_frsize))
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def _fails_unchanged(capsys, root, argv, expect):
    before = fingerprint(root)
    code, out, err = run(capsys, "--store", root, *argv)
    assert code == 1 and out == "" and expect in one_error_line(err), err
    assert fingerprint(root) == before, "the store changed although the command failed"
    return err


@_full
def test_a_curriculum_that_cannot_be_written_commits_nothing(root, capsys):
    _fails_unchanged(
        capsys,
        root,
        ["stratify", "-s", "s1", "--quantiles", "2", "--curriculum", "/dev/full"],
        "curriculum /dev/full: cannot write: No space left on device",
    )


def test_a_curriculum_on_a_full_disk_commits_nothing(root, full_dir, capsys):
    target = full_dir / "buckets.yaml"
    _fails_unchanged(
        capsys,
        root,
        ["stratify", "-s", "s1", "--quantiles", "2", "--curriculum", str(target)],
        f"curriculum {target}: cannot write: No space left on device",
    )
    assert sorted(p.name for p in full_dir.iterdir()) == ["fill"]  # no staged copy left behind


@_full
def test_rejects_that_cannot_be_written_commit_nothing(root, bad_jsonl, capsys):
    err = _fails_unchanged(
        capsys,
        root,
        ["ingest", str(bad_jsonl), "--on-error", "skip", "--rejects", "/dev/full"],
        "rejects /dev/full: cannot write: No space left on device",
    )
    assert "added" not in err  # nothing claims the task landed
    assert open_store(root).sql("SELECT count(*) FROM runs WHERE kind = 'ingest'").fetchall() == [(0,)]


def test_rejects_on_a_full_disk_commit_nothing(root, bad_jsonl, full_dir, capsys):
    _fails_unchanged(
        capsys,
        root,
        ["ingest", str(bad_jsonl), "--on-error", "skip", "--rejects", str(full_dir / "rejects.jsonl")],
        "cannot write: No space left on device",
    )


def test_rejects_and_curriculum_are_written_when_the_commit_lands(root, bad_jsonl, tmp_path, capsys):
    rejects, cur = tmp_path / "rejects.jsonl", tmp_path / "b.yaml"
    code, _, err = run(
        capsys, "--store", root, "ingest", str(bad_jsonl), "--on-error", "skip", "--rejects", str(rejects)
    )
    assert code == 0 and "added 1" in err, err
    (line,) = rejects.read_text().splitlines()
    assert json.loads(line) == {"path": str(bad_jsonl), "where": "2", "field": "answer", "reason": "missing"}
    code, _, err = run(
        capsys, "--store", root, "stratify", "-s", "s1", "--quantiles", "2", "--curriculum", str(cur)
    )
    assert code == 0 and cur.read_text().startswith("# rldata curriculum"), err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staged copy left


@pytest.mark.parametrize(
    "argv",
    [
        ["filter", "--band", "0.1,0.9", "--name", "s2", "--out", "MISSING/x.csv"],
        ["stratify", "-s", "s1", "--quantiles", "2", "--curriculum", "OUT/b.yaml", "--out", "OUT"],
        ["ingest", "IN", "--on-error", "skip", "-f", "json", "--out", "MISSING/x.json"],
        ["ingest", "IN", "--on-error", "skip", "--rejects", "OUT"],
    ],
    ids=lambda a: " ".join(a[:1] + a[-2:]),
)
def test_a_summary_out_that_cannot_be_created_is_refused_first(root, bad_jsonl, tmp_path, capsys, argv):
    argv = [
        a.replace("MISSING", str(tmp_path / "missing"))
        .replace("OUT", str(tmp_path))
        .replace("IN", str(bad_jsonl))
        for a in argv
    ]
    _fails_unchanged(capsys, root, argv, "cannot write")


def test_staged_output_publishes_after_the_block_and_only_then(tmp_path):
    target = tmp_path / "o.txt"
    target.write_text("old")
    with pytest.raises(KeyError), staged_output(target, "new", name="out"):
        assert target.read_text() == "old"  # staged beside it, not yet published
        raise KeyError("the commit failed")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["o.txt"]
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with staged_output(link, "new", name="out"):
        pass
    assert link.is_symlink() and target.read_text() == "new"  # the link's file is replaced, the link kept
    with (
        pytest.raises(RldataError, match="does not exist"),
        staged_output(tmp_path / "no" / "x", "y", name="out"),
    ):
        raise AssertionError("the block must not run when nothing can be staged")


@_full
def test_staged_output_writes_a_device_before_the_block():
    with (
        pytest.raises(RldataError, match="/dev/full: cannot write"),
        staged_output("/dev/full", "x", name="o"),
    ):
        raise AssertionError("the block must not run")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_an_env_report_inside_the_store_is_refused_before_sampling(root, capsys):
    _fails_unchanged(
        capsys,
        root,
        ["env", "profile", "calculator", "--report", str(Path(root) / "card.html")],
        "is inside the store",
    )


@_full
def test_a_summary_that_cannot_be_written_after_the_commit_says_what_was_committed(root, bad_jsonl, capsys):
    argv = ["ingest", str(bad_jsonl), "--on-error", "skip", "-f", "json", "--out", "/dev/full"]
    code, out, err = run(capsys, "--store", root, *argv)
    line = [ln for ln in err.splitlines() if ln.startswith("rldata: error:")]
    assert code == 1 and out == "" and len(line) == 1 and "Traceback" not in err, err
    assert "/dev/full: cannot write" in line[0]
    assert "the ingest committed 1 task(s) (tasks version 2): only this output is missing" in line[0]
    before = fingerprint(root)
    code, _, err = run(capsys, "--store", root, *argv)  # the re-run adds nothing: no commit to mention
    assert code == 1 and "committed" not in err and fingerprint(root) != before  # its run is recorded
    assert open_store(root).sql("SELECT count(*) FROM tasks").fetchall() == [(13,)]
