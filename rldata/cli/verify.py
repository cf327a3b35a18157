"""``rldata verify`` (re-score stored trajectories) and ``rldata audit`` (compare two verifiers, or
one with stored labels).  Thin: the work is in rldata.jobs.verify and rldata.audit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import typer

from rldata.api import verify as run_verify
from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store
from rldata.cli._options import command
from rldata.console import log
from rldata.jobs.verify import VerifyJob
from rldata.store.outputs import write_output


@command(VerifyJob)
def verify(ctx: typer.Context, config: VerifyJob, fmt: Format = FORMAT_OPT) -> None:
    """Re-score stored trajectories under the verifier's current version; rebuild its ledger rows.

    Old results stay (a new version adds rows); re-running finishes a killed run, and is a no-op
    when everything is verified.
    """
    s = run_verify(get_store(ctx), config=config)
    if not s.noop:
        log(
            f"verified {s.verified} trajectories ({s.already_verified} already) with {', '.join(s.verifiers)} in "
            f"{s.seconds:.1f}s: correct {s.correct}, errors {s.errors}, no answer {s.no_answer}; "
            f"{s.ledger_rows} ledger rows rebuilt"
        )
    emit(pl.DataFrame([{**s.to_dict(), "verifiers": ",".join(s.verifiers)}]), fmt)


def audit(
    ctx: typer.Context,
    verifier: str = typer.Option(
        ..., "--verifier", help="The verifier audited: NAME@VERSION, or NAME if one version."
    ),
    against: str = typer.Option(
        ...,
        "--against",
        help="The reference: another verifier (NAME[@VERSION]) or 'labels' (imported rewards).",
    ),
    run_id: str = typer.Option(None, "--run-id", help="Only this run's trajectories."),
    where: str = typer.Option(None, "--where", help="SQL predicate over trajectories t JOIN tasks k."),
    examples: int = typer.Option(3, "--examples", help="Examples kept per disagreement class."),
    fmt: Format = FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """Agreement by domain and source, disagreement classes with examples, FP/FN rates vs labels."""
    from rldata.audit import audit_store, print_audit  # start-up: `rldata tables` does not load rldata.audit

    res = audit_store(
        get_store(ctx), verifier=verifier, against=against, run_id=run_id, where=where, examples=examples
    )
    if fmt is Format.json:
        text = json.dumps(res.to_dict(), default=str, ensure_ascii=False) + "\n"
        if out is not None:
            write_output(out, text, name="out")
        else:
            sys.stdout.write(text)
    elif fmt is Format.table:
        print_audit(res)
    else:
        emit(res.agreement, fmt, out)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
    app.command("audit")(audit)
