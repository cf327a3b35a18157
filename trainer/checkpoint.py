"""Checkpoints: an HF-format model directory plus what a bit-exact resume needs.

Layout of ``<dir>/step-000010/``:
  config.json, model.safetensors, tokenizer files   -- loadable with ``from_pretrained`` (and vLLM)
  optimizer.pt                                      -- the optimizer's state_dict (tensors only)
  trainer_state.json                                -- step, policy_version, curriculum sampler
                                                       state, RNG states (python, numpy, torch)

A checkpoint is written into ``step-N.tmp`` and renamed when complete, so a crash mid-save never
leaves a directory that ``latest_checkpoint`` would pick.  The model half and the trainer half are
separate functions because in a distributed run they are written by different processes (rank 0
learner, driver) into the same staging directory.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rldata.errors import RldataError
from rldata.heavy import Lazy

__all__ = [
    "Checkpoint",
    "checkpoint_dir",
    "commit",
    "copy_aux_files",
    "latest_checkpoint",
    "load_checkpoint",
    "load_model",
    "load_optimizer",
    "load_sharded_state",
    "rng_state",
    "save_checkpoint",
    "save_hf_tensors",
    "save_model_state",
    "save_sharded_state",
    "save_trainer_state",
    "set_rng_state",
    "staging_dir",
    "stored_dtype",
]

OPTIMIZER_FILE = "optimizer.pt"
SHARDED_DIR = "dcp"  # torch.distributed.checkpoint: model + optimizer, one file per rank
ADAPTER_DIR = "adapter"  # LoRA runs: the adapter in peft's format
STATE_FILE = "trainer_state.json"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".index.json")
_dcp = Lazy("torch.distributed.checkpoint")  # sharded checkpoints (fsdp and LoRA runs)
_dcp_sd = Lazy("torch.distributed.checkpoint.state_dict")


@dataclass(frozen=True)
class Checkpoint:
    """What ``load_checkpoint`` read back (the RNG states are already restored by then)."""

    path: Path
    step: int
    policy_version: int
    curriculum_state: dict | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def checkpoint_dir(root: str | Path, step: int) -> Path:
    return Path(root) / f"step-{step:06d}"


def staging_dir(final: str | Path) -> Path:
    """An empty directory beside ``final`` to write into before ``commit``."""
    tmp = Path(final).with_name(Path(final).name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def commit(tmp: Path, final: str | Path) -> Path:
    """Atomically publish a complete staging directory as ``final`` (replacing an older one)."""
    final = Path(final)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete ``step-N`` directory under root, or None."""
    root = Path(root)
    if not root.is_dir():
        return None
    done = [
        p
        for p in root.glob("step-*")
        if p.is_dir() and not p.name.endswith(".tmp") and (p / STATE_FILE).exists()
    ]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


# --- RNG ------------------------------------------------------------------------------------------
def rng_state() -> dict:
    """Python, numpy and torch global RNG states as JSON-able values."""
    py = random.getstate()
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    out = {
        "python": [py[0], list(py[1]), py[2]],
        "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(gauss)],
        "torch": torch.get_rng_state().tolist(),
    }
    if torch.cuda.is_available():
        out["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return out


def set_rng_state(state: dict) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def _jsonable(x):
    """json.dump's fallback for numpy values inside a curriculum state."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON-serialisable in a checkpoint: {type(x).__name__}")


# --- save -----------------------------------------------------------------------------------------
def copy_aux_files(src: str | Path | None, dst: str | Path) -> None:
    """Copy the source model dir's non-weight files (tokenizer, generation config, ...) that the
    save did not write, so a checkpoint is as loadable as the model it came from."""
    if src is None or not Path(src).is_dir():
        return
    for f in Path(src).iterdir():
        if (
            f.is_file()
            and not f.name.endswith(_WEIGHT_SUFFIXES)
            and f.name != STATE_FILE
            and not (Path(dst) / f.name).exists()
        ):
            shutil.copy2(f, Path(dst) / f.name)


def save_model_state(path: str | Path, *, model, optimizer=None, tokenizer=None, source_dir=None) -> None:
    """The model in HF format (+ tokenizer files) and the optimizer state, into ``path``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    copy_aux_files(source_dir, path)
    if optimizer is not None:
        torch.save(optimizer.state_dict(), path / OPTIMIZER_FILE)


def save_hf_tensors(path: str | Path, tensors: dict[str, torch.Tensor], *, config, source_dir=None) -> None:
    """Full tensors in HF naming (gathered from a sharded or LoRA learner) as a model directory."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if getattr(config, "tie_word_embeddings", False):
        tensors = {k: v for k, v in tensors.items() if k != "lm_head.weight"}  # from_pretrained re-ties it
    save_file(
        {k: v.contiguous() for k, v in tensors.items()},
        str(path / "model.safetensors"),
        metadata={"format": "pt"},
    )
    # The config names the dtype the file holds (a learner holding its frozen base in bf16 still
    # writes fp32 tensors), so `dtype="auto"` and vLLM load what was written.
    config = copy.deepcopy(config)
    config.dtype = next((t.dtype for t in tensors.values() if t.is_floating_point()), config.dtype)
    config.save_pretrained(path)
    copy_aux_files(source_dir, path)


def _dcp_state(model, optimizer, trainable_only: bool):
    # Keys are parameter names (not optimizer indices) and tensors keep their sharding: a checkpoint
    # saved by W ranks loads into any other W (torch.distributed.checkpoint reshards on load).
    # LoRA: the frozen base comes from the base model, so loading only the adapters is not strict.
    opts = _dcp_sd.StateDictOptions(ignore_frozen_params=trainable_only, strict=not trainable_only)
    model_sd, optim_sd = _dcp_sd.get_state_dict(model, optimizer, options=opts)
    return {"model": model_sd, "optim": optim_sd}, opts


def save_sharded_state(path: str | Path, *, model, optimizer, trainable_only: bool = False) -> None:
    """Model and optimizer with torch.distributed.checkpoint into ``path/dcp``: every rank writes its
    own shard (a collective: all ranks call it).  ``trainable_only`` (LoRA) leaves the frozen base out."""
    state, _ = _dcp_state(model, optimizer, trainable_only)
    _dcp.save(state, checkpoint_id=str(Path(path) / SHARDED_DIR))


def load_sharded_state(path: str | Path, *, model, optimizer, trainable_only: bool = False) -> None:
    """The inverse of ``save_sharded_state``, at this run's world size (which may differ)."""
    src = Path(path) / SHARDED_DIR
    if not src.is_dir():
        raise RldataError(f"{path}: no {SHARDED_DIR}/; not a checkpoint of a strategy: fsdp or LoRA run")
    state, opts = _dcp_state(model, optimizer, trainable_only)
    _dcp.load(state, checkpoint_id=str(src))
    _dcp_sd.set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"], options=opts
    )


