"""``rldata judge``: run the generative judge over stored trajectories; export its preferences."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import typer

from rldata.cli._common import FORMAT_OPT, Format, emit, get_store, lazy_store
from rldata.console import log

judge_app = typer.Typer(
    help="Generative judge (GenRM): judge trajectories, export preference pairs.", no_args_is_help=True
)


@judge_app.command("run")
def run_cmd(
    ctx: typer.Context,
    mode: str = typer.Option(
        "pointwise", "--mode", help="pointwise (VERDICT: 1/0) or pairwise (VERDICT: A/B)."
    ),
    model: str = typer.Option(
        None,
        "--model",
        help="Judge model directory, or a hub id found in the local Hugging Face cache (default: the bundled model).",
    ),
    run_id: str = typer.Option(None, "--run-id", help="Only trajectories of this run."),
    limit: int = typer.Option(None, "--limit", help="Judge at most this many trajectories (pairs)."),
    max_tokens: int = typer.Option(256, "--max-tokens", help="Judge output budget."),
    max_model_len: int = typer.Option(4096, "--max-model-len", help="Engine context length."),
    no_swap: bool = typer.Option(False, "--no-swap", help="Pairwise: judge each pair in one order only."),
    fmt: Format = FORMAT_OPT,
) -> None:
    """Judge trajectories with an LLM and store each verdict and rationale in `verifications`."""
    from rldata.api import judge

    res = judge(
        lazy_store(ctx),
        mode=mode,
        model=model,
        run_id=run_id,
        limit=limit,
        max_tokens=max_tokens,
        max_model_len=max_model_len,
        swap=not no_swap,
    )
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
    from rldata.api import judge_export

    res = judge_export(get_store(ctx), out=out, format=fmt, kinds=tuple(kind), split=split)
    log(f"wrote {res.rows} preference pair(s) to {out}")
    emit(pl.DataFrame({"dir": [str(out)], "pairs": [res.rows]}), Format.table, None)


def register(app: typer.Typer) -> None:
    app.add_typer(judge_app, name="judge")
