"""``rldata cost``: GPU-hours for a token budget, and what a stored sampling run cost."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from rldata.api import cost as price
from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, lazy_store
from rldata.console import log


class Kind(str, Enum):
    train = "train"
    generate = "generate"


_KIND = typer.Option(
    Kind.train, "--kind", help="--tokens as training (6 FLOPs/param/token) or generation (2)."
)


def cost(
    ctx: typer.Context,
    params: str = typer.Option(..., "--params", help="Model parameters: 7e9 or 7B (MoE: the total)."),
    name: str = typer.Option(
        None,
        "--name",
        help="Model name or directory, checked for mixture of experts (warns without --active-params).",
    ),
    active_params: str = typer.Option(
        None, "--active-params", help="MoE: parameters active per token (e.g. 20B)."
    ),
    tokens: str = typer.Option(None, "--tokens", help="Token budget to price, e.g. 1e9 or 1B."),
    kind: Kind = _KIND,
    tflops: float = typer.Option(None, "--tflops", help="Peak dense TFLOPS per GPU (or use --gpu)."),
    gpu: str = typer.Option(
        None, "--gpu", help="GPU preset: h100, h200, b200, a100, l40s, l4, v100, mi300x."
    ),
    mfu: float = typer.Option(
        None,
        "--mfu",
        help="Model FLOPs utilisation, 0-1 (default: 0.4 training, 0.1 generation: decoding is "
        "memory-bound).",
    ),
    gpus: int = typer.Option(None, "--gpus", help="GPUs in parallel: adds wall-clock hours."),
    run_id: str = typer.Option(
        None,
        "--run",
        help="Price a stored run's measured tokens: a sampling run's generation, or a training run's "
        "rollouts (generation) and updates (training).",
    ),
    model: str = typer.Option(None, "--model", help="Price every stored sampling run of this model."),
    scale_tasks: str = typer.Option(
        None, "--scale-tasks", help="Also price the run(s) scaled to this many tasks."
    ),
    fmt: Format = FORMAT_OPT,
    out: Path = OUT_OPT,
) -> None:
    """GPU-hours ~= k * N_active * N_tokens / (GPU_FLOPS * MFU * 3600); k=6 training, 2 generation.

    MFU defaults to 0.4 for training and 0.1 for generation (decoding is memory-bound)."""
    res = price(
        lazy_store(ctx),  # opened only to price stored runs
        params=params,
        active_params=active_params,
        name=name,
        tokens=tokens,
        kind=kind.value,
        tflops=tflops,
        gpu=gpu,
        mfu=mfu,
        gpus=gpus,
        run_id=run_id,
        model=model,
        scale_tasks=scale_tasks,
    )
    for w in res.warnings:
        log(f"warning: {w}")
    emit(res.rows, fmt, out)


def register(app: typer.Typer) -> None:
    app.command("cost")(cost)
