"""Keyed writes the quality tables need beyond the store's append and upsert, each ONE Delta commit.

- :func:`replace_rows`: upsert new findings and delete the stale ones (rows a rerun checked again and no
  longer found) in one merge, so a rerun never duplicates a row and never leaves a half-updated table.
- :func:`delete_tasks`: remove tasks by id (``--action drop``), a merge that deletes the matched rows.

Every row written is validated against its table's schema first (:func:`rldata.validate.conform`).
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from rldata.errors import RldataError
from rldata.schemas import get as table_schema
from rldata.store.validate import conform

__all__ = ["delete_tasks", "new_or_changed", "replace_rows"]

_TRIES = 10
_KEEP = "__keep"


def _merge(store, name: str, source: pa.Table, build) -> dict:
    """Run ``build(merger).execute()`` against the newest version, retrying on a concurrent commit."""
    last = None
    for _ in range(_TRIES):
        merger = store.table(name).merge(source, _on(table_schema(name)), source_alias="s", target_alias="t")
        try:
            return build(merger).execute()
        except Exception as e:  # a concurrent writer: read the new version and merge again
            if "conflict" not in str(e).lower() and "commit" not in type(e).__name__.lower():
                raise
            last = e
    raise RldataError(f"could not commit to {name!r} after {_TRIES} tries: {last}")


def _on(ts) -> str:
    return " AND ".join(f"t.{k} = s.{k}" for k in ts.key)


def new_or_changed(store, name: str, rows: pl.DataFrame, same: list[str]) -> pl.DataFrame:
    """The rows of ``rows`` whose key is not stored yet, or whose ``same`` columns differ from the
    stored row's: a rerun that finds what an earlier run found writes nothing (and keeps the earlier
    row's run_id and created_at)."""
    key = list(table_schema(name).key)
    if not rows.height:
        return rows
    stored = store.scan(name).select(*key, *same).collect().join(rows.select(key), on=key, how="semi")
    if not stored.height:
        return rows
    cols = [*key, *same]
    return rows.join(stored.select(cols), on=cols, how="anti", nulls_equal=True)


def replace_rows(store, name: str, rows: pl.DataFrame, stale: pl.DataFrame) -> tuple[int, int]:
    """Upsert ``rows`` into table ``name`` and delete the rows keyed by ``stale`` (key columns only),
    in one commit.  Returns (rows written, rows deleted)."""
    ts = table_schema(name)
    if not rows.height and not stale.height:
        return 0, 0
    new = conform(ts, rows.to_arrow()) if rows.height else ts.schema.empty_table()
    loose = pa.schema([f.with_nullable(True) for f in ts.schema])  # stale rows carry their key only
    gone = stale.select(list(ts.key)).unique().to_arrow()
    gone = pa.table(
        {f.name: gone[f.name] if f.name in ts.key else pa.nulls(gone.num_rows, f.type) for f in ts.schema},
        schema=loose,
    )
    source = pa.concat_tables([new.cast(loose), gone]).append_column(
        _KEEP, pa.array([True] * new.num_rows + [False] * gone.num_rows, pa.bool_())
    )
    cols = {c: f"s.{c}" for c in ts.columns}

    def build(m):
        return (
            m.when_matched_update(updates=cols, predicate=f"s.{_KEEP}")
            .when_matched_delete(predicate=f"NOT s.{_KEEP}")
            .when_not_matched_insert(updates=cols, predicate=f"s.{_KEEP}")
        )

    stats = _merge(store, name, source, build)
    written = int(stats.get("num_target_rows_inserted", 0)) + int(stats.get("num_target_rows_updated", 0))
    return written, int(stats.get("num_target_rows_deleted", 0))


def delete_tasks(store, task_ids: list[str]) -> int:
    """Delete the tasks ``task_ids`` in one commit; returns how many rows went."""
    if not task_ids:
        return 0
    source = pa.table({"task_id": pa.array(sorted(set(task_ids)), pa.string())})
    stats = _merge(store, "tasks", source, lambda m: m.when_matched_delete())
    return int(stats.get("num_target_rows_deleted", 0))
