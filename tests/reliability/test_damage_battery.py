"""The damage battery (issue 29): each kind of damage to one table, then the store-touching commands.

For every kind: each command that touches the damaged table fails with one line naming the table
and the damaged file, and writes nothing; the other tables keep working; ``doctor`` finds it;
``doctor --repair`` fixes it without hiding a good row (the rows of a later commit stay, and every
add of a cut commit whose path survived and whose file is intact is recovered) and says what it
moved, recovered and could not recover; a data file whose rows no commit references any more stays
where it is (the only copy of those rows) and ``doctor`` keeps naming it, with its row count.  A read-only table directory and a full disk (a small tmpfs) are refused before the
first commit, with no Rust panic on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rldata import open_store
from tests.reliability.helpers import fingerprint, one_error_line, run

LOG = "tasks/_delta_log"


def _tasks(prefix: str, n: int) -> list[dict]:
    return [
        {
            "task_id": f"{prefix}{k}",
            "source": "s",
            "domain": "math",
            "prompt": f"{prefix} {k}+1?",
            "answer": "1",
        }
        for k in range(n)
    ]


@pytest.fixture
def root(tmp_path) -> Path:
    """tasks: v1 10 rows (file A), v2 10 rows, a checkpoint at v2, v3 100 rows in two files of 50,
    v4 800 rows = 920."""
    from deltalake import write_deltalake

    from rldata import schemas
    from rldata.store.validate import conform

    store = open_store(tmp_path / "store")
    store.append("tasks", _tasks("a", 10))
    store.append("tasks", _tasks("b", 10))
    store.table("tasks").create_checkpoint()
    # one commit adding two files (as a large write does): a cut can fall between their add lines
    rows = conform(schemas.get("tasks"), _tasks("c", 100)).to_batches(max_chunksize=50)
    write_deltalake(store.uri("tasks"), rows, mode="append", target_file_size=1)
    store.append("tasks", _tasks("d", 800))
    store.append("runs", [{"run_id": "ok", "kind": "x", "status": "done"}])
    assert [_rows(a) for a in _adds(tmp_path / "store", 3)] == [50, 50] and store.count("tasks") == 920
    return tmp_path / "store"


def _adds(root: Path, version: int) -> list[dict]:
    commit = (root / LOG / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(ln)["add"] for ln in commit if ln.startswith('{"add"')]


def _rows(add: dict) -> int:
    return json.loads(add["stats"])["numRecords"]


def _first_data_file(root: Path) -> Path:
    commit = (root / LOG / f"{1:020d}.json").read_text().splitlines()
    add = next(json.loads(ln)["add"] for ln in commit if '"add"' in ln)
    return root / "tasks" / add["path"]


def _truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def _cut_commit(root: Path, *, at: str) -> Path:
    """v3 cut inside its second add line: right after that add's path (``after_path``: its file is
    found and checked), inside the path (``in_path``: the file cannot be named), or in its first
    line (``info``: even the commit's own count of its adds is gone)."""
    path = root / LOG / f"{3:020d}.json"
    data = path.read_bytes()
    second = data.index(b'{"add"', data.index(b'{"add"') + 1)
    name = data.index(b'"path":"', second) + len(b'"path":"')
    end = data.index(b'"', name)
    keep = {"after_path": end + 1, "in_path": name + 10, "info": 40}[at]
    path.write_bytes(data[:keep])
    return path


# kind -> (the file the errors must name, rows readable after repair, rows left in a data file no
# commit references: not moved, reported by doctor)
def _damage(kind: str, root: Path) -> tuple[Path, int, int]:
    log = root / LOG
    checkpoint = log / f"{2:020d}.checkpoint.parquet"
    if kind == "truncated_checkpoint":
        _truncate(checkpoint, 100)
        return checkpoint, 920, 0
    if kind == "garbage_checkpoint":
        checkpoint.write_bytes(os.urandom(4000))
        return checkpoint, 920, 0
    if kind == "bad_last_checkpoint":
        (log / "_last_checkpoint").write_text('{"version": 9, "size": 5}')
        return log / "_last_checkpoint", 920, 0
    if kind == "deleted_data_file":
        path = _first_data_file(root)
        path.unlink()
        return path, 910, 0
    if kind == "truncated_data_file":
        path = _first_data_file(root)
        _truncate(path, 100)
        return path, 910, 0
    if kind == "truncated_commit":  # both of v3's adds are recovered: every row reads again
        return _cut_commit(root, at="after_path"), 920, 0
    if kind == "truncated_commit_in_path":  # the second file cannot be named: its 50 rows stay in it
        return _cut_commit(root, at="in_path"), 870, 50
    if kind == "truncated_commit_info":  # nothing of v3 but its first bytes: 100 rows stay in 2 files
        return _cut_commit(root, at="info"), 820, 100
    if kind == "garbled_commit":  # bytes overwritten inside the first add's statistics: path intact
        path = log / f"{3:020d}.json"
        data = bytearray(path.read_bytes())
        at = data.index(b"numRecords", data.index(b'{"add"'))
        data[at : at + 40] = os.urandom(40).replace(b"\n", b"x")
        path.write_bytes(bytes(data))
        return path, 920, 0
    raise AssertionError(kind)


KINDS = [
    "truncated_checkpoint",
    "garbage_checkpoint",
    "bad_last_checkpoint",
    "deleted_data_file",
    "truncated_data_file",
    "truncated_commit",
    "truncated_commit_in_path",
    "truncated_commit_info",
    "garbled_commit",
]


def _dump(tmp_path: Path) -> Path:
    dump = tmp_path / "dump"
    dump.mkdir(exist_ok=True)
    rows = [
        {"input": f"{i}+100=", "output": str(i + 100), "gts": str(i + 100), "score": 1.0} for i in range(3)
    ]
    (dump / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dump


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_damage_is_isolated_named_and_repaired(kind, root, tmp_path, capsys):
    bad, rows_after, lost = _damage(kind, root)
    new = tmp_path / "new.jsonl"
    new.write_text('{"prompt": "new?", "answer": "1"}\n')
    s = str(root)
    before = fingerprint(root)

    def fails_naming_it(*argv):
        code, _, err = run(capsys, "--store", s, *argv)
        line = one_error_line(err)
        assert code == 1 and "'tasks'" in line and str(bad) in line, (argv, line)
        assert "panicked" not in err and "Kernel error" not in line

    # reads and writes of the damaged table: one line naming table and file, nothing written
    fails_naming_it("sql", "SELECT count(*) FROM tasks")
    fails_naming_it("ingest", str(new))
    fails_naming_it("import-rollouts", str(_dump(tmp_path)), "--format", "verl", "--model", "m")
    # tables lists the others and names the damaged file (a missing data file too: the log's row
    # count is no count of rows that can be read)
    code, out, err = run(capsys, "--store", s, "tables", "-f", "csv")
    assert code == 1 and str(bad) in one_error_line(err) and "runs,1," in out and "tasks,,," in out
    assert fingerprint(root) == before
    # the other tables still work
    code, out, err = run(capsys, "--store", s, "sql", "SELECT count(*) AS n FROM runs", "-f", "csv")
    assert (code, out) == (0, "n\n1\n"), err

    # doctor finds it, names the file, changes nothing; --repair fixes it and says what it moved
    code, out, err = run(capsys, "--store", s, "doctor", "-f", "json")
    found = [f for f in json.loads(out) if f["check"] in ("log", "data_files")]
    assert code == 1 and len(found) == 1 and found[0]["table"] == "tasks" and bad.name in found[0]["detail"]
    assert fingerprint(root) == before
    code, out, err = run(capsys, "--store", s, "doctor", "--repair", "-f", "json")
    found = json.loads(out)
    fixed = [f for f in found if f["check"] in ("log", "data_files")]
    assert code == (1 if lost else 0) and fixed and all(f["repaired"] for f in fixed), (out, err)
    assert any(w in fixed[0]["detail"] for w in ("moved", "removes"))
    assert (root / ".rldata-doctor").is_dir() or kind == "deleted_data_file"
    if kind == "truncated_commit":
        assert "recovered 2 add(s) (100 row(s)) of the 2 the commit made" in fixed[0]["detail"]
    if kind == "truncated_commit_in_path":
        assert "recovered 1 add(s) (50 row(s)) of the 2 the commit made" in fixed[0]["detail"]
        assert "could not recover 1 add(s) cut off before their path" in fixed[0]["detail"]

    # every good row reads again (v4's 800 rows included), and writes work again
    store = open_store(root)
    assert not store.damaged and store.count("tasks") == rows_after
    assert store.sql("SELECT count(*) FROM tasks").fetchall() == [(rows_after,)]
    assert store.sql("SELECT count(*) FROM tasks WHERE task_id LIKE 'd%'").fetchall() == [(800,)]
    code, _, err = run(capsys, "--store", s, "ingest", str(new))
    assert code == 0, err
    code, out, err = run(capsys, "--store", s, "doctor", "-f", "json")
    left = [f for f in json.loads(out) if f["check"] != "leftover"]
    if not lost:
        assert code == 0 and not left, out
        return
    # the rows no commit references any more: named with their count, never moved or deleted
    [unref] = left
    assert code == 1 and unref["check"] == "unreferenced" and unref["table"] == "tasks", out
    assert f"hold {lost} row(s) the table lacks" in unref["detail"] and "left in place" in unref["detail"]
    assert sum(pq.read_metadata(p).num_rows for p in _unreferenced(root)) == lost


def _unreferenced(root: Path) -> list[Path]:
    from rldata.doctor.core import _ever_added

    added = _ever_added(open_store(root), "tasks")
    return [p for p in (root / "tasks").glob("*.parquet") if p.name not in added]


def _mount(*args: str) -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", *args], check=False, capture_output=True).returncode == 0


@pytest.mark.slow
def test_read_only_table_directory(root, tmp_path, capsys):
    tdir = root / "tasks"
    if not (_mount("--bind", str(tdir), str(tdir)) and _mount("-o", "remount,bind,ro", str(tdir))):
        subprocess.run(["umount", str(tdir)], check=False, capture_output=True)
        pytest.skip(
            "needs root and bind mounts (chmod alone does not stop root) to make a directory read-only"
        )
    try:
        new = tmp_path / "new.jsonl"
        new.write_text('{"prompt": "new?", "answer": "1"}\n')
        before = fingerprint(root)
        for argv in (
            ["ingest", str(new)],
            ["import-rollouts", str(_dump(tmp_path)), "--format", "verl", "--model", "m"],
        ):
            code, _, err = run(capsys, "--store", str(root), *argv)
            line = one_error_line(err)
            assert code == 1 and f"table 'tasks' cannot be written: {tdir}" in line and "Read-only" in line
        assert fingerprint(root) == before  # import-rollouts wrote no trajectory either
        code, out, err = run(
            capsys, "--store", str(root), "sql", "SELECT count(*) AS n FROM tasks", "-f", "csv"
        )
        assert (code, out) == (0, "n\n920\n"), err
        code, out, err = run(capsys, "--store", str(root), "doctor", "-f", "json")
        assert code == 1 and [(f["check"], f["table"]) for f in json.loads(out)] == [("writable", "tasks")]
    finally:
        subprocess.run(["umount", str(tdir)], check=True)


@pytest.mark.slow
def test_full_disk(tmp_path, capfd):
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)):
        pytest.skip("needs root and tmpfs mounts to make a small full disk")
    try:
        root = disk / "store"
        store = open_store(root)
        store.append("tasks", _tasks("a", 10))
        fill = disk / "fill"
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        fill.write_bytes(b"\0" * (free - 64 * 1024))
        big = tmp_path / "big.jsonl"
        big.write_text(
            "".join(json.dumps({"prompt": f"p{k} " + "x" * 200, "answer": "1"}) + "\n" for k in range(3000))
        )
        before = fingerprint(root)
        for argv in (
            ["ingest", str(big)],
            ["import-rollouts", str(_dump(tmp_path)), "--format", "verl", "--model", "m"],
        ):
            code, _, err = run(capfd, "--store", str(root), *argv)  # fd 2 itself: a panic would show
            line = one_error_line(err)
            assert code == 1 and "no room to write table" in line and str(root) in line, line
        assert fingerprint(root) == before  # no task committed, no run recorded, no trajectory
        assert open_store(root).sql("SELECT count(*) FROM runs").fetchall() == [(0,)]

        # a write that gets past the check and still fails: deltalake's Rust panic stays off stderr
        import pyarrow as pa
        from deltalake import write_deltalake

        from rldata.store.damage import quiet_panics

        capfd.readouterr()
        with pytest.raises(Exception, match="No space left"), quiet_panics():
            write_deltalake(str(disk / "raw"), pa.table({"x": [os.urandom(10_000) for _ in range(300)]}))
        assert "panicked" not in capfd.readouterr().err
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_import_failing_part_way_is_reported_and_completed_by_a_rerun(root, tmp_path, capsys, monkeypatch):
    """The compensating step for a write that fails after its first commit (a disk filled by another
    process mid-command): doctor reports the import, and re-running it completes it exactly."""
    from rldata.store.core import Store

    dump = _dump(tmp_path)
    real = Store.append

    def disk_fills(self, name, data, **kw):  # the fault: the second table's commit finds no space
        if name == "trajectories":
            raise OSError(28, "No space left on device")
        return real(self, name, data, **kw)

    monkeypatch.setattr(Store, "append", disk_fills)
    code, _, err = run(
        capsys, "--store", str(root), "import-rollouts", str(dump), "--format", "verl", "--model", "m"
    )
    assert code == 1 and "No space left on device" in one_error_line(err)
    monkeypatch.setattr(Store, "append", real)
    store = open_store(root)
    assert (store.count("tasks"), store.count("trajectories")) == (923, 0)  # the tasks landed
    code, out, err = run(capsys, "--store", str(root), "doctor", "-f", "json")
    assert code == 1 and [f["check"] for f in json.loads(out)] == ["partial_import"]

    code, _, err = run(
        capsys, "--store", str(root), "import-rollouts", str(dump), "--format", "verl", "--model", "m"
    )
    assert code == 0, err
    store = open_store(root)
    assert (store.count("tasks"), store.count("trajectories"), store.count("verifications")) == (923, 3, 3)
    code, out, err = run(capsys, "--store", str(root), "doctor", "-f", "json")
    assert code == 0 and json.loads(out) == [], out


