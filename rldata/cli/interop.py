"""``rldata export``, ``rldata import-rollouts`` and ``rldata lineage``: data in and out of other trainers."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import polars as pl
import typer

from rldata.cli._common import OnError, emit, get_store
from rldata.console import log
from rldata.errors import RldataError


class PromptStyle(str, Enum):
    text = "text"
    messages = "messages"


def _format_help() -> str:
    """--format's help, from the format registry (plugins not imported: their names come at use)."""
    from rldata.interop.formats import format_names

    def names(ns: str) -> str:
        return ", ".join(format_names(ns, plugins=False))

    return (
        f"Layout: {names('selection')}; with --rollouts: {names('rollouts')}. "
        "More from installed plugins (entry point group rldata.exports)."
    )


def _check_format(value: str) -> str:
    """A usage error (exit 2) for a name no namespace knows; which namespace applies is checked later."""
    from rldata.interop.formats import NAMESPACES, UnknownFormat, format_names, get_format

    for ns in ("selection", "rollouts"):
        try:
            get_format(value, ns)
            return value
        except UnknownFormat:
            pass
    known = dict.fromkeys(n for ns in NAMESPACES if ns != "preferences" for n in format_names(ns))
    raise typer.BadParameter(f"unknown export format {value!r}; choices: {', '.join(known)}")


# Options whose type is not a plain str/int/bool live here, as sql.py's do (ruff B008).
_EXPORT_FORMAT_OPT = typer.Option(..., "--format", "-f", help=_format_help(), callback=_check_format)
_EXPORT_OUT_OPT = typer.Option(
    ..., "--out", "-o", help="Output directory (replaced if it holds an earlier export)."
)
_OPTION_OPT = typer.Option(
    None,
    "--option",
    "-O",
    help="An option of the format, KEY=VALUE, repeatable (e.g. -O answer_column=solution); "
    "docs/interop.md lists each format's.",
)
_PROMPT_STYLE_OPT = typer.Option(
    None, help="Deprecated: -O prompt_style=... (trl/openrlhf: plain text or [{role, content}] messages)."
)
_DUMP_ARG = typer.Argument(
    ..., help="A dump file, or a directory of them (veRL rollout_data_dir, TRL output_dir)."
)


def _import_format_help() -> str:
    from rldata.interop.readers import READERS

    return (
        f"{', '.join(READERS.names(plugins=False))}, or an installed plugin's "
        "(entry point group rldata.imports)."
    )


def _check_import_format(value: str) -> str:
    """A usage error (exit 2) for a name no import format has."""
    from rldata.interop.readers import READERS

    try:
        READERS.resolve(value)
    except RldataError as e:
        raise typer.BadParameter(str(e)) from None
    return value


_IMPORT_FORMAT_OPT = typer.Option(
    ..., "--format", "-f", help=_import_format_help(), callback=_check_import_format
)
_IMPORT_OPTION_OPT = typer.Option(
    None,
    "--option",
    "-O",
    help="An option of the format, KEY=VALUE, repeatable: jsonl's file key per name "
    "(-O completion=response), trl's reward_columns (-O reward_columns=acc,fmt).",
)
_ON_ERROR_OPT = typer.Option(
    OnError.fail, help="fail: a bad record aborts, nothing written; skip: import the rest."
)
_FIELD_OPT = typer.Option(
    None, "--field", help="jsonl: NAME=KEY, repeatable; names: prompt completion answer score step advantage."
)
_EXPORT_ARG = typer.Argument(..., help="An export directory, its manifest, or a file inside it.")


def _deprecated(args: dict) -> dict:
    """The deprecated per-format flags of ``export`` and their values (None: not given)."""
    from rldata.interop.export import DEPRECATED_FLAT

    return {n: args[n] for n in DEPRECATED_FLAT}


