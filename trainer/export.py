"""``rldata export-model``: a training run's checkpoint as a stand-alone model directory.

Every checkpoint's root is already a consolidated HF model (LoRA merged in, sharded weights gathered),
so ``merged`` copies it without the training state (optimizer, ``dcp/`` shards, trainer_state.json,
the adapter).  Without ``merged``, a LoRA run's adapter is written alone, in peft's format.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rldata.errors import ConfigError, RldataError
from rldata.trainer.checkpoint import (
    ADAPTER_DIR,
    OPTIMIZER_FILE,
    SHARDED_DIR,
    STATE_FILE,
    checkpoint_dir,
    commit,
    latest_checkpoint,
    staging_dir,
)

__all__ = ["export_model"]

_TRAINING_ONLY = {OPTIMIZER_FILE, STATE_FILE, SHARDED_DIR, ADAPTER_DIR}


def export_model(
    run_id: str,
    *,
    out: str | Path,
    runs_dir: str | Path = "runs",
    merged: bool = True,
    step: int | None = None,
) -> Path:
    """Write run ``run_id``'s newest (or ``step``'s) checkpoint to ``out``; returns the checkpoint used."""
    root = Path(runs_dir) / run_id / "checkpoints"
    ckpt = latest_checkpoint(root) if step is None else checkpoint_dir(root, step)
    if ckpt is None or not (ckpt / STATE_FILE).exists():
        what = "no checkpoint" if step is None else f"no complete checkpoint for step {step}"
        raise ConfigError(f"run_id: run {run_id!r} has {what} under {root}", field="run_id")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"out: {out} exists and is not an empty directory", field="out")
    src = ckpt if merged else ckpt / ADAPTER_DIR
    if not merged and not src.is_dir():
        raise ConfigError(
            f"merged: run {run_id!r} is not a LoRA run (no {ADAPTER_DIR}/); export it --merged",
            field="merged",
        )
    if out.exists():
        out.rmdir()
    tmp = staging_dir(out)
    for f in src.iterdir():
        if f.name in _TRAINING_ONLY:
            continue
        if not f.is_file():
            raise RldataError(f"{ckpt}: unexpected entry {f.name} in a checkpoint")
        shutil.copy2(f, tmp / f.name)
    commit(tmp, out)
    return ckpt
