"""Filtered reads of a store table that work on every file the store writes.

Why not ``store.scan(name).filter(pl.col(c) == "x")``: files written by a Delta merge (``upsert``,
``append(dedupe=True)``) hold string columns as ``string_view``, and pyarrow (26 here) has no
``string == string_view`` kernel, so a pushed-down string equality fails as soon as a file's
min/max statistics differ ("Function 'equal' has no kernel matching input types").  Casting the
column to ``string`` in the filter binds against either file type.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

__all__ = ["first_match", "read_where"]

_STATS_MAX_LEN = 32  # Delta truncates string statistics; longer values cannot be ruled out by them


def read_where(
    store,
    name: str,
    *,
    version: int | None = None,
    columns: list[str] | None = None,
    where: pads.Expression | None = None,
    **equals: str,
) -> pl.DataFrame:
    """Rows of ``name`` whose string columns equal ``equals`` (and match ``where``), as Polars.

    An old ``version`` may predate a column's rename (:data:`rldata.store.migrate.RENAMED`): ``columns`` and
    ``equals`` use today's names and are read under the name that version had (``where`` is not mapped).
    """
    dataset = store.dataset(name, version=version)
    old = {}
    if version is not None:
        # start-up: `rldata tables` does not load rldata.store.migrate
        from rldata.store.migrate import renamed_since

        have = set(dataset.schema.names)
        old = {new: was for new, was in renamed_since(name).items() if new not in have and was in have}
    expr = where
    for col, val in equals.items():
        e = pads.field(old.get(col, col)).cast(pa.string()) == pa.scalar(val, pa.string())
        expr = e if expr is None else expr & e
    table = dataset.to_table(columns=[old.get(c, c) for c in columns] if columns else columns, filter=expr)
    if old:
        back = {was: new for new, was in old.items()}
        table = table.rename_columns([back.get(c, c) for c in table.column_names])
    return pl.from_arrow(table)


def first_match(store, name: str, column: str, *, key: str, value: str) -> Any:
    """``column`` of the first row whose ``key`` equals ``value``, or None; decodes one batch or so.

    For a value repeated on every row of a large group (a selection's ``params``): a dataset
    scan would decode the whole column chunk, a million strings, to return one.
    """
    dtable = store.table(name)
    stats = pa.table(dtable.get_add_actions(flatten=True))
    lo = stats.column(f"min.{key}").to_pylist() if f"min.{key}" in stats.column_names else None
    hi = stats.column(f"max.{key}").to_pylist() if f"max.{key}" in stats.column_names else None
    for i, uri in enumerate(dtable.file_uris()):
        if (
            lo
            and hi
            and lo[i] is not None
            and hi[i] is not None
            and len(value) < _STATS_MAX_LEN
            and not lo[i] <= value <= hi[i]
        ):
            continue  # the file's statistics rule it out
        fs, path = pafs.FileSystem.from_uri(uri)
        with fs.open_input_file(path) as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=4096, columns=[key, column]):
                hits = pc.equal(batch.column(0).cast(pa.string()), value)
                idx = pc.index(hits, True).as_py()
                if idx >= 0:
                    return batch.column(1)[idx].as_py()
    return None