def export(
    ctx: typer.Context,
    selection: str = typer.Option(None, "--selection", "-s", help="Selection to export (its 'keep' rows)."),
    fmt: str = _EXPORT_FORMAT_OPT,
    out: Path = _EXPORT_OUT_OPT,
    bucket: str = typer.Option(None, "--bucket", "-b", help="Only tasks in this curriculum bucket."),
    split: str = typer.Option("train", help="Split name: file names and veRL's extra_info.split."),
    option: list[str] = _OPTION_OPT,
    prompt_style: PromptStyle = _PROMPT_STYLE_OPT,
    answer_column: str = typer.Option(None, help="Deprecated: -O answer_column=... (trl)."),
    input_key: str = typer.Option(None, help="Deprecated: -O input_key=... (openrlhf)."),
    label_key: str = typer.Option(None, help="Deprecated: -O label_key=... (openrlhf)."),
    data_source: str = typer.Option(None, help="Deprecated: -O data_source=... (verl)."),
    shard_rows: int = typer.Option(None, help="Deprecated: -O shard_rows=... (hf/trl)."),
    env: str = typer.Option(None, "--env", help="Deprecated: -O env=NAME[@VERSION] (verl)."),
    rollouts: bool = typer.Option(
        False,
        "--rollouts",
        help="Export stored trajectories as chat/SFT conversations "
        "(messages column; --format jsonl or hf) instead of a selection's tasks.",
    ),
    run: str = typer.Option(None, "--run", help="--rollouts: only this run's trajectories."),
    where: str = typer.Option(
        None, "--where", help="--rollouts: SQL predicate over trajectories t (and tasks k)."
    ),
    correct_only: bool = typer.Option(
        False, "--correct-only", help="--rollouts: only trajectories that passed."
    ),
) -> None:
    """Export a selection's kept tasks for veRL, TRL, OpenRLHF, HF datasets or as JSONL, with a manifest;
    or, with --rollouts, stored trajectories (multi-turn episodes included) as chat/SFT conversations."""
    from rldata.api import export as run_export
    from rldata.interop.formats import parse_option_pairs

    # the verb checks the combinations (selection or rollouts, where only with rollouts, ...)
    if rollouts:
        if option:  # -O is a CLI spelling of the selection export's options
            raise RldataError("--option goes with --selection: conversation formats have no options")
        res = run_export(
            get_store(ctx),
            out=out,
            format=fmt,
            rollouts=True,
            selection=selection,
            run_id=run,
            where=where,
            correct_only=correct_only,
            split=split,
        )
        log(f"exported {res.rows} conversations as {fmt} to {out} ({len(res.files)} files)")
        return
    given = [f"--{n.replace('_', '-')}" for n, v in _deprecated(locals()).items() if v is not None]
    if given:
        log(f"warning: {', '.join(given)} deprecated: use -O KEY=VALUE (e.g. -O answer_column=solution)")
    res = run_export(
        get_store(ctx),
        out=out,
        format=fmt,
        selection=selection,
        run_id=run,
        where=where,
        correct_only=correct_only,
        bucket=bucket,
        split=split,
        options=parse_option_pairs(option),
        prompt_style=prompt_style.value if prompt_style is not None else None,
        answer_column=answer_column,
        input_key=input_key,
        label_key=label_key,
        data_source=data_source,
        shard_rows=shard_rows,
        env=env,
    )
    log(
        f"exported {res.rows} tasks of selection {selection!r} as {fmt} to {out} "
        f"({len(res.files)} files, content {res.manifest['content_hash'][:23]}...)"
    )


def _field_map(pairs: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for p in pairs or []:
        name, sep, key = p.partition("=")
        if not sep or not name.strip() or not key.strip():
            raise RldataError(f"--field {p!r}: expected NAME=KEY, e.g. completion=response")
        out.append((name.strip(), key.strip()))
    return tuple(out)


def import_rollouts_cmd(
    ctx: typer.Context,
    path: Path = _DUMP_ARG,
    fmt: str = _IMPORT_FORMAT_OPT,
    on_error: OnError = _ON_ERROR_OPT,
    model: str = typer.Option("unknown", help="Model name recorded on the trajectories."),
    domain: str = typer.Option("math", help="Domain of the tasks the import adds."),
    source: str = typer.Option(None, help="Source of added tasks (default import:<format>)."),
    run_id: str = typer.Option(None, help="Run id (default: derived from the dump's path)."),
    option: list[str] = _IMPORT_OPTION_OPT,
    field: list[str] = _FIELD_OPT,
    reward_cols: str = typer.Option(
        None,
        help="trl: comma-separated reward columns (default: all numeric ones); same as -O reward_columns=...",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import rollouts logged by veRL, TRL or any JSONL into trajectories and verifications."""
    from rldata.interop.formats import parse_option_pairs
    from rldata.interop.imports import ImportSpec, import_rollouts

    try:
        spec = ImportSpec(
            format=fmt,
            options=parse_option_pairs(option),
            on_error=on_error.value,
            model=model,
            domain=domain,
            source=source,
            run_id=run_id,
            field_map=_field_map(field),
            reward_columns=tuple(c.strip() for c in reward_cols.split(",") if c.strip())
            if reward_cols
            else (),
        )
    except ValueError as e:
        raise RldataError(str(e)) from None
    result = import_rollouts(get_store(ctx, create=True), path=path, spec=spec)
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
    from rldata.interop.lineage import read_manifest, verify

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
