"""``rldata rewards``: compose a stored run's rewards from a YAML reward spec and show every component."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import typer

from rldata.api import rewards as compose
from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, lazy_store
from rldata.console import log


def rewards(
    ctx: typer.Context,
    run_id: str = typer.Option(..., "--run-id", help="The run whose trajectories to score."),
    spec: Path = typer.Option(None, "--spec", help="YAML reward spec (default: alpha 1, no normalization)."),
    verifier: str = typer.Option(None, "--verifier", help="Only this verifier's rows make r_vr."),
    rows: bool = typer.Option(
        False, "--rows", help="Print one row per trajectory instead of per-domain means."
    ),
    step: int = typer.Option(None, "--write-metrics", help="Also write the means to `metrics` at this step."),
    fmt: Format = FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """R_total = alpha * R_VR + (1 - alpha) * R_GenRM - length penalty, z-scored per domain if asked."""
    res = compose(lazy_store(ctx), run_id=run_id, spec=spec, verifier=verifier)
    # the rows first, then the metrics commit: an --out that cannot take them fails the command
    # before anything is stored
    if rows:
        emit(res.rows, fmt, out)
    else:
        metrics = dict(res.metrics)
        emit(pl.DataFrame({"name": list(metrics), "value": list(metrics.values())}), fmt, out)
    if step is not None:
        n = compose(lazy_store(ctx), run_id=run_id, spec=spec, verifier=verifier, write_metrics=step).written
        log(f"wrote {n} reward metric(s) for run {run_id!r} at step {step}")


def register(app: typer.Typer) -> None:
    app.command("rewards")(rewards)
