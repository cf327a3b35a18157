"""How a learner holds its model: LoRA adapters (peft), activation checkpointing, DDP or FSDP2,
fp32 or bf16 compute; and the weights out of it in HF naming, one tensor at a time.

FSDP2 (``torch.distributed.fsdp.fully_shard``) wraps each decoder layer (the classes a transformers
model lists in ``_no_split_modules``), untied input and output embeddings, and then the root:
each rank keeps 1/W of every parameter, gradient and AdamW moment, and a layer's full parameters
exist only while it runs.  Under ``mixed_precision: bf16`` the gathered parameters are cast to
bf16 for compute while the sharded masters, the optimizer state and the gradient reduction stay fp32 (``MixedPrecisionPolicy``); under
DDP the same split comes from ``torch.autocast``.  Either way the log-probs that enter the ratio
are computed from logits upcast to fp32 (``token_logprobs``).

Weights leave a learner in HF naming (``model.layers.0.self_attn.q_proj.weight``) with LoRA merged
in (W + alpha/r * B @ A): what a vLLM engine or ``from_pretrained`` loads.  Under FSDP each tensor is
all-gathered on its own (a collective: every rank walks the same list), so the extra memory on the
rank that packs them is one tensor, not a model (``stream_hf_weights``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from rldata.errors import ConfigError
from rldata.heavy import Lazy
from rldata.trainer.checkpoint import stored_dtype

__all__ = [
    "WeightPlan",
    "autocast",
    "decoder_layers",
    "frozen_dtype",
    "full_tensor",
    "hf_model",
    "hold_frozen",
    "prepare_model",
    "shard_model",
    "stream_adapter",
    "stream_hf_weights",
    "weight_plan",
]

_fsdp = Lazy("torch.distributed.fsdp")  # FSDP2: loaded when a learner shards its model


def frozen_dtype(path, cfg) -> torch.dtype:
    """The dtype to hold frozen weights in (LoRA's base, the KL reference).

    bf16 when compute is bf16 and the checkpoint itself stores bf16, as Qwen and Llama releases do:
    the values are the checkpoint's own and every matmul reads them in bf16 anyway, so holding them
    in fp32 would only double their memory.  Otherwise fp32 (a trained weight needs fp32 masters,
    and rounding an fp32 checkpoint would change the model)."""
    if cfg.mixed_precision == "bf16" and stored_dtype(path) == torch.bfloat16:
        return torch.bfloat16
    return torch.float32


def hold_frozen(model):
    """Make a model loaded in bf16 compute what its fp32 copy computes under bf16 autocast.

    Autocast casts matmul weights to bf16 (the same values), and RMSNorm's ``weight * x`` promotes to
    fp32 either way; only the embedding lookup is not autocast: its fp32 output keeps the residual
    stream in fp32, so the bf16 embedding's output is upcast to match."""
    emb = hf_model(model).get_input_embeddings()
    if emb.weight.dtype == torch.bfloat16:
        emb.register_forward_hook(lambda _m, _args, out: out.float())
    return model


def prepare_model(model, cfg, *, trainable: bool = True):
    """Activation checkpointing and LoRA adapters, before any wrapping (both change the modules)."""
    if cfg.gradient_checkpointing and trainable:
        # Non-reentrant: works with frozen inputs (LoRA) and with FSDP2's hooks.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if cfg.lora is not None and trainable:
        from peft import LoraConfig, get_peft_model

        lc = cfg.lora
        model = get_peft_model(
            model,
            LoraConfig(
                r=lc["r"],
                lora_alpha=lc["alpha"],
                lora_dropout=lc["dropout"],
                target_modules=lc["target_modules"],
                bias="none",
                task_type="CAUSAL_LM",
            ),
        )
    return model


def hf_model(model):
    """The transformers model inside a DDP and/or peft wrapper (FSDP2 wraps in place: no unwrapping)."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model = model.module
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def decoder_layers(model) -> list[torch.nn.Module]:
    """The repeated blocks to shard one by one: modules of a class the HF model declares unsplittable."""
    base = hf_model(model)
    names = set(getattr(base, "_no_split_modules", None) or ())
    layers = [m for m in base.modules() if type(m).__name__ in names]
    if not layers:
        raise ConfigError(
            f"strategy: fsdp: {type(base).__name__} declares no decoder layer classes (_no_split_modules)",
            field="strategy",
        )
    return layers


def shard_model(model, cfg, *, device: str):
    """FSDP2 on each decoder layer and on the root (in place); returns the model."""
    mp = (
        _fsdp.MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if cfg.mixed_precision == "bf16"
        else _fsdp.MixedPrecisionPolicy()
    )
    # Offload moves parameters, gradients and the optimizer step to CPU between uses; on CPU learners
    # they are on CPU already, so the policy only applies to GPU ranks.
    offload = (
        _fsdp.CPUOffloadPolicy() if cfg.cpu_offload and device.startswith("cuda") else _fsdp.OffloadPolicy()
    )
    layers = decoder_layers(model)
    for i, layer in enumerate(layers):
        # The last layer's backward runs right after its forward: resharding it in between would
        # only buy one all-gather more per micro-batch (the root keeps its own parameters anyway).
        last = i == len(layers) - 1
        _fsdp.fully_shard(layer, mp_policy=mp, offload_policy=offload, reshard_after_forward=not last)
    base = hf_model(model)
    emb, head = base.get_input_embeddings(), base.get_output_embeddings()
    if emb is not None and head is not None and emb.weight is not head.weight:
        # Untied vocabulary matrices are a real model's largest tensors (Qwen2.5-7B: 0.55B parameters
        # each).  Left in the root they stay gathered, and the head's gradient unsharded, through the
        # whole step; in units of their own the embedding reshards after its forward, and the head's
        # gradient is reduce-scattered as soon as its backward ends (its backward follows its forward).
        _fsdp.fully_shard(emb, mp_policy=mp, offload_policy=offload)
        _fsdp.fully_shard(head, mp_policy=mp, offload_policy=offload, reshard_after_forward=False)
    _fsdp.fully_shard(model, mp_policy=mp, offload_policy=offload)
    return model


def autocast(cfg, device: str):
    """bf16 compute for a DDP (or single) learner; FSDP's policy casts by itself."""
    if cfg.mixed_precision == "bf16" and cfg.strategy == "ddp":
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


# --- weights out, in HF naming ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Entry:
    name: str  # HF name
    keys: tuple[str, ...]  # the model's state-dict keys: (weight,) or (base weight, lora A, lora B)
    dtype: torch.dtype
    shape: tuple[int, ...]


@dataclass(frozen=True)
class WeightPlan:
    """Which state-dict tensors make each HF tensor, in a fixed order every rank shares."""

    entries: tuple[_Entry, ...]
    adapter_keys: tuple[str, ...]  # LoRA A/B keys (the adapter a checkpoint holds)
    scaling: float  # alpha / r

    @property
    def specs(self) -> list[tuple[str, torch.dtype, tuple[int, ...]]]:
        return [(e.name, e.dtype, e.shape) for e in self.entries]


def _hf_name(key: str) -> str:
    return key.removeprefix("base_model.model.").replace(".base_layer.", ".")


def weight_plan(model, cfg) -> WeightPlan:
    """The plan for ``model``'s current state dict (sharded tensors report their global shape)."""
    sd = model.state_dict()
    entries, adapter = [], []
    lora_of: dict[str, dict[str, str]] = {}  # module prefix -> {"A": key, "B": key}
    for key in sd:
        if ".lora_A." in key or ".lora_B." in key:
            prefix, kind = key.split(".lora_")[0], key.split(".lora_")[1][0]
            lora_of.setdefault(prefix, {})[kind] = key
            adapter.append(key)
        elif ".lora_" in key:
            raise ConfigError(f"lora: unsupported adapter tensor {key}", field="lora")
    for key, t in sd.items():
        if ".lora_" in key:
            continue
        prefix = key.removesuffix(".base_layer.weight")
        keys = (key,)
        if prefix != key and prefix in lora_of:
            keys = (key, lora_of[prefix]["A"], lora_of[prefix]["B"])
        # Weights leave in fp32 also when a frozen base is held in bf16: the merged sum must not be
        # rounded to bf16 (an adapter's early updates are below a bf16 ulp of the base weight).
        dtype = torch.float32 if t.is_floating_point() else t.dtype
        entries.append(_Entry(_hf_name(key), keys, dtype, tuple(t.shape)))
    scaling = cfg.lora["alpha"] / cfg.lora["r"] if cfg.lora is not None else 1.0
    return WeightPlan(tuple(entries), tuple(adapter), scaling)


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor on CPU; for a sharded (DTensor) one, an all-gather every rank must join."""
    if hasattr(t, "full_tensor"):
        t = t.full_tensor()
    return t.detach().to("cpu")


@torch.no_grad()
def stream_hf_weights(model, plan: WeightPlan) -> Iterator[torch.Tensor]:
    """The plan's tensors, full and on CPU, LoRA merged in, one at a time (collective under FSDP)."""
    sd = model.state_dict()
    for e in plan.entries:
        if len(e.keys) == 1:
            yield full_tensor(sd[e.keys[0]]).to(e.dtype)
            continue
        w, a, b = (full_tensor(sd[k]) for k in e.keys)
        yield (w.float() + plan.scaling * (b.float() @ a.float())).to(e.dtype)  # [out, in]


@torch.no_grad()
def stream_adapter(model, plan: WeightPlan) -> Iterator[tuple[str, torch.Tensor]]:
    """The LoRA tensors in peft's file naming (adapter name dropped), full and on CPU."""
    sd = model.state_dict()
    for key in plan.adapter_keys:
        parts = key.split(".")
        name = ".".join(p for i, p in enumerate(parts) if not (i > 0 and parts[i - 1].startswith("lora_")))
        yield name, full_tensor(sd[key])
