"""Runs tagged into the data commit they make, so a run row that never landed can be found later.

An ingest writes two tables: its ``tasks`` commit, then its ``runs`` row.  Delta has no transaction
across tables, so a failure between the two (a full disk, a kill) leaves tasks that no run
accounts for.  The compensating step: the ingest picks its run id first and puts it, with what the
run row needs, into the ``tasks`` commit's own metadata (:func:`tag`, one key in Delta's
``commitInfo``).  ``rldata doctor`` then reads the table's history (:func:`unrecorded`): a tagged
commit whose run id is not in ``runs`` is an ingest that landed without its record, and
``doctor --repair`` writes that record from the tag and the commit's own metrics (:func:`record`).
Commits made before this existed carry no tag and are never reported.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import polars as pl

__all__ = ["KEY", "record", "tag", "tagged_commits", "unrecorded"]

KEY = "rldata.run"  # the commitInfo field holding the tag (JSON text: delta-rs keeps string values)


def tag(
    run_id: str, kind: str, *, path: str, args: dict, store_versions: dict, started: dt.datetime
) -> dict[str, str]:
    """The commit metadata naming run ``run_id``; ``path`` is what the run's summary calls its input."""
    run = {
        "run_id": run_id,
        "kind": kind,
        "path": path,
        "args": args,
        "store_versions": store_versions,
        "started_at": started.isoformat(),
    }
    return {KEY: json.dumps(run, default=str)}


def tagged_commits(store, table: str = "tasks") -> list[dict[str, Any]]:
    """Every commit of ``table`` still in its log that carries a run tag, oldest first: the tag's
    fields plus ``version``, ``committed_at`` and ``added`` (rows the commit inserted)."""
    out = []
    for c in reversed(store.table(table).history()):
        raw = c.get(KEY)
        if not isinstance(raw, str):
            continue
        try:
            run = json.loads(raw)
        except ValueError:
            continue  # a tag we did not write: not ours to judge
        if not isinstance(run, dict) or not isinstance(run.get("run_id"), str):
            continue
        metrics = c.get("operationMetrics") or {}
        added = metrics.get("num_target_rows_inserted", metrics.get("num_added_rows"))
        when = dt.datetime.fromtimestamp(c["timestamp"] / 1000, dt.UTC) if c.get("timestamp") else None
        out.append({**run, "version": c.get("version"), "committed_at": when, "added": added})
    return out


def unrecorded(store, table: str = "tasks") -> list[dict[str, Any]]:
    """The tagged commits of ``table`` whose run id has no row in ``runs``."""
    tagged = tagged_commits(store, table)
    if not tagged:
        return []
    ids = sorted({t["run_id"] for t in tagged})
    runs = store.scan("runs").select("run_id").filter(pl.col("run_id").is_in(ids)).collect()
    known = set(runs["run_id"].to_list())
    return [t for t in tagged if t["run_id"] not in known]


def record(store, commits: list[dict[str, Any]], *, table: str = "tasks") -> int:
    """Write the run row of each tagged commit (status ``done``: its data landed); keyed by run id,
    so repeating this adds nothing.  Returns the rows added."""
    rows = []
    for t in commits:
        summary = {"path": t.get("path"), "added": t["added"], "version": t["version"]}
        summary["recorded_by"] = f"rldata doctor --repair, from {table} version {t['version']}'s commit"
        started = _when(t.get("started_at")) or t["committed_at"]
        rows.append(
            {
                "run_id": t["run_id"],
                "kind": t.get("kind") or "ingest",
                "args": json.dumps(t.get("args") or {}, default=str),
                "store_versions": json.dumps(t.get("store_versions") or {}),
                "status": "done",
                "started_at": started,
                "ended_at": t["committed_at"] or started,
                "summary": json.dumps(summary),
            }
        )
    return store.append("runs", rows, dedupe=True) if rows else 0


def _when(text) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
