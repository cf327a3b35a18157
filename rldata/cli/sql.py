"""``rldata sql``: DuckDB SQL over every table."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import typer

from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store
from rldata.sql_guard import check_read_only, sql_error


def _parse_as_of(value: str | None):
    """'3' -> 3, an ISO timestamp -> itself, 'tasks=3,passrates=5' -> a dict."""
    if value is None:
        return None
    if "=" in value:
        out = {}
        for part in value.split(","):
            name, _, ver = part.partition("=")
            out[name.strip()] = int(ver) if ver.strip().isdigit() else ver.strip()
        return out
    return int(value) if value.isdigit() else value


def sql(
    ctx: typer.Context,
    query: str = typer.Argument(
        ..., help="SQL; every table is a view under its own name (tasks, trajectories, ...)."
    ),
    fmt: Format = FORMAT_OPT,
    out: Path = OUT_OPT,
    as_of: str = typer.Option(
        None,
        "--as-of",
        help="Time travel: a version (3), an ISO timestamp, or per table (tasks=3,passrates=5).",
    ),
    limit: int = typer.Option(None, help="Print at most this many rows."),
) -> None:
    """Run a SQL query over the store and print the rows."""
    import duckdb

    check_read_only(query)
    rel = get_store(ctx).sql(query, as_of=_parse_as_of(as_of))
    try:  # a relation runs when fetched: errors of the run (a refused file, a bad cast) come here
        df = pl.from_arrow(rel.to_arrow_table()) if rel is not None else pl.DataFrame()
    except duckdb.Error as e:
        raise sql_error(e) from None
    if isinstance(df, pl.Series):
        df = df.to_frame()
    if limit is not None:
        df = df.head(limit)
    emit(df, fmt, out)


def register(app: typer.Typer) -> None:
    app.command("sql")(sql)
