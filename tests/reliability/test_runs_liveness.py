"""A killed run must not stay `running` forever: its owner and heartbeat tell readers it is dead."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time

from rldata import open_store
from rldata.runs.core import effective_status, record_run

_HOLD = """
import sys, time
from rldata import open_store
from rldata.runs.core import record_run
with record_run(open_store(sys.argv[1]), "sample", {}, run_id="victim", heartbeat_s=0.2):
    print("started", flush=True)
    time.sleep(600)
"""


def _row(store, run_id):
    return store.sql("SELECT * FROM runs WHERE run_id = $1", params=[run_id]).pl().to_dicts()[0]


def test_a_killed_run_reads_as_killed(tmp_path):
    root = tmp_path / "s"
    store = open_store(root)
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "started"
        row = _row(store, "victim")
        assert row["status"] == "running" and effective_status(row) == "running"
        time.sleep(0.8)  # heartbeats refresh the row while the job lives
        assert (
            json.loads(_row(store, "victim")["summary"])["heartbeat"]
            > json.loads(row["summary"])["heartbeat"]
        )
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    row = _row(store, "victim")
    assert row["status"] == "running"  # the store cannot know by itself ...
    assert effective_status(row) == "killed"  # ... but its reader can
    from rldata.runs.listing import list_runs

    listed = list_runs(store).to_dicts()
    assert [r["status"] for r in listed if r["run_id"] == "victim"] == ["killed"]  # rldata runs shows it


def test_a_silent_run_on_another_host_is_killed_after_its_heartbeat_stops():
    beat = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    row = {
        "status": "running",
        "summary": json.dumps(
            {
                "owner": {"host": "elsewhere.invalid", "pid": 1, "pid_start": "1"},
                "heartbeat": beat.isoformat(),
            }
        ),
    }
    assert effective_status(row, now=beat + dt.timedelta(seconds=30)) == "running"
    assert effective_status(row, now=beat + dt.timedelta(hours=1)) == "killed"
    assert effective_status({**row, "status": "done"}) == "done"


def test_a_finished_run_stops_its_heartbeat(tmp_path):
    store = open_store(tmp_path / "s")
    with record_run(store, "x", {}, run_id="r", heartbeat_s=0.1) as run:
        time.sleep(0.35)
        run.summary = {"n": 1}
    version = store.version("runs")
    time.sleep(0.4)
    row = _row(store, "r")
    assert (row["status"], json.loads(row["summary"])) == ("done", {"n": 1})
    assert store.version("runs") == version and effective_status(row) == "done"


def _dead(run_id: str, kind: str, args: dict) -> dict:
    gone = {"host": "elsewhere.invalid", "pid": 1, "pid_start": "1"}
    beat = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)).isoformat()
    return {
        "run_id": run_id,
        "kind": kind,
        "status": "running",
        "args": json.dumps(args, sort_keys=True),
        "summary": json.dumps({"owner": gone, "heartbeat": beat}),
    }


def test_a_rerun_that_completes_marks_the_killed_run_it_resumed(tmp_path, capsys):
    """A killed `sample` is finished by running the same command again (a new run id): when that run
    completes, the killed one is no longer work left undone, and doctor is clean without --repair.
    Until then doctor names the command that finishes each stopped run."""
    from tests.reliability.helpers import run

    store = open_store(tmp_path / "s")
    args = {"model": "m", "spec": {"n": 4}}
    store.upsert(
        "runs",
        [
            _dead("killed-sample", "sample", args),
            _dead("other-args", "sample", {"model": "m", "spec": {"n": 8}}),
            _dead("killed-train", "train", {}),
        ],
    )
    code, out, _ = run(capsys, "--store", str(tmp_path / "s"), "doctor", "-f", "json")
    [stuck] = json.loads(out)
    assert code == 1 and stuck["check"] == "stuck_runs" and stuck["count"] == 3
    assert "killed-train (train: rldata train --resume --run-id killed-train" in stuck["detail"]
    assert "killed-sample (sample: the same rldata sample command again (it resumes))" in stuck["detail"]
    with record_run(store, "sample", args, run_id="rerun") as r:
        r.summary = {"samples": 4}
    rows = {r["run_id"]: r for r in store.sql("SELECT * FROM runs").pl().to_dicts()}
    assert rows["killed-sample"]["status"] == "failed"
    assert "run rerun resumed its work" in rows["killed-sample"]["error"]
    assert rows["other-args"]["status"] == "running"  # another slice of work: not this run's to close
    assert rows["rerun"]["status"] == "done"
    code, out, _ = run(capsys, "--store", str(tmp_path / "s"), "doctor", "-f", "json")
    [stuck] = json.loads(out)
    assert stuck["count"] == 2 and "killed-sample" not in stuck["detail"]