def save_trainer_state(
    path: str | Path,
    *,
    step: int,
    policy_version: int,
    curriculum_state: dict | None = None,
    extra: dict | None = None,
) -> None:
    """Step counters, curriculum sampler state and this process's RNG states, into ``path``."""
    state = {
        "step": step,
        "policy_version": policy_version,
        "curriculum": curriculum_state,
        "extra": extra or {},
        "rng": rng_state(),
    }
    (Path(path) / STATE_FILE).write_text(json.dumps(state, default=_jsonable))


def save_checkpoint(
    path: str | Path,
    *,
    model,
    optimizer,
    step: int,
    policy_version: int,
    tokenizer=None,
    source_dir=None,
    curriculum_state: dict | None = None,
    extra: dict | None = None,
) -> Path:
    """Everything in one process (single learner): staged, then committed to ``path``."""
    tmp = staging_dir(path)
    save_model_state(tmp, model=model, optimizer=optimizer, tokenizer=tokenizer, source_dir=source_dir)
    save_trainer_state(
        tmp, step=step, policy_version=policy_version, curriculum_state=curriculum_state, extra=extra
    )
    return commit(tmp, path)


# --- load -----------------------------------------------------------------------------------------
def stored_dtype(path: str | Path) -> torch.dtype | None:
    """The one floating dtype a model directory's safetensors files store, read from their headers
    (no tensor is loaded); None when there are none or they mix dtypes."""
    from safetensors import safe_open

    found: set[str] = set()
    for f in sorted(Path(path).glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            found.update(st.get_slice(k).get_dtype() for k in st.keys())  # noqa: SIM118 (not a dict)
    floating = {d for d in found if d.startswith(("F", "BF"))}
    names = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}
    return names.get(floating.pop()) if len(floating) == 1 else None


def load_model(path: str | Path, *, dtype: torch.dtype = torch.float32, device: str = "cpu"):
    """An HF causal LM from a model dir or a checkpoint dir (a checkpoint IS a model dir)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype).to(device)


def load_optimizer(path: str | Path, optimizer) -> None:
    f = Path(path) / OPTIMIZER_FILE
    if not f.exists():
        raise RldataError(f"{path}: no {OPTIMIZER_FILE}; not a training checkpoint")
    optimizer.load_state_dict(torch.load(f, weights_only=True, map_location="cpu"))


def load_checkpoint(path: str | Path, *, optimizer=None, restore_rng: bool = True) -> Checkpoint:
    """Read a checkpoint's trainer state; restore the optimizer (if given) and the RNG states.

    The model weights come from ``load_model(path)`` (build the optimizer on that model first).
    """
    path = Path(path)
    f = path / STATE_FILE
    try:
        state = json.loads(f.read_text())
    except OSError:
        raise RldataError(f"{path}: no {STATE_FILE}; not a complete training checkpoint") from None
    except json.JSONDecodeError as e:
        raise RldataError(f"{f}: corrupt ({e})") from None
    if optimizer is not None:
        load_optimizer(path, optimizer)
    if restore_rng:
        set_rng_state(state["rng"])
    return Checkpoint(
        path=path,
        step=int(state["step"]),
        policy_version=int(state["policy_version"]),
        curriculum_state=state.get("curriculum"),
        extra=state.get("extra") or {},
    )
