"""``rldata decontaminate``, ``rldata dedup``, ``rldata lint`` and ``rldata blast-radius``: data quality
as tables (docs/quality.md)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import typer

from rldata.api import blast_radius as run_blast_radius
from rldata.api import decontaminate as run_decontaminate
from rldata.api import dedup as run_dedup
from rldata.api import lint as run_lint
from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, lazy_store
from rldata.cli._options import command
from rldata.console import log
from rldata.quality.config import BlastConfig, DecontaminateConfig, DedupConfig, LintConfig


def _written(res) -> str:
    return "dry run, nothing written" if res.dry_run else f"run {res.run_id}"


@command(DecontaminateConfig)
def decontaminate(
    ctx: typer.Context, config: DecontaminateConfig, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT
) -> None:
    """Match the tasks against an eval pack (n-gram, coverage, MinHash) and record every match with its
    score and span in the contamination table; flagged tasks are left out downstream (or dropped)."""
    res = run_decontaminate(lazy_store(ctx), config=config, progress=True)
    methods = ", ".join(f"{m} {n}" for m, n in res.by_method.items()) or "none"
    verb = "dropped" if res.action == "drop" else "flagged"
    log(
        f"decontaminate {res.pack!r} (version {res.pack_version}, {res.items} items): {res.flagged} of "
        f"{res.tasks} tasks {verb} (by method: {methods}) in {res.seconds:.1f}s; {_written(res)}"
    )
    if res.stale:
        log(f"{res.stale} match(es) of an earlier run no longer found: removed")
    emit(res.rows, fmt, out)


@command(DedupConfig)
def dedup(ctx: typer.Context, config: DedupConfig, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT) -> None:
    """Cluster near-duplicate tasks (MinHash) and keep one per cluster by a stated rule: source
    priority, then the oldest; the others are flagged (or dropped)."""
    res = run_dedup(lazy_store(ctx), config=config)
    verb = "dropped" if res.action == "drop" else "flagged"
    log(
        f"dedup --near: {res.clusters} cluster(s) among {res.tasks} tasks, {res.duplicates} near-duplicate(s) "
        f"{verb} (keep: source priority {res.rule['source_priority'] or '(none)'}, then oldest); {_written(res)}"
    )
    emit(res.rows, fmt, out)


@command(LintConfig)
def lint(ctx: typer.Context, config: LintConfig, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT) -> None:
    """Check the tasks: format rules, the verifier on the gold and on no-op answers (twice), and
    suspect answer keys; findings go to lint_findings (errors are left out downstream)."""
    res = run_lint(lazy_store(ctx), config=config)
    rules = ", ".join(f"{r} {n}" for r, n in res.by_rule.items()) or "none"
    log(
        f"lint: {res.findings} finding(s) on {res.tasks} tasks ({rules}); {res.flagged} task(s) with an "
        f"error finding, left out downstream; {_written(res)}"
    )
    skipped = {r: n for r, n in res.skipped.items() if n}
    if skipped:
        log(
            f"not checkable by the verifier rules (code, regex, environment rewards, no answer): {max(skipped.values())} task(s)"
        )
    emit(res.rows, fmt, out)


@command(BlastConfig)
def blast_radius(
    ctx: typer.Context, config: BlastConfig, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT
) -> None:
    """Which runs (rollouts, tokens, steps, checkpoints) and exports touched the tasks an eval pack or a
    lint rule flagged (default: every flagged task)."""
    res = run_blast_radius(lazy_store(ctx), config=config)
    train = res.runs.filter(pl.col("trained_rollouts") > 0) if res.runs.height else res.runs
    log(
        f"blast radius of {res.target}: {res.tasks} task(s); {res.runs.height} run(s) drew them "
        f"({train.height} trained on them), {res.exports.height} export(s) shipped them"
    )
    emit(res.table, fmt, out)


def register(app: typer.Typer) -> None:
    app.command("decontaminate")(decontaminate)
    app.command("dedup")(dedup)
    app.command("lint")(lint)
    app.command("blast-radius")(blast_radius)
