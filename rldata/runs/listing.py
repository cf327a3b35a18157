"""``rldata runs``: the ``runs`` table as a readable list, so a user finds the run id to report on."""

from __future__ import annotations

import json

import polars as pl

from rldata.runs.core import effective_status
from rldata.store.core import Store

__all__ = ["HEADLINES", "list_runs", "shown_status"]

# summary keys worth a column (the first present of each tuple is shown)
HEADLINES = {
    "steps": ("last_step",),  # train
    "samples": ("samples",),  # sample, train
    "correct": ("correct",),  # sample
    "heldout": ("evals",),  # train with evaluation: held-out accuracy first -> last
}


def shown_status(row: dict) -> str:
    """The status to display: a ``running`` row whose owner died (or whose heartbeat stopped) shows
    as ``killed`` (:func:`rldata.runs.core.effective_status`)."""
    return effective_status(row)


def _headline(summary: dict, keys: tuple[str, ...]):
    for k in keys:
        v = summary.get(k)
        if k == "evals" and isinstance(v, list) and v:  # held-out accuracy: first -> last
            first, last = v[0].get("accuracy"), v[-1].get("accuracy")
            return f"{first:.3f}" if len(v) == 1 else f"{first:.3f} -> {last:.3f}"
        if v is not None and not isinstance(v, (list, dict)):
            return str(v)
    return None


def list_runs(store: Store, *, kind: str | None = None, limit: int | None = None) -> pl.DataFrame:
    """One row per run, newest first: id, kind, status, start, duration (s) and headline numbers."""
    where = "WHERE kind = $1" if kind else ""
    q = f"SELECT run_id, kind, status, started_at, ended_at, summary, error FROM runs {where} ORDER BY started_at DESC"
    rows = store.sql(q + (f" LIMIT {int(limit)}" if limit else ""), params=[kind] if kind else None).pl()
    out = []
    for r in rows.iter_rows(named=True):
        try:
            summary = json.loads(r["summary"] or "{}")
        except ValueError:
            summary = {}
        summary = summary if isinstance(summary, dict) else {}
        end = r["ended_at"]
        out.append(
            {
                "run_id": r["run_id"],
                "kind": r["kind"],
                "status": shown_status(r),
                "started_at": f"{r['started_at']:%Y-%m-%d %H:%M:%S}" if r["started_at"] else None,
                "duration_s": round((end - r["started_at"]).total_seconds(), 1)
                if end and r["started_at"]
                else None,
                **{col: _headline(summary, keys) for col, keys in HEADLINES.items()},
                "error": (r["error"] or None) and r["error"].splitlines()[0][:120],
            }
        )
    schema = {
        "run_id": pl.String,
        "kind": pl.String,
        "status": pl.String,
        "started_at": pl.String,
        "duration_s": pl.Float64,
        **{c: pl.String for c in HEADLINES},
        "error": pl.String,
    }
    return pl.DataFrame(out, schema=schema, orient="row")
