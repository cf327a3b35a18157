"""``rldata cost``: GPU-hours for a token budget, and what a stored sampling run cost."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import polars as pl
import typer

from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store


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
    run: str = typer.Option(
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
    from rldata.console import log
    from rldata.cost import (
        GEN_FLOPS_PER_PARAM_TOKEN,
        GEN_MFU,
        TRAIN_FLOPS_PER_PARAM_TOKEN,
        TRAIN_MFU,
        CostSpec,
        gpu_hours,
        looks_moe,
        parse_count,
        run_tokens,
    )
    from rldata.errors import RldataError

    total = parse_count(params, what="--params")
    active = parse_count(active_params, what="--active-params") if active_params else total
    if active > total:
        raise RldataError(f"--active-params ({active:g}) cannot exceed --params ({total:g})")
    if tokens is None and run is None and model is None:
        raise RldataError("give --tokens, --run or --model")
    specs = {
        k: CostSpec.from_gpu(gpu, tflops=tflops, mfu=mfu if mfu is not None else d)
        for k, d in ((TRAIN_FLOPS_PER_PARAM_TOKEN, TRAIN_MFU), (GEN_FLOPS_PER_PARAM_TOKEN, GEN_MFU))
    }
    rows = []
    warned = set()

    def moe_check(model_name: str | None) -> None:
        if model_name and not active_params and model_name not in warned and looks_moe(model_name):
            warned.add(model_name)
            log(
                f"warning: {model_name} looks like a mixture of experts but no --active-params was given: "
                "priced with all --params active per token, an overestimate"
            )

    moe_check(name)

    def add(scenario: str, n_tokens: float, k: float, **extra) -> None:
        spec = specs[k]
        hours = gpu_hours(active, n_tokens, spec, flops_per_param_token=k)
        row = {
            "scenario": scenario,
            "active_params": active,
            "tokens": n_tokens,
            "flops": k * active * n_tokens,
            "tflops": spec.tflops,
            "mfu": spec.mfu,
            "gpu_hours": hours,
            **extra,
        }
        if gpus:
            row["wall_hours"] = hours / gpus
        rows.append(row)

    if tokens is not None:
        k = TRAIN_FLOPS_PER_PARAM_TOKEN if kind is Kind.train else GEN_FLOPS_PER_PARAM_TOKEN
        add(kind.value, parse_count(tokens, what="--tokens"), k)
    if run is not None or model is not None:
        target = parse_count(scale_tasks, what="--scale-tasks") if scale_tasks else None
        for r in run_tokens(get_store(ctx), run_id=run, model=model).iter_rows(named=True):
            moe_check(r["model"])
            measured = float(r["prompt_tokens"] + r["completion_tokens"])
            info = {"tasks": r["tasks"], "samples": r["samples"], "completion_tokens": r["completion_tokens"]}
            add(f"run {r['run_id']}", measured, GEN_FLOPS_PER_PARAM_TOKEN, **info)
            if r["steps"]:  # a training run: its updates too, over the rollouts it learned from
                add(f"run {r['run_id']} updates", float(r["trained_tokens"]), TRAIN_FLOPS_PER_PARAM_TOKEN)
            if target is not None and r["tasks"]:
                f = target / r["tasks"]
                add(
                    f"run {r['run_id']} x{f:g} ({target:g} tasks)",
                    measured * f,
                    GEN_FLOPS_PER_PARAM_TOKEN,
                    tasks=int(target),
                    samples=int(r["samples"] * f),
                    completion_tokens=int(r["completion_tokens"] * f),
                )
    emit(pl.DataFrame(rows), fmt, out)


def register(app: typer.Typer) -> None:
    app.command("cost")(cost)
