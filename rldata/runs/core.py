"""The `runs` table: one row per job invocation, upserted at start and at end.

While a run is ``running`` its ``summary`` JSON holds its owner (host, pid, the pid's start time)
and a heartbeat timestamp refreshed every ``HEARTBEAT_S``; :func:`effective_status` turns a
``running`` row whose owner is gone (or whose heartbeat stopped) into ``killed``, without a schema
change.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rldata._remote import redact
from rldata.errors import ConfigError, InputError, UnknownNameError
from rldata.names import check_name
from rldata.store.core import Store

__all__ = ["HEARTBEAT_S", "effective_status", "new_run_id", "owner", "record_run", "resume_hint"]

HEARTBEAT_S = 60.0  # a running job refreshes its row this often
STALE_AFTER_S = 5 * HEARTBEAT_S  # no heartbeat for this long (and no owner to ask): the run is dead


def new_run_id(kind: str) -> str:
    return f"{kind}-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


class RunHandle:
    """Given to the body of :func:`record_run`; set ``summary`` to store the run's headline numbers."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.summary: dict[str, Any] = {}


def _pid_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), which tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command name


def owner() -> dict[str, Any]:
    """Who runs this job: enough for a later reader on the same host to tell whether it still lives."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": _pid_start(os.getpid())}


def _owner_alive(own: dict[str, Any]) -> bool | None:
    """True/False when the owner is on this host (its pid and start time checked); None elsewhere."""
    if own.get("host") != socket.gethostname() or not isinstance(own.get("pid"), int):
        return None
    start = _pid_start(own["pid"])
    return start is not None and (own.get("pid_start") is None or start == own["pid_start"])


def effective_status(row: dict[str, Any], *, now: dt.datetime | None = None) -> str:
    """A ``runs`` row's status as a reader should show it: ``killed`` for a ``running`` row whose
    owner process is gone (same host) or whose heartbeat stopped (any host); else the stored one."""
    status = row.get("status")
    if status != "running":
        return status
    try:
        live = json.loads(row.get("summary") or "{}")
    except ValueError:
        return status
    if not isinstance(live, dict) or "owner" not in live:
        return status  # written before heartbeats: nothing to judge by
    alive = _owner_alive(live.get("owner") or {})
    if alive is not None:
        return "running" if alive else "killed"
    try:
        beat = dt.datetime.fromisoformat(live["heartbeat"])
    except (KeyError, TypeError, ValueError):
        return status
    now = now or dt.datetime.now(dt.UTC)
    return "killed" if (now - beat).total_seconds() > STALE_AFTER_S else "running"


def resume_hint(kind: str | None, run_id: str) -> str:
    """The command that finishes a stopped run's work, for a person reading ``doctor``."""
    if kind == "train":
        return f"rldata train --resume --run-id {run_id} (with the run's options)"
    if kind in ("sample", "verify", "judge"):
        return f"the same rldata {kind} command again (it resumes)"
    if kind == "import":
        return "rldata import-rollouts again on the same input"
    return "the command again"


def _live(base: dict[str, Any], who: dict[str, Any]) -> dict[str, Any]:
    beat = dt.datetime.now(dt.UTC).isoformat()
    return {**base, "status": "running", "summary": json.dumps({"owner": who, "heartbeat": beat})}


class _Heartbeat(threading.Thread):
    """Refreshes the running row's heartbeat until stopped (a failed refresh is retried next beat)."""

    def __init__(self, store: Store, base: dict[str, Any], who: dict[str, Any], every_s: float):
        super().__init__(daemon=True, name="rldata-heartbeat")
        self.store, self.base, self.who, self.every_s = store, base, who, every_s
        self.done = threading.Event()
        self.lock = threading.Lock()  # the final upsert must not race a heartbeat's

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            with self.lock:
                if self.done.is_set():
                    return
                try:
                    self.store.upsert("runs", [_live(self.base, self.who)])
                except Exception:  # noqa: BLE001, S110 - a missed beat is not worth failing the job
                    pass

    def stop(self) -> None:
        with self.lock:
            self.done.set()


