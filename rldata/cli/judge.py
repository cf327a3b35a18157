"""``rldata judge``: run the generative judge over stored trajectories; export its preferences."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import typer

from rldata.api import judge, judge_export
from rldata.cli._common import FORMAT_OPT, Format, emit, get_store, lazy_store
from rldata.cli._options import command
from rldata.console import log
from rldata.jobs.judge import JudgeConfig

judge_app = typer.Typer(
    help="Generative judge (GenRM): judge trajectories, export preference pairs.", no_args_is_help=True
)


@judge_app.command("run")
@command(JudgeConfig)
def run_cmd(ctx: typer.Context, config: JudgeConfig, fmt: Format = FORMAT_OPT) -> None:
    """Judge trajectories with an LLM and store each verdict and rationale in `verifications`."""
    res = judge(lazy_store(ctx), config=config)
    log(f"judge {res.mode}: {res.added} verdict row(s) added ({res.judge})")
    emit(res.verdicts, fmt, None)


# Options whose default is not a plain value live here (ruff B008).
_OUT_ARG = typer.Argument(..., help="Output directory: the pairs and rldata-manifest.json.")
_KIND_OPT = typer.Option(
    ["pairwise", "pointwise"], "--kind", help="Which judge rows to use (repeatable): pairwise, pointwise."
)


@judge_app.command("export")
def export_cmd(
    ctx: typer.Context,
    out: Path = _OUT_ARG,
    fmt: str = typer.Option("jsonl", "--format", "-f", help="File format: jsonl or parquet."),
    kind: list[str] = _KIND_OPT,
    split: str = typer.Option("train", help="Names the file: SPLIT.jsonl or SPLIT.parquet."),
) -> None:
    """Write (prompt, chosen, rejected) preference pairs from the judge's verdicts, with a manifest."""
    res = judge_export(get_store(ctx), out=out, format=fmt, kinds=tuple(kind), split=split)
    log(f"wrote {res.rows} preference pair(s) to {out}")
    emit(pl.DataFrame({"dir": [str(out)], "pairs": [res.rows]}), Format.table, None)


def register(app: typer.Typer) -> None:
    app.add_typer(judge_app, name="judge")