def test_ingest_that_cannot_record_its_run_says_what_landed(root, tmp_path, capsys, monkeypatch):
    from rldata.store.core import Store

    new = tmp_path / "new.jsonl"
    new.write_text('{"prompt": "new?", "answer": "1"}\n')
    real = Store.append

    def disk_fills(self, name, data, **kw):  # the fault: the run's commit finds no space
        if name == "runs":
            raise OSError(28, "No space left on device")
        return real(self, name, data, **kw)

    monkeypatch.setattr(Store, "append", disk_fills)
    code, _, err = run(capsys, "--store", str(root), "ingest", str(new))
    line = one_error_line(err)
    assert code == 1 and "ingested 1 task(s) (tasks version 5) but could not record the run" in line
    assert "No space left on device" in line and "rldata doctor --repair records it" in line
    monkeypatch.setattr(Store, "append", real)
    code, _, err = run(capsys, "--store", str(root), "ingest", str(new))
    store = open_store(root)
    assert code == 0 and store.count("tasks") == 921 and store.count("runs") == 2, err
    # the re-run added nothing, so its run does not account for version 5: doctor still finds that one
    code, out, err = run(capsys, "--store", str(root), "doctor", "-f", "json")
    assert code == 1 and [(f["check"], f["count"]) for f in json.loads(out)] == [("unrecorded_ingest", 1)]
    assert "version 5 (run " in json.loads(out)[0]["detail"]
    code, out, err = run(capsys, "--store", str(root), "doctor", "--repair", "-f", "json")
    assert code == 0 and store.count("runs") == 3, err
    assert run(capsys, "--store", str(root), "doctor", "-f", "json")[1].strip() == "[]"
