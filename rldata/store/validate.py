"""Turn rows (dicts, Arrow, Polars) into an Arrow table of exactly a table's schema, or fail.

A failure names the table, the first offending row (0-based, in the order given) and the field;
nothing is written by the caller when this raises.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rldata.errors import SchemaError
from rldata.schemas import TableSchema

__all__ = ["CONTROL_RULE", "CONTROL_TEXT", "conform", "control_char"]

# Prompts and answers may hold tab, newline and CR-LF line ends; any other C0 control character
# (NUL, backspace, escape, a lone carriage return that overwrites a line on a terminal...) is refused
# where the text comes in (docs/ingest.md, "Control characters"), naming the file, line and field.
# CONTROL_TEXT is the same rule for Polars (Rust regex: no look-ahead).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]|\r(?!\n)")
CONTROL_TEXT = r"[\x00-\x08\x0b\x0c\x0e-\x1f]|\r([^\n]|$)"
CONTROL_RULE = "C0 control characters other than tab, newline and CR-LF are refused (docs/ingest.md)"


def control_char(text: str | None) -> str | None:
    """Why ``text`` is refused (its first control character, by code point), or None."""
    m = _CONTROL.search(text) if text else None
    if m is None:
        return None
    return f"control character U+{ord(m.group()[0]):04X}: {CONTROL_RULE}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _type_name(v: Any) -> str:
    return type(v).__name__


def _strict_array(values: list, type_: pa.DataType) -> pa.Array:
    """pa.array, but refusing the silent conversions pyarrow allows (str <- int, int <- float)."""
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        for i, v in enumerate(values):
            if v is not None and not isinstance(v, str):
                raise _BadValue(i, f"expected string, got {_type_name(v)} {v!r:.60}")
    elif pa.types.is_integer(type_):
        for i, v in enumerate(values):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise _BadValue(i, f"expected integer, got {_type_name(v)} {v!r:.60}")
    elif pa.types.is_floating(type_):
        for i, v in enumerate(values):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise _BadValue(i, f"expected number, got {_type_name(v)} {v!r:.60}")
    elif pa.types.is_boolean(type_):
        for i, v in enumerate(values):
            if v is not None and not isinstance(v, bool):
                raise _BadValue(i, f"expected boolean, got {_type_name(v)} {v!r:.60}")
    try:
        return pa.array(values, type=type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
        for i, v in enumerate(values):  # find the first row that does not convert
            try:
                pa.array([v], type=type_)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e1:
                raise _BadValue(i, f"expected {type_}, got {_type_name(v)} {v!r:.60} ({e1})") from None
        raise _BadValue(0, str(e)) from None


class _BadValue(Exception):
    def __init__(self, row: int, reason: str):
        super().__init__(reason)
        self.row, self.reason = row, reason


def _from_rows(ts: TableSchema, rows: list[Mapping[str, Any]], row_offset: int) -> pa.Table:
    known = set(ts.columns)
    now = _now()
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise SchemaError(ts.name, i + row_offset, None, f"expected a record, got {_type_name(r)}")
        extra = [k for k in r if k not in known]
        if extra:
            raise SchemaError(ts.name, i + row_offset, extra[0], "unknown field")
    arrays = []
    for f in ts.schema:
        values = [r.get(f.name) for r in rows]
        if f.name in ts.defaults_now:
            values = [now if v is None else v for v in values]
        default = dict(ts.defaults).get(f.name)
        if default is not None:
            values = [default if v is None else v for v in values]
        if not f.nullable:
            for i, v in enumerate(values):
                if v is None:
                    raise SchemaError(ts.name, i + row_offset, f.name, "missing required field")
        try:
            arrays.append(_strict_array(values, f.type))
        except _BadValue as e:
            raise SchemaError(ts.name, e.row + row_offset, f.name, e.reason) from None
    return pa.Table.from_arrays(arrays, schema=ts.schema)


def _from_arrow(ts: TableSchema, table: pa.Table, row_offset: int) -> pa.Table:
    known = set(ts.columns)
    extra = [c for c in table.column_names if c not in known]
    if extra:
        raise SchemaError(ts.name, None, extra[0], "unknown field")
    n = table.num_rows
    cols = []
    for f in ts.schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            if not col.type.equals(f.type):
                if not _compatible(col.type, f.type):
                    raise SchemaError(
                        ts.name, None, f.name, f"expected {f.type}, got column of type {col.type}"
                    )
                try:
                    col = pc.cast(col, f.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    # locate the offending row through the strict per-value path
                    try:
                        _strict_array(col.to_pylist(), f.type)
                    except _BadValue as b:
                        raise SchemaError(ts.name, b.row + row_offset, f.name, b.reason) from None
                    raise SchemaError(ts.name, None, f.name, str(e)) from None
        elif f.name in ts.defaults_now:
            col = pa.repeat(pa.scalar(_now(), type=f.type), n)  # not a list of n datetimes: 1M rows took ~1 s
        else:
            col = pa.nulls(n, type=f.type)
        if f.name in ts.defaults_now and col.null_count:
            col = pc.fill_null(col, pa.scalar(_now(), type=f.type))
        if dict(ts.defaults).get(f.name) is not None and col.null_count:
            col = pc.fill_null(col, pa.scalar(dict(ts.defaults)[f.name], type=f.type))
        if not f.nullable and col.null_count:
            first = pc.index(pc.is_null(col), True).as_py()
            reason = (
                "missing required field" if f.name not in table.column_names else "null in required field"
            )
            raise SchemaError(ts.name, first + row_offset, f.name, reason)
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=ts.schema)


def _has_text(t: pa.DataType) -> bool:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return True
    return any(_has_text(t.field(i).type) for i in range(t.num_fields))


def _check_utf8(ts: TableSchema, table: pa.Table, row_offset: int) -> pa.Table:
    """Refuse text that is not valid UTF-8 (Arrow buffers from files are not checked on read, and one
    bad value in a Delta table breaks every later read, merge and compact of it)."""
    for f in ts.schema:
        if not _has_text(f.type):
            continue
        start = 0
        for chunk in table.column(f.name).chunks:
            try:
                chunk.validate(full=True)
            except pa.ArrowInvalid as e:
                m = re.search(r"string index (\d+)", str(e))
                row = start + int(m.group(1)) + row_offset if m and not f.type.num_fields else None
                raise SchemaError(ts.name, row, f.name, "text is not valid UTF-8") from None
            start += len(chunk)
    return table


def _check_finite(ts: TableSchema, table: pa.Table, row_offset: int) -> pa.Table:
    """Refuse NaN and infinity in the columns a schema marks finite: a reward of inf or NaN would
    rank above every real one (or poison every mean it enters)."""
    import pyarrow.compute as pc

    for name in ts.finite:
        col = table.column(name)
        bad = pc.invert(pc.fill_null(pc.is_finite(col), True))
        if pc.any(bad).as_py():
            row = pc.index(bad, True).as_py()
            value = col[row].as_py()
            raise SchemaError(ts.name, row + row_offset, name, f"must be a finite number, got {value}")
    return table


def _compatible(src: pa.DataType, dst: pa.DataType) -> bool:
    """Casts that cannot change meaning: widening numbers, string flavours, timestamp units."""
    t = pa.types
    if t.is_null(src):
        return True
    if (t.is_string(dst) or t.is_large_string(dst)) and (
        t.is_string(src) or t.is_large_string(src) or t.is_string_view(src)
    ):
        return True
    if t.is_integer(dst) and t.is_integer(src):
        return True
    if t.is_floating(dst) and (t.is_floating(src) or t.is_integer(src)):
        return True
    if t.is_timestamp(dst) and t.is_timestamp(src):
        return True
    if t.is_list(dst) and (t.is_list(src) or t.is_large_list(src)):
        return _compatible(src.value_type, dst.value_type)
    if t.is_struct(dst) and t.is_struct(src):
        names = {src.field(i).name: src.field(i).type for i in range(src.num_fields)}
        return set(names) <= {dst.field(i).name for i in range(dst.num_fields)} and all(
            _compatible(names[k], dst.field(k).type) for k in names
        )
    return src.equals(dst)


def conform(ts: TableSchema, data: Any, *, row_offset: int = 0) -> pa.Table:
    """Validate ``data`` against ``ts`` and return an Arrow table with exactly its schema.

    ``data``: a list of dicts, a ``pyarrow.Table`` / ``RecordBatch``, or a Polars DataFrame.
    Unknown fields, missing required fields, nulls in required fields and wrong types raise
    :class:`rldata.errors.SchemaError`.
    """
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return _check_finite(ts, _check_utf8(ts, _from_arrow(ts, data, row_offset), row_offset), row_offset)
    if hasattr(data, "to_arrow") and hasattr(data, "schema"):  # polars DataFrame
        table = _check_utf8(ts, _from_arrow(ts, data.to_arrow(), row_offset), row_offset)
        return _check_finite(ts, table, row_offset)
    if isinstance(data, Mapping):
        data = [data]
    if isinstance(data, Iterable):
        return _check_finite(ts, _from_rows(ts, list(data), row_offset), row_offset)
    raise TypeError(f"cannot write {type(data).__name__} to table {ts.name!r}")
