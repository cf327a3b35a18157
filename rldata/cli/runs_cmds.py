"""``rldata runs`` (the runs table, readable) and ``rldata metrics export`` (a stored run into a tracker)."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.cli._common import FORMAT_OPT, Format, emit, get_store
from rldata.console import log
from rldata.errors import RldataError
from rldata.runs.trackers import replay, tracker_names

__all__ = ["register"]

metrics_app = typer.Typer(help="A run's metrics, from the store.", no_args_is_help=True)
_EXPORT_DIR = typer.Argument(..., metavar="DIR", help="Directory the tracker writes to.")


def runs(
    ctx: typer.Context,
    kind: str = typer.Option(None, "--kind", help="Only runs of this kind: train, sample, ingest, import."),
    limit: int = typer.Option(None, "--limit", "-n", help="Only the newest N runs."),
    fmt: Format = FORMAT_OPT,
) -> None:
    """List the runs, newest first: id, kind, status, start, duration and headline numbers."""
    from rldata.runs.listing import list_runs  # start-up: `rldata tables` does not load rldata.runs.listing

    emit(list_runs(get_store(ctx), kind=kind, limit=limit), fmt)


@metrics_app.command("export")
def export(
    ctx: typer.Context,
    out: Path = _EXPORT_DIR,
    run: str = typer.Option(..., "--run", "-r", help="Run id (see rldata runs)."),
    to: str = typer.Option(..., "--to", help="Tracker: tensorboard, wandb (offline) or mlflow (file store)."),
) -> None:
    """Replay a stored run's metrics and config into a tracker, step by step."""
    if to not in tracker_names() or to == "none":
        raise RldataError(
            f"--to must be one of {', '.join(n for n in tracker_names() if n != 'none')}, got {to!r}"
        )
    got = replay(get_store(ctx), run, to, out)
    log(f"exported {got['values']} values over {got['steps']} steps of {run} to {to} in {out}")
    print(out)


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
    app.add_typer(metrics_app, name="metrics")
