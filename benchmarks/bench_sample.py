"""`rldata sample` end to end against a bare vLLM generate loop, side by side in one run.

Same prompts, same SamplingParams (n=16, temperature 1, max_tokens 8), same bundled model:

- baseline: one in-process `rldata.engine.Engine` (vLLM `LLM.generate`), batches of the same size,
  generation only; the engine's load time is excluded;
- rldata: `run_sample` into a fresh store: Ray engine actor start, generation, verification on Ray
  tasks, Delta commits of trajectories, verifications and the ledger.

Also the driver's peak RSS for a growing number of tasks (it must stream: RSS should not grow with
the task count).  Run: `python benchmarks/bench_sample.py --tasks 512`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def _tasks(n: int) -> list[dict]:
    from rldata.sample_data.arith import generate

    return [
        {"task_id": f"b{i:07d}", "source": "arith", "domain": "math", "prompt": r["prompt"], "answer": r["answer"]}
        for i, r in enumerate(generate(n, seed=123))
    ]


def bare(tasks: list[dict], spec, batch: int) -> float:
    from rldata.engine import Engine

    eng = Engine(None, seed=0)
    eng.generate([tasks[0]["prompt"]], spec)  # warm-up
    t0 = time.perf_counter()
    done = 0
    for i in range(0, len(tasks), batch):
        chunk = tasks[i : i + batch]
        out = eng.generate([t["prompt"] for t in chunk], spec, seeds=[spec.request_seed(t["task_id"]) for t in chunk],
                           logprobs=True)
        done += sum(len(g) for g in out)
    dt = time.perf_counter() - t0
    eng.close()
    return done / dt


def rldata_job(tasks: list[dict], spec, batch: int) -> tuple[float, float]:
    import ray

    from rldata import open_store
    from rldata.jobs.actors import ensure_ray
    from rldata.jobs.sample import SampleJob, run_sample

    ensure_ray(None)
    store = open_store(tempfile.mkdtemp(prefix="bench-sample-"))
    store.append("tasks", tasks)
    t0 = time.perf_counter()
    s = run_sample(store, SampleJob(spec=spec, batch_tasks=batch))
    wall = time.perf_counter() - t0
    ray.shutdown()
    return s.samples / wall, s.samples / s.seconds


def rss_child(n_tasks: int) -> None:
    """Run a job of n_tasks in this process and print the driver's peak RSS (MiB)."""
    from rldata.params import SamplingSpec

    spec = SamplingSpec(n=16, temperature=1.0, max_tokens=8, seed=0)
    rldata_job(_tasks(n_tasks), spec, 256)
    print(json.dumps({"tasks": n_tasks, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=512)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rss", default="", help="comma-separated task counts for the driver RSS runs")
    ap.add_argument("--rss-child", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rss_child:
        rss_child(a.rss_child)
        return
    from rldata.params import SamplingSpec

    spec = SamplingSpec(n=16, temperature=1.0, max_tokens=8, seed=0)
    tasks = _tasks(a.tasks)
    base = bare(tasks, spec, a.batch)
    e2e, job = rldata_job(tasks, spec, a.batch)
    print(json.dumps({
        "tasks": a.tasks, "samples": a.tasks * 16, "bare_vllm_samples_per_s": round(base, 1),
        "rldata_end_to_end_samples_per_s": round(e2e, 1), "rldata_job_phase_samples_per_s": round(job, 1),
        "ratio_end_to_end": round(e2e / base, 3), "ratio_job_phase": round(job / base, 3),
    }))
    for n in [int(x) for x in a.rss.split(",") if x]:
        out = subprocess.run([sys.executable, __file__, "--rss-child", str(n)], capture_output=True, text=True)
        print(out.stdout.strip().splitlines()[-1] if out.returncode == 0 else out.stderr[-2000:])


if __name__ == "__main__":
    main()
