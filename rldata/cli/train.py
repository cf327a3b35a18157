"""``rldata train``: curriculum GRPO on Ray (vLLM engines + DDP learners), written back to the store."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.api import train as run_train
from rldata.cli._common import FORMAT_OPT, Format, emit, lazy_store, out_path_check
from rldata.cli._options import command
from rldata.trainer.config import TrainCommand

__all__ = ["export_model", "register", "train"]


@command(TrainCommand)
def train(ctx: typer.Context, config: TrainCommand, fmt: Format = FORMAT_OPT) -> None:
    """Train a policy with GRPO on verifiable rewards, following a curriculum.

    Every rollout (dropped groups too), its verifications, the pass-rate ledger of each policy
    version and per-step metrics land in the store; HF checkpoints land in OUT/RUN_ID/checkpoints.
    """
    import polars as pl

    # a ConfigError names the field; main() puts the option that set it in front
    s = run_train(lazy_store(ctx), config=config)
    row = {
        "run_id": s.run_id,
        "model": s.model,
        "steps": s.steps,
        "last_step": s.last_step,
        "policy_version": s.policy_version,
        "samples": s.samples,
        "groups_kept": s.groups_kept,
        "groups_dropped": s.groups_dropped,
        "eval_first": s.eval_first,
        "eval_last": s.eval_last,
        "seconds": round(s.seconds, 1),
        "checkpoint": s.checkpoint,
    }
    emit(pl.DataFrame([row]), fmt)


def export_model(
    run_id: str = typer.Argument(..., help="The training run (a directory under --runs-dir)."),
    out: Path = typer.Option(
        ...,
        "--out",
        help="Where to write the model directory (new or empty).",
        callback=out_path_check("out", directory=True),  # a model directory inside the store is a stray
    ),
    merged: bool = typer.Option(
        False,
        "--merged",
        help="The full HF model (a LoRA run's adapter merged in). Without it a LoRA run writes its adapter alone.",
    ),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="The runs' output dir (train's --out)."),
    step: int = typer.Option(None, "--step", help="That step's checkpoint (default: the newest)."),
) -> None:
    """Write a training run's checkpoint as a loadable model directory (from_pretrained, vLLM)."""
    from rldata.trainer.export import export_model as export  # start-up: loads torch

    ckpt = export(run_id, out=out, runs_dir=runs_dir, merged=merged, step=step)
    typer.echo(f"{out}\t{ckpt.name}")


def register(app: typer.Typer) -> None:
    app.command("train")(train)
    app.command("export-model")(export_model)
