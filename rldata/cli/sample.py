"""``rldata sample`` (rejection sampling job) and ``rldata passrates`` (the ledger)."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.api import passrates as read_passrates
from rldata.api import sample as run_sample
from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store, int_list, lazy_store
from rldata.cli._options import command
from rldata.configs.sampling import SampleConfig
from rldata.console import log


@command(SampleConfig)
def sample(ctx: typer.Context, config: SampleConfig, fmt: Format = FORMAT_OPT) -> None:
    """Sample N answers per task with vLLM engines on Ray, verify them, and update the pass-rate ledger.

    Killed jobs resume: run the same command again. On finished work it is a no-op.
    """
    summary = run_sample(lazy_store(ctx), config=config)
    n = config.sampling.n
    if not summary.noop:
        log(
            f"sampled {summary.tasks_sampled} tasks, {summary.samples} samples in {summary.seconds:.1f}s "
            f"({summary.samples_per_s:.0f} samples/s); correct {summary.correct}, verifier errors {summary.errors}, "
            f"no answer {summary.no_answer}"
            + (f"; mean reward {summary.reward_mean:.3f}" if summary.reward_mean is not None else "")
            + (f"; environment errors {summary.env_errors}" if summary.env_errors else "")
            + (
                f"; {summary.not_generated} samples not generated (prompt longer than the context)"
                if summary.not_generated
                else ""
            )
            + (
                f"; skipped {summary.skipped_predicted} predicted out of band"
                if summary.skipped_predicted
                else ""
            )
            + (
                f"; {summary.stop_rule}: {summary.stopped_early} tasks stopped before {n} in "
                f"{summary.adaptive_rounds} rounds"
                if summary.stop_rule != "fixed"
                else ""
            )
        )
    import polars as pl

    emit(pl.DataFrame([summary.to_dict()]), fmt)


def passrates(
    ctx: typer.Context,
    model: str = typer.Option(None, help="Only this model (ledger name, e.g. tiny-arith@1a2b3c4d)."),
    where: str = typer.Option(None, help="SQL predicate over the ledger columns and tasks (t.*)."),
    k: str = typer.Option(
        None, help="Comma-separated k values for the unbiased pass@k columns (k <= n; default 1,4,16)."
    ),
    limit: int = typer.Option(None, help="Print at most this many rows."),
    fmt: Format = FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """Per task: n, n_correct, pass rate, Wilson 95% interval, unbiased pass@k, and early_stop (the
    row was stopped early by an adaptive rule: its pass rate is biased, see docs/adaptive.md)."""
    ks = {} if k is None else {"k": tuple(int_list(k, "--k"))}  # the default is the verb's
    res = read_passrates(get_store(ctx), model=model, where=where, limit=limit, **ks)
    emit(res.rows, fmt, out)


def register(app: typer.Typer) -> None:
    app.command("sample")(sample)
    app.command("passrates")(passrates)
