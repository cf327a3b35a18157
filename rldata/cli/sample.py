"""``rldata sample`` (rejection sampling job) and ``rldata passrates`` (the ledger)."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store, int_list, lazy_store
from rldata.console import log


def sample(
    ctx: typer.Context,
    n: int = typer.Option(16, "--n", help="Samples per task."),
    model: str = typer.Option(
        None, help="Hugging Face model directory. Default: the bundled tiny-arith model."
    ),
    where: str = typer.Option(None, help="SQL predicate over tasks, e.g. \"domain = 'math'\"."),
    selection: str = typer.Option(None, help="Sample the kept tasks of this selection (see rldata filter)."),
    temperature: float = typer.Option(1.0, help="Sampling temperature (0 = greedy)."),
    top_p: float = typer.Option(1.0, "--top-p", help="Nucleus sampling mass."),
    max_tokens: int = typer.Option(16, "--max-tokens", help="Completion length cap, in tokens."),
    seed: int = typer.Option(0, help="Base seed; each task's requests get a seed derived from it."),
    address: str = typer.Option(None, help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray)."),
    engines: int = typer.Option(
        None,
        help="Engine actors (default: one per GPU; on CPU one per core, at most 4, at most one per batch).",
    ),
    batch_tasks: int = typer.Option(128, "--batch-tasks", help="Tasks per engine call and per store commit."),
    max_model_len: int = typer.Option(
        None, "--max-model-len", help="Engine context length (prompt + completion). Default: the model's."
    ),
    env: str = typer.Option(
        None,
        "--env",
        help="Run every task as an episode in this environment (NAME or NAME@VERSION from rldata env list; "
        "a bundled one is registered on first use). Default: each task's own environment, else single-turn.",
    ),
    reward_spec: Path = typer.Option(
        None,
        "--reward-spec",
        help="YAML reward spec (alpha, judge mix, length penalty, z-scores; see rldata rewards). "
        "Default: the verifier's score alone.",
    ),
    adaptive: str = typer.Option(
        "fixed",
        "--adaptive",
        help="fixed: N samples per task. exact: sample in rounds and stop a task once no remaining draw can change "
        "the band decision fixed N would make. sequential: stop once it is settled at level --alpha.",
    ),
    alpha: float = typer.Option(
        None, "--alpha", help="--adaptive sequential: allowed disagreement with fixed N (default 0.05)."
    ),
    round_size: int = typer.Option(
        4, "--round", help="--adaptive: at most this many draws per task per round."
    ),
    band: str = typer.Option(
        None, "--band", help="--adaptive: the band the decision is about, as rldata filter's --band LO,HI."
    ),
    fmt: Format = FORMAT_OPT,
) -> None:
    """Sample N answers per task with vLLM engines on Ray, verify them, and update the pass-rate ledger.

    Killed jobs resume: run the same command again. On finished work it is a no-op.
    """
    from rldata.api import sample as run_sample

    summary = run_sample(
        lazy_store(ctx),
        n=n,
        model=model,
        where=where,
        selection=selection,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        seed=seed,
        address=address,
        engines=engines,
        batch_tasks=batch_tasks,
        max_model_len=max_model_len,
        env=env,
        reward=reward_spec,
        adaptive=adaptive,
        band=band,
        alpha=alpha,
        round_size=round_size,
    )
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
        None, help="Comma-separated k values for the unbiased pass@k columns (k <= n; default 1,4,16)."
    ),
    limit: int = typer.Option(None, help="Print at most this many rows."),
    fmt: Format = FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """Per task: n, n_correct, pass rate, Wilson 95% interval, unbiased pass@k, and early_stop (the
    row was stopped early by an adaptive rule: its pass rate is biased, see docs/adaptive.md)."""
    from rldata.api import passrates as read_passrates

    ks = {} if k is None else {"k": tuple(int_list(k, "--k"))}  # the default is the verb's
    res = read_passrates(get_store(ctx), model=model, where=where, limit=limit, **ks)
    emit(res.rows, fmt, out)


def register(app: typer.Typer) -> None:
    app.command("sample")(sample)
    app.command("passrates")(passrates)
