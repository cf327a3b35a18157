"""``rldata export``, ``rldata import-rollouts`` and ``rldata lineage``: data in and out of other trainers."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import typer

from rldata.api import export as run_export
from rldata.cli._common import emit, get_store
from rldata.cli._options import command
from rldata.console import log
from rldata.errors import RldataError
from rldata.interop.imports import import_rollouts
from rldata.interop.lineage import read_manifest, verify
from rldata.interop.options import ExportConfig, ImportConfig

_DUMP_ARG = typer.Argument(
    ..., help="A dump file, or a directory of them (veRL rollout_data_dir, TRL output_dir)."
)
_EXPORT_ARG = typer.Argument(..., help="An export directory, its manifest, or a file inside it.")


@command(ExportConfig)
def export(ctx: typer.Context, config: ExportConfig) -> None:
    """Export a selection's kept tasks for veRL, TRL, OpenRLHF, HF datasets or as JSONL, with a manifest;
    or, with --rollouts, stored trajectories (multi-turn episodes included) as chat/SFT conversations."""
    c = config
    old = c.deprecated_given()
    if old and not c.rollouts:
        given = ", ".join(f"--{n.replace('_', '-')}" for n in old)
        log(f"warning: {given} deprecated: use -O KEY=VALUE (e.g. -O answer_column=solution)")
    res = run_export(get_store(ctx), config=c)
    if c.rollouts:
        log(f"exported {res.rows} conversations as {c.format} to {c.out} ({len(res.files)} files)")
        return
    log(
        f"exported {res.rows} tasks of selection {c.selection!r} as {c.format} to {c.out} "
        f"({len(res.files)} files, content {res.manifest['content_hash'][:23]}...)"
    )
    left = (res.manifest.get("flags") or {}).get("left_out") or {}
    if left:
        log(
            "left out as flagged (--include-flagged exports them): "
            + ", ".join(f"{k} {v}" for k, v in left.items())
        )


@command(ImportConfig)
def import_rollouts_cmd(
    ctx: typer.Context,
    config: ImportConfig,
    path: Path = _DUMP_ARG,  # ImportConfig.path: goes into config
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import rollouts logged by veRL, TRL or any JSONL into trajectories and verifications."""
    result = import_rollouts(get_store(ctx, create=True), config)
    for msg in result.errors:
        log(f"skipped: {msg}")
    if result.skipped > len(result.errors):
        log(f"skipped {result.skipped - len(result.errors)} more bad records")
    summary = {k: v for k, v in result.to_dict().items() if k != "errors"}
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        emit(pl.DataFrame([summary]))


def lineage_cmd(
    path: Path = _EXPORT_ARG,
    as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
    check: bool = typer.Option(False, "--check", help="Exit 1 if a file changed since the export."),
) -> None:
    """Print an export's manifest: store versions, selection, filter parameters, counts and hashes."""
    manifest = read_manifest(path)
    problems = verify(path)
    if as_json:
        typer.echo(
            json.dumps({**manifest, "verified": not problems, "problems": problems}, indent=2, default=str)
        )
    else:
        rows = [
            {"key": k, "value": v if isinstance(v, str) else json.dumps(v, default=str)}
            for k, v in manifest.items()
            if k != "files"
        ]
        rows += [
            {"key": f"file {f['path']}", "value": f"{f['bytes']} bytes sha256:{f['sha256'][:16]}"}
            for f in manifest.get("files", [])
        ]
        rows.append({"key": "verified", "value": "ok" if not problems else "; ".join(problems)})
        emit(pl.DataFrame(rows))
    if check and problems:
        raise RldataError(f"{path}: export changed since it was written: {problems[0]}")


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("import-rollouts")(import_rollouts_cmd)
    app.command("lineage")(lineage_cmd)
