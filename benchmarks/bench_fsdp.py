"""Memory and speed of the learner strategies on a ~134M-parameter Qwen2 fixture (CPU, gloo, spawned ranks).

    python benchmarks/bench_fsdp.py gather   # extra peak RSS on rank 0 when FSDP weights are gathered
    python benchmarks/bench_fsdp.py train    # per-rank peak RSS and samples/s: DDP, FSDP, FSDP+bf16+ckpt, LoRA
    python benchmarks/bench_fsdp.py trl      # TRL's GRPOTrainer (full, PEFT LoRA) beside the learner, W=1 and 2

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
SIZES = {
    "134m": {"hidden": 768, "inter": 2048, "layers": 12, "vocab": 32000},
    # the "scaled" size of bench_grpo_vs_trl.py (hidden 512, 8 layers, ~27M), as a Qwen2
    "27m": {"hidden": 512, "inter": 1536, "layers": 8, "vocab": 512},
}
SIZE = dict(SIZES["134m"])


def build(path: Path, dtype: str = "float32") -> int:
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
    model.to(getattr(torch, dtype)).save_pretrained(path)  # bfloat16: as Qwen and Llama releases ship
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

    kw = {"micro_batch": 4, **kw}
    return TrainConfig(prompts_per_step=4, n=4, num_learners=world, lr=1e-5, **kw)


def gather_rank(rank, world, model, how):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from rldata.engine.weights import FlatWeights
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


def _knobs(lrn, knobs: dict) -> None:
    """FSDP2 settings tried for throughput, applied to a built learner (not config fields)."""
    from torch.distributed.fsdp import FSDPModule

    if knobs.get("keep_gathered"):  # no reshard after forward: one all-gather per layer, not two
        for m in lrn.model.modules():
            if isinstance(m, FSDPModule):
                m.set_reshard_after_forward(False, recurse=False)
    if knobs.get("reshard_all"):  # the layout before the last layer kept its gathered parameters
        for m in lrn.model.modules():
            if isinstance(m, FSDPModule) and m is not lrn.model:
                m.set_reshard_after_forward(True, recurse=False)
    if knobs.get("prefetch"):  # issue the next layer's all-gather before this layer computes
        layers = [
            m for n, m in lrn.model.named_modules() if isinstance(m, FSDPModule) and ".layers." in f".{n}"
        ]
        for i, layer in enumerate(layers):
            if i + 1 < len(layers):
                layer.set_modules_to_forward_prefetch([layers[i + 1]])
            if i > 0:
                layer.set_modules_to_backward_prefetch([layers[i - 1]])
    if knobs.get("sync_last"):  # reduce-scatter once per step: accumulate unsharded gradients
        per_step = knobs["sync_last"]  # micro-batches per rank per step
        calls = [0]

        def pre(module, args):
            calls[0] += 1
            module.set_requires_gradient_sync(calls[0] % per_step == 0)

        lrn.model.register_forward_pre_hook(pre)


def train_rank(rank, world, model, kw, steps, knobs=None):
    from rldata.trainer.learner import Learner

    SIZE.update(json.loads(os.environ["BENCH_FSDP_SIZE"]))
    torch.set_num_threads(int(os.environ.get("BENCH_FSDP_THREADS", "1")))
    with Peak() as pk:
        lrn = Learner(model, _cfg(world, **kw), rank=rank, world_size=world)
        _knobs(lrn, knobs or {})
        built = max(pk.peak, pk.proc.memory_info().rss)  # the peak of loading and wrapping the model
        pk.peak = 0
        lrn.step(_batch(seed=99))  # warm-up (optimizer state allocated)
        t0 = time.perf_counter()
        for i in range(steps):
            lrn.step(_batch(seed=i))
        dt = time.perf_counter() - t0
    # base: this process before the learner (interpreter, torch, transformers, rldata imported)
    # steps 0: memory only (the peak comes with the first step, when AdamW's moments are allocated)
    speed = steps * 16 / dt if steps else None
    return {
        "peak_rss_mb": max(pk.peak, built) / 2**20,
        "build_peak_rss_mb": built / 2**20,
        "step_peak_rss_mb": pk.peak / 2**20,
        "base_rss_mb": pk.base / 2**20,
        "samples_per_s": speed,
    }


# --- TRL's GRPOTrainer beside rldata's learner at one rank (``trl``) -------------------------------------
TRL_DIMS = {"hidden": 768, "layers": 12, "heads": 12, "kv_heads": 12, "intermediate": 2048, "vocab": 32000}
TRL_DIMS |= {"context": 512, "tie_embeddings": False}  # the 134M shape, with a trained tokenizer


def solo(fn, *args) -> dict:
    """``fn(*args)`` in a fresh spawned process without torch.distributed (TRL runs as one process)."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_solo, args=(fn, args, q))
    p.start()
    out = q.get(timeout=3600)
    p.join()
    return out


