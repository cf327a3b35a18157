"""Compute cost in GPU-hours: the Seed1.5-Thinking rule of thumb, GPU presets, measured sampling runs.

    GPU-hours ~= k * N_active * N_tokens / (GPU_FLOPS * MFU * 3600)

with k = 6 for training (forward + backward, the seed's formula) and k = 2 for generation
(forward only).  ``N_active`` is the parameter count a token passes through: all parameters for a
dense model, the active ones for a mixture of experts.  The seed's worked example, 7B dense on
1e9 tokens at 989 TFLOPS and 40% MFU, gives about 29.5 GPU-hours.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import polars as pl
import pyarrow.dataset as pads

from rldata.errors import ConfigError, RldataError
from rldata.store.read import read_where

__all__ = [
    "GEN_FLOPS_PER_PARAM_TOKEN",
    "GEN_MFU",
    "GPUS",
    "TRAIN_FLOPS_PER_PARAM_TOKEN",
    "TRAIN_MFU",
    "CostSpec",
    "gpu_hours",
    "looks_moe",
    "parse_count",
    "run_tokens",
]

TRAIN_FLOPS_PER_PARAM_TOKEN = 6.0  # 2 forward + 4 backward
GEN_FLOPS_PER_PARAM_TOKEN = 2.0  # forward only

# Default MFU per kind of work.  Training is compute-bound (large matmuls over whole sequences):
# 0.4 is a usual well-tuned figure.  Decoding is memory-bandwidth-bound: each step reads every
# weight (and the KV cache) from HBM to make one token per sequence.  At batch B a step does 2*B
# FLOPs per weight and reads 2 bytes per bf16 weight, about B FLOPs per byte, while an H100 needs
# ~295 FLOPs per byte (989 TFLOPS / 3.35 TB/s) to keep its tensor cores busy; RL sampling batches
# rarely get near that, so measured decode MFU sits around 5-15%.  0.1 keeps generation estimates
# from being 4x optimistic; measure your engine and pass --mfu.
TRAIN_MFU = 0.4
GEN_MFU = 0.1

# Peak dense (no sparsity) BF16 tensor throughput from the vendors' datasheets, TFLOPS (V100: FP16).
GPUS: dict[str, float] = {
    "h100": 989.0,  # H100 SXM
    "h200": 989.0,
    "b200": 2250.0,
    "a100": 312.0,
    "l40s": 362.0,
    "l4": 121.0,
    "v100": 125.0,
    "mi300x": 1307.0,
}

_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_count(text: str | float, *, what: str = "value") -> float:
    """'7e9', '7B', '1.5T', '500M', 7000000000 -> a float above 0; anything else is a clear error."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBgGtT]?)\s*", str(text))
        if not m:
            raise RldataError(
                f"{what}: expected a number like 7e9 or 7B, got {text!r}",
                field=what if what.isidentifier() else None,  # a parameter's name (params, tokens, ...)
            )
        value = float(m.group(1)) * _SUFFIX.get(m.group(2).lower(), 1.0)
    if not math.isfinite(value):  # 1e400 parses as inf: every cost would print as inf or 0
        raise RldataError(
            f"{what}: expected a finite number, got {text!r}", field=what if what.isidentifier() else None
        )
    if value <= 0:  # a count of zero parameters or tokens prices nothing: a typo, not a question
        raise RldataError(
            f"{what}: expected a number above 0, got {text!r}", field=what if what.isidentifier() else None
        )
    return value


@dataclass(frozen=True)
class CostSpec:
    """The hardware side: peak TFLOPS per GPU (or a preset name) and the model FLOPs utilisation."""

    tflops: float
    mfu: float = 0.4

    def __post_init__(self):
        if not (self.tflops > 0 and math.isfinite(self.tflops)):
            raise ConfigError(f"tflops must be > 0, got {self.tflops}", field="tflops")
        if not 0 < self.mfu <= 1:
            raise ConfigError(f"mfu must be in (0, 1], got {self.mfu}", field="mfu")

    @classmethod
    def from_gpu(cls, gpu: str | None, *, tflops: float | None = None, mfu: float = TRAIN_MFU) -> CostSpec:
        if tflops is not None:
            return cls(tflops, mfu)
        if gpu is None:
            raise ConfigError(f"give tflops or gpu ({', '.join(GPUS)})", field="gpu")
        if gpu.lower() not in GPUS:
            raise ConfigError(
                f"unknown GPU {gpu!r}; presets: {', '.join(f'{k} ({v:g} TFLOPS)' for k, v in GPUS.items())}",
                field="gpu",
            )
        return cls(GPUS[gpu.lower()], mfu)