def _refused(store: Store, exc: BaseException, base: dict[str, Any]) -> bool:
    """Whether a run's error was a refusal of its input or configuration (ConfigError, InputError,
    UnknownNameError, also when an engine raised it) before it wrote anything: such a command did
    not run, and records no run.  Any table other than ``runs`` that moved since the start (this
    job's writes, or another job's: the check cannot tell) keeps the failed row."""
    from rldata.causes import root_cause  # start-up: `rldata tables` does not load rldata.causes

    if not isinstance(root_cause(exc), (ConfigError, InputError, UnknownNameError)):
        return False
    try:
        before = json.loads(base["store_versions"])
        now = store.versions()
    except Exception:  # noqa: BLE001 - unsure: keep the failed row
        return False
    return all(now.get(t) == v for t, v in before.items() if t != "runs")


@contextmanager
def record_run(
    store: Store,
    kind: str,
    args: dict[str, Any],
    *,
    run_id: str | None = None,
    heartbeat_s: float = HEARTBEAT_S,
):
    """Record a run as ``running``, then ``done`` or ``failed`` (with the error) when the body ends.

    A run killed with SIGKILL stays ``running`` in the table; :func:`effective_status` reads it as
    ``killed`` (its owner is gone, its heartbeat stopped), and re-running the job finishes the work
    under a new run id.
    """
    handle = RunHandle(check_name(run_id, field="run_id") if run_id is not None else new_run_id(kind))
    started = dt.datetime.now(dt.UTC)
    base = {
        "run_id": handle.run_id,
        "kind": kind,
        "args": json.dumps(args, default=str, sort_keys=True),
        "store_versions": json.dumps(store.versions()),
        "started_at": started,
    }
    who = owner()
    store.upsert("runs", [_live(base, who)])
    beat = _Heartbeat(store, base, who, heartbeat_s)
    beat.start()
    try:
        yield handle
    except BaseException as e:
        beat.stop()
        end = dt.datetime.now(dt.UTC)
        from rldata.causes import describe  # start-up: only an error loads rldata.causes

        if _refused(store, e, base):
            rid = handle.run_id.replace("'", "''")
            store.delete("runs", f"run_id = '{rid}'")
            raise
        reason = "interrupted" if isinstance(e, KeyboardInterrupt) else redact(describe(e))
        store.upsert(
            "runs",
            [
                {
                    **base,
                    "status": "failed",
                    "ended_at": end,
                    "error": reason[:2000],
                    "summary": json.dumps(handle.summary, default=str),
                }
            ],
        )
        raise
    beat.stop()
    end = dt.datetime.now(dt.UTC)
    done = {**base, "status": "done", "ended_at": end, "summary": json.dumps(handle.summary, default=str)}
    store.upsert("runs", [done, *_resumed(store, base, end)])


def _resumed(store: Store, base: dict[str, Any], end: dt.datetime) -> list[dict[str, Any]]:
    """The killed runs this one resumed, marked ``failed`` with that said: earlier runs of the same
    kind with the same arguments, stored as ``running``, whose process is gone.  A re-run of a
    killed ``sample`` or ``verify`` gets a new run id and finishes the killed run's work, so the
    killed run is no longer work left undone (``doctor``'s ``stuck_runs``)."""
    try:
        rows = (
            store.sql(
                "SELECT * FROM runs WHERE kind = $1 AND status = 'running' AND args = $2 AND run_id <> $3",
                params=[base["kind"], base["args"], base["run_id"]],
            )
            .pl()
            .to_dicts()
        )
    except Exception:  # noqa: BLE001 - a nicety: the run itself is recorded either way
        return []
    why = f"killed: its process ended without recording an outcome; run {base['run_id']} resumed its work"
    return [
        {**r, "status": "failed", "ended_at": end, "error": why}
        for r in rows
        if effective_status(r) == "killed"
    ]
