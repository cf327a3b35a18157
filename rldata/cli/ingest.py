"""``rldata ingest``: load task files (JSON lines, Parquet, CSV, a Hugging Face dataset dir) into ``tasks``,
or generate them with a reasoning-gym dataset (``--gym``)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import polars as pl
import typer

from rldata.cli._common import OUT_OPT, Format, OnError, emit, get_store, lazy_store, out_path_check
from rldata.console import log
from rldata.errors import RldataError

_MAX_LISTED = 50  # rejects printed on stderr; --rejects FILE keeps them all


class Preset(str, Enum):
    gsm8k = "gsm8k"
    verl = "verl"
    math = "math"


class AnswerFormat(str, Enum):
    text = "text"
    gsm8k = "gsm8k"
    boxed = "boxed"


# Options whose type is not a plain str/int/bool live here, as sql.py's do (ruff B008).
_PATH_ARG = typer.Argument(None, help="A .jsonl/.json, .parquet, .csv/.tsv file, or a dataset directory.")
_PRESET_OPT = typer.Option(None, "--preset", help="Column layout: gsm8k, verl or math.")
_ANSWER_FORMAT_OPT = typer.Option(
    None, help="How to read the answer: text, gsm8k (#### N) or boxed (last \\boxed{})."
)
_ON_ERROR_OPT = typer.Option(
    OnError.fail,
    help="fail: a bad record stops the ingest, nothing is written; skip: the rest lands and the "
    "rejects are listed.",
)
_DECONTAMINATE_OPT = typer.Option(None, help="Eval file: drop tasks sharing a word n-gram with its prompts.")
_REJECTS_OPT = typer.Option(
    None, "--rejects", help="Write every reject to this JSON-lines file.", callback=out_path_check("rejects")
)
_LIMIT_OPT = typer.Option(
    None,
    "--limit",
    help="Raise or lower a bound on one record, NAME=N (repeatable): depth (JSON nesting, default 100), "
    "line_bytes (16 MiB), field_bytes (4 MiB), prompt_chars (1,000,000).",
)
_FORMAT_OPT = typer.Option(
    None, "--format", "-f", help="Also print the summary row on stdout: table, csv, json or parquet."
)


def ingest(
    ctx: typer.Context,
    path: Path = _PATH_ARG,
    preset: Preset = _PRESET_OPT,
    sample: str = typer.Option(
        None,
        "--sample",
        help="Ingest a bundled sample instead of PATH: arith, arith-heldout, gsm8k, gsm8k-test.",
    ),
    prompt_field: str = typer.Option(None, help="Column holding the prompt (text or chat messages)."),
    answer_field: str = typer.Option(None, help="Column holding the answer; a.b reaches into a struct."),
    answer_format: AnswerFormat = _ANSWER_FORMAT_OPT,
    category_field: str = typer.Option(None, help="Column holding the category."),
    source: str = typer.Option(
        None,
        help="Source name for every task (default: the file's source column, "
        "the preset's name or the file stem).",
    ),
    domain: str = typer.Option(
        None, help="Domain for every task (default: the file's domain column, else math)."
    ),
    on_error: OnError = _ON_ERROR_OPT,
    decontaminate: Path = _DECONTAMINATE_OPT,
    ngram: int = typer.Option(13, min=1, help="n-gram length (words) for --decontaminate."),
    gym: str = typer.Option(
        None,
        "--gym",
        help="Generate tasks with this reasoning-gym dataset instead of "
        "reading PATH (needs the gym extra); see docs/environments.md.",
    ),
    env: str = typer.Option(
        None,
        "--env",
        help="Generate tasks with this registered environment's own reset (OpenEnv) instead of "
        "reading PATH; see docs/environments.md.",
    ),
    n: int = typer.Option(None, "--n", help="--gym, --env: how many entries to generate."),
    config: str = typer.Option(
        None, "--config", help="--gym: the dataset's config, a JSON object (e.g. '{\"min_terms\": 2}')."
    ),
    seed: int = typer.Option(0, "--seed", help="--gym: the dataset's seed; --env: the first reset seed."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Read, check and count, but write nothing."),
    limit: list[str] = _LIMIT_OPT,
    rejects: Path = _REJECTS_OPT,
    fmt: Format = _FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """Read tasks from a file into the store: field mapping, dedup, decontamination, one atomic commit."""
    from rldata.api import ingest as run_ingest
    from rldata.ingest import Limits

    if env is not None:  # tasks from an environment's own reset (OpenEnv): its own verb
        from rldata.ingest.env import ingest_env

        if any(x is not None for x in (path, sample, gym)):
            raise RldataError("give one of PATH, --sample NAME, --gym NAME or --env NAME", field="env")
        if n is None or config is not None:
            raise RldataError("--env needs --n (how many tasks to generate) and takes no --config", field="n")
        summary = ingest_env(get_store(ctx, create=True), env, n=n, seed=seed, dry_run=dry_run)
        verb = "would add" if dry_run else "added"
        log(
            f"{summary.path}: generated {summary.read}, {verb} {summary.added}, duplicates {summary.duplicates}"
        )
        if fmt is not None:
            emit(pl.DataFrame([summary.row()]), fmt, out, committed=_committed(summary, dry_run))
        return
    limits = Limits.parse(limit)  # before the store is opened: a bad --limit creates nothing
    cfg = None
    if config is not None:  # text to a value; the verb checks it is a mapping, and every combination
        try:
            cfg = json.loads(config)
        except ValueError as e:
            raise RldataError(f"not valid JSON: {e}", field="config") from None
        except RecursionError:  # thousands of nested brackets: Python's parser recurses
            raise RldataError("not valid JSON: nested too deeply", field="config") from None
    summary = run_ingest(
        lazy_store(ctx),
        path=path,
        sample=sample,
        gym=gym,
        n=n,
        config=cfg,
        seed=seed,
        preset=preset.value if preset else None,
        prompt_field=prompt_field,
        answer_field=answer_field,
        answer_format=answer_format.value if answer_format else None,
        category_field=category_field,
        source=source,
        domain=domain,
        on_error=on_error.value,
        decontaminate=decontaminate,
        ngram=ngram,
        dry_run=dry_run,
        progress=gym is None,
        limits=limits,
        rejects_out=None if gym is not None else rejects,
    )
    verb = "would add" if dry_run else "added"
    if gym is not None:
        log(
            f"{summary.path}: generated {summary.read}, {verb} {summary.added}, duplicates {summary.duplicates}"
        )
        if fmt is not None:
            emit(pl.DataFrame([summary.row()]), fmt, out, committed=_committed(summary, dry_run))
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
    if fmt is not None:
        emit(pl.DataFrame([summary.row()]), fmt, out, committed=_committed(summary, dry_run))


def _committed(summary, dry_run: bool) -> str | None:
    if dry_run or not summary.added:
        return None  # nothing was written: a failed summary is the whole story
    return f"the ingest committed {summary.added} task(s) (tasks version {summary.version})"


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