def _guarded(fn, *args) -> dict:
    """``fn(*args)``, or its failure as a row: recorded in the results, whatever it is."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}


def _solo(fn, args, q):
    q.put(_guarded(fn, *args))


def trl_run(model: str, lora: dict | None, steps: int, world: int = 1) -> dict:
    """GRPOTrainer, full or PEFT LoRA: 4 prompts x 4 generations per optimizer step, micro-batch 4
    (gradient accumulation 4 at one process, 2 at two: 16 sequences per step either way), 48 new
    tokens, beta 0, HF generate.  samples/s over the timed steps; ``update_samples_per_s`` leaves out
    the time in generation and scoring (rldata's learner rows do not generate either).  At
    ``world`` 2 it runs in a rank of :func:`spawn` (accelerate's multi-CPU DDP over the gloo group
    already initialised there)."""
    import datasets
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    rng = torch.Generator().manual_seed(0)

    def reward(completions, **_):  # random rewards: non-zero advantages, as the learner rows' batch
        return torch.rand(len(completions), generator=rng).tolist()

    class Clock(TrainerCallback):
        def __init__(self):
            self.ends: list[float] = []

        def on_step_end(self, args, state, control, **kw):
            self.ends.append(time.perf_counter())

    words = [
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
    ]
    rows = [{"prompt": " ".join(words[(i + j) % 12] for j in range(12))} for i in range(4 * (steps + 1))]
    peft_config = None
    if lora is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=lora["r"], lora_alpha=lora["alpha"], target_modules="all-linear", task_type="CAUSAL_LM"
        )
    with tempfile.TemporaryDirectory() as out, Peak() as pk:
        args = GRPOConfig(
            output_dir=out,
            use_cpu=True,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=4 // world,
            num_generations=4,
            max_completion_length=48,
            max_steps=steps + 1,
            learning_rate=1e-5,
            beta=0.0,
            loss_type="dapo",
            temperature=1.0,
            report_to=[],
            logging_steps=1,
            save_strategy="no",
            bf16=False,
            disable_tqdm=True,
            seed=0,
        )
        clock = Clock()
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=args,
            train_dataset=datasets.Dataset.from_list(rows),
            peft_config=peft_config,
            callbacks=[clock],
        )
        gen_s: list[float] = []
        inner = trainer._generate_and_score_completions

        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                gen_s.append(time.perf_counter() - t0)

        trainer._generate_and_score_completions = timed
        trainer.train()
    wall = clock.ends[-1] - clock.ends[0]
    gen = sum(gen_s[len(gen_s) // (steps + 1) :])  # the timed steps' generation calls
    return {
        "peak_rss_mb": pk.peak / 2**20,
        "samples_per_s": steps * 16 / wall,
        "update_samples_per_s": steps * 16 / (wall - gen),
        "generation_calls": len(gen_s),
    }


def trl_rank(rank, world, model, lora, steps):
    """One rank of a W-process GRPOTrainer: accelerate reads its place from these variables."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    os.environ.update(LOCAL_WORLD_SIZE=str(world), OMP_NUM_THREADS="1")
    return _guarded(trl_run, model, lora, steps, world)


LORA16 = {"r": 16, "alpha": 32}
# name -> (who, LoRA, world size)
TRL_ROWS = {
    "rldata_full_w1": ("rldata", None, 1),
    "trl_full": ("trl", None, 1),
    "rldata_lora_w1": ("rldata", LORA16, 1),
    "trl_peft_lora": ("trl", LORA16, 1),
    "rldata_full_w2": ("rldata", None, 2),
    "trl_full_w2": ("trl", None, 2),
    "rldata_lora_w2": ("rldata", LORA16, 2),
    "trl_peft_lora_w2": ("trl", LORA16, 2),
}


def trl_main(steps: int, rows: str | None = None, key: str = "trl") -> None:
    from rldata.models.fixture import make_qwen2_fixture

    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    with tempfile.TemporaryDirectory() as d:
        model = make_qwen2_fixture(Path(d) / "q", size=TRL_DIMS)
        cfg = json.loads((model / "config.json").read_text())
        SIZE.clear()
        SIZE.update(vocab=cfg["vocab_size"])
        os.environ["BENCH_FSDP_SIZE"] = json.dumps(SIZE)
        from transformers import AutoModelForCausalLM

        params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model).parameters())
        row = res[key] = {
            "model": {**TRL_DIMS, "vocab_size": cfg["vocab_size"], "params": params},
            "load_1min_start": os.getloadavg()[0],
            "steps": steps,
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        for name in rows.split(",") if rows else TRL_ROWS:
            who, lora, world = TRL_ROWS[name]
            if who == "trl" and world == 1:
                out = {0: solo(trl_run, str(model), lora, steps)}
            elif who == "trl":
                out = spawn(trl_rank, world, str(model), lora, steps)
            else:
                kw = {"lora": lora} if lora else {}
                out = spawn(train_rank, world, str(model), kw, steps)
            got = dict(out[0])  # rank 0's speed; the peak is the larger rank's
            got["peak_rss_mb"] = max(v.get("peak_rss_mb", 0) for v in out.values())
            row[name] = {**got, "world": world, "load_1min_after": os.getloadavg()[0]}
            print(name, row[name], file=sys.stderr, flush=True)
            OUT.write_text(json.dumps(res, indent=1) + "\n")


# name -> (config fields, FSDP knobs)
VARIANTS = {
    "ddp": ({}, {}),
    "fsdp": ({"strategy": "fsdp"}, {}),
    "fsdp_bf16_ckpt": ({"strategy": "fsdp", "mixed_precision": "bf16", "gradient_checkpointing": True}, {}),
    "ddp_bf16": ({"mixed_precision": "bf16"}, {}),
    "fsdp_bf16": ({"strategy": "fsdp", "mixed_precision": "bf16"}, {}),
    "lora_ddp": ({"lora": {"r": 16, "alpha": 32}}, {}),
    "lora_ddp_ckpt": ({"lora": {"r": 16, "alpha": 32}, "gradient_checkpointing": True}, {}),
    # on a bf16 checkpoint (--checkpoint-dtype bfloat16) the frozen base stays in bf16
    "lora_ddp_bf16": ({"lora": {"r": 16, "alpha": 32}, "mixed_precision": "bf16"}, {}),
    "lora_ddp_bf16_ckpt": (
        {"lora": {"r": 16, "alpha": 32}, "mixed_precision": "bf16", "gradient_checkpointing": True},
        {},
    ),
    "fsdp_reshard_all": ({"strategy": "fsdp"}, {"reshard_all": True}),
    "fsdp_keep_gathered": ({"strategy": "fsdp"}, {"keep_gathered": True}),
    "fsdp_sync_last": ({"strategy": "fsdp"}, {"sync_last": 2}),
    "fsdp_keep_gathered_sync_last": ({"strategy": "fsdp"}, {"keep_gathered": True, "sync_last": 2}),
    "fsdp_prefetch": ({"strategy": "fsdp"}, {"prefetch": True}),
    "ddp_mb8": ({"micro_batch": 8}, {}),
    "fsdp_mb8": ({"strategy": "fsdp", "micro_batch": 8}, {}),
    "fsdp_mb8_keep_gathered": ({"strategy": "fsdp", "micro_batch": 8}, {"keep_gathered": True}),
}


def main(
    what: str,
    size: str = "134m",
    variants: str = "ddp,fsdp,fsdp_bf16_ckpt,lora_ddp",
    key: str = "train",
    steps: int = STEPS,
    checkpoint_dtype: str = "float32",
) -> None:
    SIZE.clear()
    SIZE.update(SIZES[size])
    os.environ["BENCH_FSDP_SIZE"] = json.dumps(SIZE)  # spawned ranks re-import this module
    # A fixed mmap threshold: glibc otherwise raises it after the first large frees, and the freed
    # multi-MB tensors of model loading stay in the heap, counted in RSS long after they died.
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "m"
        params = build(model, checkpoint_dtype)
        res.setdefault("models", {})[size] = {**SIZE, "params": params}
        load = os.getloadavg()[0]
        if what == "gather":
            res["gather"] = {"load_1min": load}
            for how in ("streamed", "full_state_dict"):
                res["gather"][how] = spawn(gather_rank, 2, str(model), how)[0]
                print(how, res["gather"][how], file=sys.stderr)
        else:
            res[key] = {
                "size": size,
                "load_1min_start": load,
                "world": 2,
                "steps": steps,
                "checkpoint_dtype": checkpoint_dtype,
                "rows": 16,
                "tokens_per_row": 64,
                "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            }
            for name in variants.split(","):
                kw, knobs = VARIANTS[name]
                out = spawn(train_rank, 2, str(model), kw, steps, knobs)
                res[key][name] = {
                    "peak_rss_mb_per_rank": max(v["peak_rss_mb"] for v in out.values()),
                    "base_rss_mb_per_rank": max(v.get("base_rss_mb", 0) for v in out.values()),
                    "build_peak_rss_mb_per_rank": max(v.get("build_peak_rss_mb", 0) for v in out.values()),
                    "step_peak_rss_mb_per_rank": max(v.get("step_peak_rss_mb", 0) for v in out.values()),
                    "samples_per_s": out[0]["samples_per_s"],
                    "load_1min_after": os.getloadavg()[0],
                }
                print(name, res[key][name], file=sys.stderr, flush=True)
                OUT.write_text(json.dumps(res, indent=1) + "\n")  # each row as it comes
    OUT.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="?", default="gather", choices=["gather", "train", "trl"])
    ap.add_argument("--size", default="134m", choices=sorted(SIZES))
    ap.add_argument("--variants", default="ddp,fsdp,fsdp_bf16_ckpt,lora_ddp")
    ap.add_argument("--key", default=None, help="where in bench_fsdp.json the rows go (train / trl)")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--rows", default=None, help="trl: which rows (default: all of TRL_ROWS)")
    ap.add_argument("--checkpoint-dtype", default="float32", choices=["float32", "bfloat16"])
    a = ap.parse_args()
    if a.what == "trl":
        sys.exit(trl_main(a.steps, a.rows, a.key or "trl"))
    main(a.what, a.size, a.variants, a.key or "train", a.steps, a.checkpoint_dtype)
