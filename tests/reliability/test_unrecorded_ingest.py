"""An ingest whose tasks landed but whose ``runs`` row did not (issue 29): the tasks commit carries
the run id (rldata.store.run_commits), so ``rldata doctor`` finds the missing run and ``--repair`` records
it.  Only the failure is injected (the runs write raises as a full disk would, after the tasks
commit); the store, the ingest and doctor are the real ones."""

from __future__ import annotations

import errno
import importlib
import json
import shutil
from pathlib import Path

import pytest

from rldata import open_store
from rldata.doctor.core import doctor
from rldata.store import run_commits
from tests.reliability.helpers import one_error_line, run

# rldata exports a function named ingest, which hides the package from attribute imports
ingest_files = importlib.import_module("rldata.ingest.files")
STORES = Path(__file__).parents[1] / "data" / "stores"


def _tasks_file(path: Path, start: int, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"prompt": f"{i} + 1 = ?", "answer": str(i + 1)}) + "\n"
            for i in range(start, start + n)
        )
    )
    return path


def _runs_write_fails(monkeypatch) -> None:
    """The ingest's runs write fails (after its tasks commit), as on a disk that just filled up."""

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ingest_files, "_record_run", full)


def _doctor(capsys, root, *more):
    code, out, err = run(capsys, "--store", str(root), "doctor", *more, "-f", "json")
    return code, json.loads(out), err


def test_doctor_finds_and_records_an_ingest_whose_run_was_lost(tmp_path, capsys, monkeypatch):
    root = tmp_path / "store"
    good = _tasks_file(tmp_path / "a.jsonl", 0, 3)
    assert run(capsys, "--store", str(root), "ingest", str(good))[0] == 0
    _runs_write_fails(monkeypatch)
    lost = _tasks_file(tmp_path / "b.jsonl", 10, 4)
    code, _, err = run(capsys, "--store", str(root), "ingest", str(lost))
    line = one_error_line(err)
    assert code == 1 and "ingested 4 task(s)" in line and "rldata doctor --repair records it" in line
    assert run(capsys, "--store", str(root), "ingest", str(_tasks_file(tmp_path / "c.jsonl", 20, 2)))[0] == 1
    store = open_store(root)
    assert store.count("tasks") == 9 and store.count("runs") == 1
    monkeypatch.undo()  # the disk has room again

    code, found, err = _doctor(capsys, root)
    assert code == 1 and "unrecorded_ingest" in err
    [f] = found
    assert (f["check"], f["table"], f["count"], f["repaired"]) == ("unrecorded_ingest", "tasks", 2, False)
    versions = {t["version"]: t["run_id"] for t in run_commits.unrecorded(store)}
    assert sorted(versions) == [2, 3] and all(
        f"version {v} (run {r})" in f["detail"] for v, r in versions.items()
    )

    code, found, err = _doctor(capsys, root, "--repair")
    assert code == 0 and [(f["check"], f["count"], f["repaired"]) for f in found] == [
        ("unrecorded_ingest", 2, True)
    ]
    rows = {r["run_id"]: r for r in store.read("runs").to_dicts()}
    assert len(rows) == 3 and set(versions.values()) <= set(rows)
    second = rows[versions[2]]
    assert (second["kind"], second["status"]) == ("ingest", "done")
    assert json.loads(second["args"])["path"] == str(lost)
    assert json.loads(second["store_versions"]) == {"tasks": 1}  # as the ingest itself stores it
    summary = json.loads(second["summary"])
    assert (summary["path"], summary["added"], summary["version"]) == (str(lost), 4, 2)
    assert second["started_at"] <= second["ended_at"]

    code, found, err = _doctor(capsys, root)
    assert code == 0 and found == []
    assert run_commits.record(store, run_commits.tagged_commits(store)) == 0  # keyed: a repeat adds nothing


def test_a_recorded_ingest_carries_the_run_id_of_its_tasks_commit(tmp_path, capsys):
    root = tmp_path / "store"
    run(capsys, "--store", str(root), "ingest", str(_tasks_file(tmp_path / "a.jsonl", 0, 3)))
    store = open_store(root)
    [tagged] = run_commits.tagged_commits(store)
    [row] = store.read("runs").to_dicts()
    assert (tagged["run_id"], tagged["kind"], tagged["added"]) == (row["run_id"], "ingest", 3)
    assert json.loads(row["summary"])["version"] == tagged["version"]


def test_healthy_stores_after_several_ingests_report_nothing(tmp_path, capsys):
    root = tmp_path / "store"
    a = _tasks_file(tmp_path / "a.jsonl", 0, 3)
    for argv in (["ingest", str(a)], ["ingest", str(a)], ["ingest", "--sample", "arith"]):
        assert run(capsys, "--store", str(root), *argv)[0] == 0
    if _has_gym():
        assert run(capsys, "--store", str(root), "ingest", "--gym", "chain_sum", "--n", "3")[0] == 0
    store = open_store(root)
    assert len(run_commits.tagged_commits(store)) == (3 if _has_gym() else 2)  # the re-ingest commits nothing
    assert store.count("runs") == (4 if _has_gym() else 3)
    code, found, err = _doctor(capsys, root)
    assert code == 0 and found == [], err


def _has_gym() -> bool:
    try:
        import reasoning_gym  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4", "v5"])
def test_stores_written_before_the_tags_report_no_unrecorded_ingest(tmp_path, version):
    root = tmp_path / version
    shutil.copytree(STORES / version, root)
    store = open_store(root)
    assert store.count("tasks") > 0  # a store with tasks commits, none of them tagged
    assert run_commits.tagged_commits(store) == []
    assert "unrecorded_ingest" not in {f.check for f in doctor(store)}
