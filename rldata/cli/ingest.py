"""``rldata ingest``: load task files (JSON lines, Parquet, CSV, a Hugging Face dataset dir) into ``tasks``,
or generate them with a reasoning-gym dataset (``--gym``) or an environment (``--env``)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import typer

from rldata.cli._common import OUT_OPT, Format, emit, lazy_store, out_path_check
from rldata.cli._options import command
from rldata.console import log
from rldata.ingest.options import IngestConfig
from rldata.outputs import write_output

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
@command(IngestConfig, file_option="--config-file")
def ingest(
    ctx: typer.Context,
    config: IngestConfig,
    path: Path = _PATH_ARG,  # IngestConfig.path (file-only otherwise): goes into config
    rejects: Path = _REJECTS_OPT,
    fmt: Format = _FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """Read tasks from a file into the store: field mapping, dedup, decontamination, one atomic commit."""
    from rldata.api import ingest as run_ingest

    summary = run_ingest(lazy_store(ctx), spec=config, progress=config.gym is None and config.env is None)
    dry_run, gym = config.dry_run, config.gym or config.env
    verb = "would add" if dry_run else "added"
    if gym is not None:
        log(
            f"{summary.path}: generated {summary.read}, {verb} {summary.added}, duplicates {summary.duplicates}"
        )
        if fmt is not None:
            emit(pl.DataFrame([summary.row()]), fmt, out)
        return
    for r in summary.rejects[:_MAX_LISTED]:
        log(f"rejected {r}")
    if len(summary.rejects) > _MAX_LISTED:
        more = "; --rejects FILE lists them all" if rejects is None else ""
        log(f"... and {len(summary.rejects) - _MAX_LISTED} more rejects{more}")
    log(  # before --rejects is written: if that write fails, what the ingest did is still said
        f"{summary.path}: read {summary.read}, {verb} {summary.added}, duplicates {summary.duplicates}, "
        f"rejected {summary.rejected}, decontaminated {summary.decontaminated}"
    )
    if rejects is not None:
        lines = (
            json.dumps({"path": r.path, "where": r.where, "field": r.field, "reason": r.reason}) + "\n"
            for r in summary.rejects
        )
        write_output(rejects, "".join(lines), name="rejects")
    if fmt is not None:
        emit(pl.DataFrame([summary.row()]), fmt, out)


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
