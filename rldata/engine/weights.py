"""Moving a trainer's weights into a running vLLM engine fast: one flat buffer on the wire, and a
direct copy into vLLM's parameters in place of vLLM's ``reload_weights``.

Why: on the bundled model a weight sync took ~40 ms on a quiet machine (and 0.11 s inside a training
step, where it competes for the cores), for 3.3 MB of weights.  Where it went:

- the learner returned 38 tensors; Ray pickles each one, and the engine unpickles each one;
- vLLM's ``reload_weights`` runs its generic layer-wise machinery for every call: it moves each layer
  to the meta device and back, wraps every weight loader, and replays the checkpoint loader (stacked
  q/k/v and gate/up shards, vocabulary padding) before re-running each layer's post-processing (on
  CPU: packing linear weights for oneDNN).  ~22 ms, of which the packing is ~6 ms.

Here instead: :class:`FlatWeights` packs the tensors into one byte buffer (Ray ships a numpy buffer
without pickling its bytes, and the engine reads it in place from the object store), and
:func:`direct_load` runs inside vLLM's worker (``collective_rpc``) with a plan made once per engine:
for each vLLM parameter, the HF tensors that fill it, at which row offsets (q/k/v and gate/up stacked
along dim 0, the vocabulary padded).  It copies them in and re-runs the post-processing of exactly
those layers (``quant_method.process_weights_after_loading``, what vLLM's loader runs after a load).

The plan is only made where that mapping is certain: no quantization, no LoRA, one tensor-parallel and
one pipeline rank, every vLLM parameter covered by HF names of the right shapes (via the model's
``packed_modules_mapping``), and every HF name used.  Anything else (a model with renamed weights,
tensor parallelism, ...) returns the reason, and the caller falls back to ``reload_weights``.
Equivalence with ``reload_weights`` is tested on the real engine (same log-probs, bit for bit).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from rldata.errors import RldataError
from rldata.heavy import torch

__all__ = ["FlatWeights", "direct_load", "make_plan"]

_ALIGN = 64  # byte alignment of each tensor in the buffer: every dtype can be viewed in place


@dataclass(frozen=True)
class FlatWeights:
    """Named tensors in one contiguous byte buffer (``names[i]`` at ``offsets[i]``, ``dtypes[i]``,
    ``shapes[i]``).  Iterating gives (name, tensor) pairs: views into the buffer, no copy."""

    names: tuple[str, ...]
    dtypes: tuple[str, ...]  # torch dtype names, e.g. "float32"
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]  # byte offsets into ``buffer``
    buffer: np.ndarray  # uint8 [total bytes]

    @classmethod
    def pack(cls, named: Iterable[tuple[str, torch.Tensor]]) -> FlatWeights:
        items = [(n, t.detach()) for n, t in named]
        return cls.pack_stream([(n, t.dtype, tuple(t.shape)) for n, t in items], (t for _, t in items))

    @classmethod
    def pack_stream(
        cls, specs: list[tuple[str, torch.dtype, tuple[int, ...]]], tensors: Iterable[torch.Tensor]
    ) -> FlatWeights:
        """Pack tensors that arrive one at a time (``tensors`` yields them in ``specs`` order, e.g.
        gathered from a sharded learner one by one): the buffer is allocated once from the specs, so
        the extra memory beyond the buffer is the one tensor in flight, not a second model."""
        offsets, pos = [], 0
        for _, dtype, shape in specs:
            offsets.append(pos)
            n = int(np.prod(shape, dtype=np.int64)) if shape else 1
            pos += -(-n * dtype.itemsize // _ALIGN) * _ALIGN
        buf = torch.empty(pos, dtype=torch.uint8)  # [bytes]
        for count, ((_, dtype, shape), off, t) in enumerate(zip(specs, offsets, tensors, strict=True)):
            t = t.detach()
            if t.dtype != dtype or tuple(t.shape) != tuple(shape):
                raise RldataError(
                    f"weights: tensor {count} is {t.dtype} {tuple(t.shape)}, spec says {dtype} {shape}"
                )
            nbytes = t.numel() * t.element_size()
            buf[off : off + nbytes].view(t.dtype).copy_(t.reshape(-1))  # device -> CPU included
        return cls(
            names=tuple(n for n, _, _ in specs),
            dtypes=tuple(str(d).removeprefix("torch.") for _, d, _ in specs),
            shapes=tuple(tuple(s) for _, _, s in specs),
            offsets=tuple(offsets),
            buffer=buf.numpy(),
        )

    @property
    def nbytes(self) -> int:
        return int(self.buffer.nbytes)

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self):
        with warnings.catch_warnings():
            # Ray hands the buffer over read-only, straight from the object store; it is only read.
            warnings.simplefilter("ignore", UserWarning)
            buf = torch.from_numpy(self.buffer)  # [bytes], shares memory
        for name, dtype, shape, off in zip(self.names, self.dtypes, self.shapes, self.offsets):
            dt = getattr(torch, dtype)
            n = int(np.prod(shape, dtype=np.int64)) if shape else 1
            yield name, buf[off : off + n * dt.itemsize].view(dt).view(shape)


# ---- inside vLLM's worker -------------------------------------------------------------------------
@dataclass
class _Slot:
    module: object  # the vLLM module that owns the parameter
    param: str  # its attribute name ("weight", "bias")
    sources: tuple[str, ...]  # HF names stacked along dim 0, in order
    rows: tuple[int, ...]  # rows of each source
    rebuild: bool  # the parameter was replaced by a kernel format (CPU linear): set it whole, then re-pack


@dataclass
class _Plan:
    slots: list[_Slot]
    shapes: dict[str, tuple[int, ...]]  # the HF names and shapes the plan was made for
    modules: list  # modules to post-process after a load, in model order


def make_plan(
    model, shapes: dict[str, tuple[int, ...]], *, tp: int = 1, pp: int = 1, quantized=None, lora=False
):
    """A :class:`_Plan` to load HF tensors of ``shapes`` into ``model`` directly, or the reason
    (a string) why the direct path does not apply."""
    if quantized is not None or lora or tp != 1 or pp != 1:
        return (
            f"direct load needs an unquantized model without LoRA on one rank "
            f"(quantization {quantized}, lora {lora}, tp {tp}, pp {pp})"
        )
    packed = dict(getattr(model, "packed_modules_mapping", {}) or {})
    slots, used, seen, modules = [], set(), set(), []
    for mname, module in model.named_modules():
        own = list(module.named_parameters(recurse=False))
        if not own:
            continue
        leaf = mname.rpartition(".")[2]
        prefix = mname[: len(mname) - len(leaf)]
        for pname, p in own:
            full = f"{mname}.{pname}"
            sources = tuple(f"{prefix}{s}.{pname}" for s in packed[leaf]) if leaf in packed else (full,)
            if any(s not in shapes for s in sources):
                if id(p) in seen:  # tied to a parameter already planned (lm_head = embed_tokens)
                    modules.append(module)
                    continue
                return f"vLLM parameter {full} has no HF tensor(s) {', '.join(s for s in sources if s not in shapes)}"
            src_shapes = [shapes[s] for s in sources]
            if len({s[1:] for s in src_shapes}) != 1:
                return f"{full}: the HF tensors {sources} differ beyond dim 0"
            rows = tuple(s[0] if s else 1 for s in src_shapes)
            rebuild = p.numel() == 0 and len(src_shapes[0]) == 2
            if rebuild:  # CPU linear: the weight lives in a packed kernel format, its shape is gone
                want = (
                    list(getattr(module, "output_partition_sizes", [])),
                    getattr(module, "input_size_per_partition", None),
                )
                if want != (list(rows), src_shapes[0][1]):
                    return f"{full}: vLLM expects shards {want}, the HF tensors give {list(rows)} x {src_shapes[0][1]}"
            else:
                target = tuple(p.shape)
                padded = type(module).__name__ in ("VocabParallelEmbedding", "ParallelLMHead")
                if target[1:] != src_shapes[0][1:] or not (
                    target[0] == sum(rows) or (padded and target[0] >= sum(rows))
                ):
                    return f"{full}: vLLM shape {target}, HF shapes {src_shapes}"
            slots.append(_Slot(module, pname, sources, rows, rebuild))
            used.update(sources)
            seen.add(id(p))
            modules.append(module)
    unused = set(shapes) - used
    if unused:
        return f"HF tensor(s) with no vLLM parameter: {sorted(unused)[:3]}"
    # post-process each module once, in model order
    done, order = set(), []
    for m in modules:
        if id(m) not in done and hasattr(getattr(m, "quant_method", None), "process_weights_after_loading"):
            done.add(id(m))
            order.append(m)
    return _Plan(slots, dict(shapes), order)


def direct_load(worker, flat: FlatWeights) -> str | None:
    """Run in a vLLM worker (``llm.collective_rpc(direct_load, args=(flat,))``): load ``flat`` into the
    worker's model in place.  None when loaded; else the reason it was not (nothing was written)."""
    shapes = dict(zip(flat.names, flat.shapes))
    plan = getattr(worker, "_rldata_direct_plan", None)
    if plan is None or (isinstance(plan, _Plan) and plan.shapes != shapes):
        cfg = worker.vllm_config
        plan = make_plan(
            worker.model_runner.get_model(),
            shapes,
            tp=cfg.parallel_config.tensor_parallel_size,
            pp=cfg.parallel_config.pipeline_parallel_size,
            quantized=cfg.model_config.quantization,
            lora=cfg.lora_config is not None,
        )
        worker._rldata_direct_plan = plan
    if isinstance(plan, str):
        return plan
    tensors = dict(flat)
    with torch.no_grad():
        for s in plan.slots:
            src = [tensors[n] for n in s.sources]
            if s.rebuild:
                full = torch.cat(src, 0) if len(src) > 1 else src[0].clone()
                setattr(s.module, s.param, torch.nn.Parameter(full, requires_grad=False))
                continue
            target, row = getattr(s.module, s.param), 0
            for t, r in zip(src, s.rows):
                target[row : row + r].copy_(t)
                row += r
        for m in plan.modules:
            m.quant_method.process_weights_after_loading(m)
    return None
