"""``rldata ingest``: load task files (JSON lines, Parquet, CSV, a Hugging Face dataset dir) into ``tasks``,
or generate them with a reasoning-gym dataset (``--gym``) or an environment (``--env``)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import typer

from rldata.api import ingest as run_ingest
from rldata.cli._common import OUT_OPT, Format, emit, lazy_store, out_path_check
from rldata.cli._options import command
from rldata.console import log
from rldata.ingest.options import IngestConfig

_MAX_LISTED = 50  # rejects printed on stderr; --rejects FILE keeps them all


# Options whose type is not a plain str/int/bool live here, as sql.py's do (ruff B008).
_PATH_ARG = typer.Argument(None, help="A .jsonl/.json, .parquet, .csv/.tsv file, or a dataset directory.")
_REJECTS_OPT = typer.Option(
    None, "--rejects", help="Write every reject to this JSON-lines file.", callback=out_path_check("rejects")
)
_FORMAT_OPT = typer.Option(
    None, "--format", "-f", help="Also print the summary row on stdout: table, csv, json or parquet."
)


# --config is the reasoning-gym dataset's own config (IngestConfig.config, as it was before the
# options came from the fields); the file of ingest's fields is --config-file
@command(IngestConfig)
def ingest(
    ctx: typer.Context,
    config: IngestConfig,
    path: Path = _PATH_ARG,  # IngestConfig.path (file-only otherwise): goes into config
    rejects: Path = _REJECTS_OPT,
    fmt: Format = _FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """Read tasks from a file into the store: field mapping, dedup, decontamination, one atomic commit."""
    generated = config.gym is not None or config.env is not None
    summary = run_ingest(
        lazy_store(ctx), spec=config, progress=not generated, rejects_out=None if generated else rejects
    )
    dry_run, gym = config.dry_run, config.gym or config.env
    verb = "would add" if dry_run else "added"
    if fmt is not None:  # first: an output that cannot be written is the one line said (with what landed)
        emit(pl.DataFrame([summary.row()]), fmt, out, committed=_committed(summary, dry_run))
    if gym is not None:
        log(
            f"{summary.path}: generated {summary.read}, {verb} {summary.added}, duplicates {summary.duplicates}"
        )
        return
    for r in summary.rejects[:_MAX_LISTED]:
        log(f"rejected {r}")
    if len(summary.rejects) > _MAX_LISTED:
        more = "; --rejects FILE lists them all" if rejects is None else ""
        log(f"... and {len(summary.rejects) - _MAX_LISTED} more rejects{more}")
    log(
        f"{summary.path}: read {summary.read}, {verb} {summary.added}, duplicates {summary.duplicates}, "
        f"rejected {summary.rejected}, decontaminated {summary.decontaminated}"
    )


def _committed(summary, dry_run: bool) -> str | None:
    if dry_run or not summary.added:
        return None  # nothing was written: a failed summary is the whole story
    return f"the ingest committed {summary.added} task(s) (tasks version {summary.version})"


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
