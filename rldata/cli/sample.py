"""``rldata sample`` (rejection sampling job) and ``rldata passrates`` (the ledger)."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store, int_list
from rldata.cli._options import command
from rldata.console import log
from rldata.errors import RldataError
from rldata.params import SampleConfig


@command(SampleConfig)
def sample(ctx: typer.Context, config: SampleConfig, fmt: Format = FORMAT_OPT) -> None:
    """Sample N answers per task with vLLM engines on Ray, verify them, and update the pass-rate ledger.

    Killed jobs resume: run the same command again. On finished work it is a no-op.
    """
    from rldata.api import sample as run_sample

    summary = run_sample(get_store(ctx, create=True), config=config)
    n = config.sampling.n
    if not summary.noop:
        log(
            f"sampled {summary.tasks_sampled} tasks, {summary.samples} samples in {summary.seconds:.1f}s "
            f"({summary.samples_per_s:.0f} samples/s); correct {summary.correct}, verifier errors {summary.errors}, "
            f"no answer {summary.no_answer}"
            + (f"; mean reward {summary.reward_mean:.3f}" if summary.reward_mean is not None else "")
            + (f"; environment errors {summary.env_errors}" if summary.env_errors else "")
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
        "1,4,16", help="Comma-separated k values for the unbiased pass@k columns (k <= n)."
    ),
    limit: int = typer.Option(None, help="Print at most this many rows."),
    fmt: Format = FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """Per task: n, n_correct, pass rate, Wilson 95% interval, unbiased pass@k, and early_stop (the
    row was stopped early by an adaptive rule: its pass rate is biased, see docs/adaptive.md)."""
    from rldata.sql_guard import check_predicate
    from rldata.stats import pass_at_k_columns

    ks = tuple(int_list(k, "--k"))
    if not ks or min(ks) < 1:
        raise RldataError(f"--k must be positive integers, got {k!r}")

    q = (
        "SELECT p.task_id, t.category, p.model, p.params_hash, p.verifier_key, p.n, p.n_correct, p.n_error, "
        "p.pass_rate, p.ci_low, p.ci_high, p.stop_rule, p.n_max, p.confidence "
        "FROM passrates p LEFT JOIN tasks t USING (task_id)"
    )
    conds = []
    params = []
    if model:
        conds.append("p.model = $1")
        params.append(model)
    if where is not None:
        check_predicate(where)
        conds.append(f"({where})")
    if conds:
        q += " WHERE " + " AND ".join(conds)
    q += " ORDER BY p.task_id, p.model"
    if limit is not None:
        q += f" LIMIT {int(limit)}"
    df = get_store(ctx).sql(q, params=params or None).pl()
    from rldata.adaptive.filter import early_stop_expr

    # early_stop: the pass rate comes from optional stopping (rldata sample --adaptive), a biased
    # estimate of p; the band decision is not (docs/adaptive.md)
    df = df.with_columns(early_stop_expr().alias("early_stop"))
    emit(pass_at_k_columns(df, ks=ks), fmt, out)


def register(app: typer.Typer) -> None:
    app.command("sample")(sample)
    app.command("passrates")(passrates)
