"""Memory and speed of the learner strategies on a ~134M-parameter Qwen2 fixture (CPU, gloo, spawned ranks).

    python benchmarks/bench_fsdp.py gather   # extra peak RSS on rank 0 when FSDP weights are gathered
    python benchmarks/bench_fsdp.py train    # per-rank peak RSS and samples/s: DDP, FSDP, FSDP+bf16+ckpt, LoRA

``gather`` compares the streamed path the driver uses (``Learner.flat_weights``: one all-gather per
tensor, each copied into the flat buffer as it arrives) with gathering the full state dict first
(``get_model_state_dict(full_state_dict=True)``) and then packing it.  Peak RSS is sampled every
millisecond by a thread; "extra" is the peak above the RSS before the call, minus the flat buffer
itself (the payload both paths must produce).  Each variant runs in fresh processes.
Results go to benchmarks/bench_fsdp.json (with the load average at the start: run it on a quiet
machine).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import torch

OUT = Path(__file__).with_name("bench_fsdp.json")
STEPS = 2
SIZE = {"hidden": 768, "inter": 2048, "layers": 12, "vocab": 32000}


def build(path: Path) -> int:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=SIZE["vocab"],
        hidden_size=SIZE["hidden"],
        intermediate_size=SIZE["inter"],
        num_hidden_layers=SIZE["layers"],
        num_attention_heads=SIZE["hidden"] // 64,
        num_key_value_heads=SIZE["hidden"] // 64,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(path)
    return sum(p.numel() for p in model.parameters())


class Peak:
    """Peak RSS of this process while the block runs, sampled every millisecond."""

    def __enter__(self):
        self.proc, self.stop, self.peak = psutil.Process(), False, 0
        self.base = self.proc.memory_info().rss

        def watch():
            while not self.stop:
                self.peak = max(self.peak, self.proc.memory_info().rss)
                time.sleep(0.001)

        self.thread = threading.Thread(target=watch, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def _rank(rank, world, port, fn, args, q):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        q.put((rank, fn(rank, world, *args)))
    finally:
        dist.destroy_process_group()


def spawn(fn, world, *args) -> dict[int, dict]:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, world, port, fn, args, q)) for r in range(world)]
    for p in procs:
        p.start()
    out = {}
    for _ in range(world):
        r, v = q.get(timeout=1800)
        out[r] = v
    for p in procs:
        p.join()
    return out


def _cfg(world, **kw):
    from rldata.trainer.config import TrainConfig

    return TrainConfig(prompts_per_step=4, group_size=4, micro_batch=4, num_learners=world, lr=1e-5, **kw)


def gather_rank(rank, world, model, how):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from rldata.engine_weights import FlatWeights
    from rldata.trainer.learner import Learner

    lrn = Learner(model, _cfg(world, strategy="fsdp"), rank=rank, world_size=world)
    with Peak() as pk:
        if how == "streamed":
            flat = lrn.flat_weights()
        else:
            sd = get_model_state_dict(
                lrn.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
            flat = FlatWeights.pack(sd.items()) if rank == 0 else None
    if rank == 0:
        return {"extra_peak_mb": (pk.peak - pk.base - flat.nbytes) / 2**20, "payload_mb": flat.nbytes / 2**20}
    return None


def _batch(rows=16, seed=0):
    from rldata.trainer.policy import collate

    g = torch.Generator().manual_seed(seed)
    p = [torch.randint(3, SIZE["vocab"], (16,), generator=g).tolist() for _ in range(rows)]
    c = [torch.randint(3, SIZE["vocab"], (48,), generator=g).tolist() for _ in range(rows)]
    return collate(p, c, advantages=torch.randn(rows, generator=g).tolist())


def train_rank(rank, world, model, kw, steps):
    from rldata.trainer.learner import Learner

    with Peak() as pk:
        lrn = Learner(model, _cfg(world, **kw), rank=rank, world_size=world)
        lrn.step(_batch(seed=99))  # warm-up (optimizer state allocated)
        t0 = time.perf_counter()
        for i in range(steps):
            lrn.step(_batch(seed=i))
        dt = time.perf_counter() - t0
    return {"peak_rss_mb": pk.peak / 2**20, "samples_per_s": steps * 16 / dt}


VARIANTS = {
    "ddp": {},
    "fsdp": {"strategy": "fsdp"},
    "fsdp_bf16_ckpt": {"strategy": "fsdp", "mixed_precision": "bf16", "gradient_checkpointing": True},
    "lora_ddp": {"lora": {"r": 16, "alpha": 32}},
}


def main(what: str) -> None:
    # A fixed mmap threshold: glibc otherwise raises it after the first large frees, and the freed
    # multi-MB tensors of model loading stay in the heap, counted in RSS long after they died.
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "m"
        params = build(model)
        res["model"] = {**SIZE, "params": params}
        load = os.getloadavg()[0]
        if what == "gather":
            res["gather"] = {"load_1min": load}
            for how in ("streamed", "full_state_dict"):
                res["gather"][how] = spawn(gather_rank, 2, str(model), how)[0]
                print(how, res["gather"][how], file=sys.stderr)
        else:
            res["train"] = {"load_1min": load, "world": 2, "steps": STEPS, "rows": 16, "tokens_per_row": 64}
            for name, kw in VARIANTS.items():
                out = spawn(train_rank, 2, str(model), kw, STEPS)
                res["train"][name] = {
                    "peak_rss_mb_per_rank": max(v["peak_rss_mb"] for v in out.values()),
                    "samples_per_s": out[0]["samples_per_s"],
                }
                print(name, res["train"][name], file=sys.stderr)
                OUT.write_text(json.dumps(res, indent=1) + "\n")  # each row as it comes
    OUT.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gather")
