"""The `runs` table: one row per job invocation, upserted at start and at end."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from contextlib import contextmanager
from typing import Any

from rldata.store import Store

__all__ = ["new_run_id", "record_run"]


def new_run_id(kind: str) -> str:
    return f"{kind}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


class RunHandle:
    """Given to the body of :func:`record_run`; set ``summary`` to store the run's headline numbers."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.summary: dict[str, Any] = {}


@contextmanager
def record_run(store: Store, kind: str, args: dict[str, Any], *, run_id: str | None = None):
    """Record a run as ``running``, then ``done`` or ``failed`` (with the error) when the body ends.

    A run killed with SIGKILL stays ``running`` in the table: that is the truth as far as the
    store knows, and re-running the job finishes the work under a new run id.
    """
    handle = RunHandle(run_id or new_run_id(kind))
    started = dt.datetime.now(dt.timezone.utc)
    base = {
        "run_id": handle.run_id,
        "kind": kind,
        "args": json.dumps(args, default=str, sort_keys=True),
        "store_versions": json.dumps(store.versions()),
        "started_at": started,
    }
    store.upsert("runs", [{**base, "status": "running"}])
    try:
        yield handle
    except BaseException as e:
        end = dt.datetime.now(dt.timezone.utc)
        from rldata._remote import redact  # an object-store error may quote a credential

        reason = "interrupted" if isinstance(e, KeyboardInterrupt) else redact(f"{type(e).__name__}: {e}")
        store.upsert("runs", [{**base, "status": "failed", "ended_at": end, "error": reason[:2000],
                               "summary": json.dumps(handle.summary, default=str)}])
        raise
    end = dt.datetime.now(dt.timezone.utc)
    store.upsert("runs", [{**base, "status": "done", "ended_at": end,
                           "summary": json.dumps(handle.summary, default=str)}])
