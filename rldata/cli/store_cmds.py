"""``rldata tables`` and ``rldata compact``: look at and maintain the store."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import typer

from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store
from rldata.console import log


def tables(ctx: typer.Context, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT) -> None:
    """List the store's tables with row counts, Delta versions and file counts."""
    emit(get_store(ctx).summary(), fmt, out)


def compact(
    ctx: typer.Context,
    retention_hours: int = typer.Option(
        168, help="Vacuum only files retired at least this long ago (readers of old versions need them)."
    ),
    fmt: Format = FORMAT_OPT,
) -> None:
    """Optimize (merge small files) and vacuum every table."""
    store = get_store(ctx)
    stats = store.compact(retention_hours=retention_hours)
    log(f"compacted {len(stats)} tables in {store.root}")
    emit(pl.DataFrame([{"table": k, **v} for k, v in stats.items()]), fmt)


def register(app: typer.Typer) -> None:
    app.command("tables")(tables)
    app.command("compact")(compact)
