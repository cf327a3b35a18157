"""``rldata tables`` and ``rldata compact``: look at and maintain the store."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import typer

from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store
from rldata.console import log
from rldata.errors import RldataError


def tables(ctx: typer.Context, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT) -> None:
    """List the store's tables with row counts, Delta versions and file counts."""
    store = get_store(ctx)
    emit(store.summary(), fmt, out)
    if store.damaged:  # the readable tables are listed above; the exit code says not all are
        more = f" (and {len(store.damaged) - 1} more damaged)" if len(store.damaged) > 1 else ""
        raise RldataError(next(iter(store.damaged.values())) + more)


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


def doctor(
    ctx: typer.Context,
    repair: bool = typer.Option(False, "--repair", help="Fix what can be fixed safely (see docs/store.md)."),
    fmt: Format = FORMAT_OPT,
) -> None:
    """Check every table and the invariants between them; exit 1 while a problem remains."""
    # start-up: `rldata tables` does not load rldata.doctor
    from rldata.doctor.core import doctor as run_doctor

    store = get_store(ctx)
    found = run_doctor(store, repair=repair)
    cols = {
        "check": pl.String,
        "table": pl.String,
        "count": pl.Int64,
        "detail": pl.String,
        "repaired": pl.Boolean,
    }
    emit(pl.DataFrame([f.row() for f in found], schema=cols), fmt)
    problems = [f for f in found if f.problem]
    left = [f for f in problems if not f.repaired]
    fixed = len(problems) - len(left)
    listed = len(found) - len(problems)
    log(
        f"doctor: {len(problems)} problem(s) found in {store.root}"
        + (f", {fixed} repaired" if repair else "")
        + (f" ({listed} listed for information)" if listed else "")
    )
    if left:
        hint = "" if repair else "; rldata doctor --repair fixes what it safely can"
        raise RldataError(
            f"{len(left)} problem(s) remain ({', '.join(sorted({f.check for f in left}))}){hint}"
        )


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
    app.command("tables")(tables)
    app.command("compact")(compact)