def gpu_hours(
    active_params: float,
    tokens: float,
    spec: CostSpec,
    *,
    flops_per_param_token: float = TRAIN_FLOPS_PER_PARAM_TOKEN,
) -> float:
    """k * N_active * N_tokens / (TFLOPS * 1e12 * MFU * 3600)."""
    if active_params <= 0 or tokens < 0:
        raise RldataError(f"parameters must be > 0 and tokens >= 0, got {active_params:g} and {tokens:g}")
    return flops_per_param_token * active_params * tokens / (spec.tflops * 1e12 * spec.mfu * 3600.0)


# names of mixture-of-experts families: 8x7B, -A3B (active), MoE, and well-known sparse models
_MOE_NAME = re.compile(
    r"moe|mixtral|\d+x\d+(\.\d+)?b|-a\d+(\.\d+)?b\b|deepseek-v[23]|gpt-oss|dbrx|arctic|jamba", re.IGNORECASE
)
_MOE_CONFIG_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def looks_moe(model: str) -> bool:
    """Whether a model name, or the ``config.json`` of a model directory, says mixture of experts."""
    import json
    from pathlib import Path

    cfg = Path(model) / "config.json"
    if cfg.is_file():
        try:
            conf = json.loads(cfg.read_text())
        except (OSError, ValueError):
            conf = {}
        if any((conf.get(k) or 0) > 1 for k in _MOE_CONFIG_KEYS):
            return True
    return bool(_MOE_NAME.search(Path(model).name if cfg.is_file() else model))


def run_tokens(
    store, *, run_id: str | None = None, model: str | None = None, params_hash: str | None = None
) -> pl.DataFrame:
    """Measured token counts of stored sampling runs, one row per run_id; a training run too when
    ``run_id`` names one (its rollouts; ``model``/``params_hash`` alone select sampling runs only).

    Columns: run_id, model, params_hash, tasks, samples, prompt_tokens (summed over samples: an
    upper bound, since vLLM's prefix cache prefills a prompt once per group), completion_tokens,
    steps (training steps whose rollouts are counted; 0 for a sampling run), trained_tokens (prompt
    and completion tokens of the rollouts a training run learned from: its kept groups; 0 otherwise).
    """
    equals = {
        k: v for k, v in (("run_id", run_id), ("model", model), ("params_hash", params_hash)) if v is not None
    }
    traj = read_where(
        store,
        "trajectories",
        # sampling, not training rollouts, unless the run asked for is a training run
        where=None if run_id is not None else pads.field("step").is_null(),
        columns=[
            "run_id",
            "model",
            "params_hash",
            "task_id",
            "prompt_tokens",
            "completion_tokens",
            "step",
            "kept",
        ],
        **equals,
    )
    out = (
        traj.group_by("run_id", "model", "params_hash")
        .agg(
            pl.col("task_id").n_unique().alias("tasks"),
            pl.len().alias("samples"),
            pl.col("prompt_tokens").cast(pl.Int64).sum().alias("prompt_tokens"),
            pl.col("completion_tokens").cast(pl.Int64).sum().alias("completion_tokens"),
            pl.col("step").drop_nulls().n_unique().alias("steps"),
            (pl.col("prompt_tokens").cast(pl.Int64) + pl.col("completion_tokens").cast(pl.Int64))
            .filter(pl.col("step").is_not_null() & pl.col("kept").fill_null(False))
            .sum()
            .alias("trained_tokens"),
        )
        .sort("run_id", "model")
    )
    if out.height == 0:
        what = ", ".join(
            f"{k} {v!r}" for k, v in (("run", run_id), ("model", model), ("params", params_hash)) if v
        )
        kind = "trajectories" if run_id is not None else "sampling trajectories"
        raise RldataError(f"no {kind}{' for ' + what if what else ''} in the store")
    return out
