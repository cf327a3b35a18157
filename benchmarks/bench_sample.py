"""`rldata sample` end to end against a bare vLLM generate loop, side by side in one run.

Same prompts (the bundled arith tasks, then generated 2-digit 3-operand ones if more are asked
for), same SamplingParams (n=16, temperature 1, max_tokens 8, per-task seeds), same bundled model:

- baseline: one in-process `rldata.engine.Engine` (vLLM `LLM.generate` with `SamplingParams(n=16)`),
  batches of the same size, generation only;
- rldata: `run_sample` into a fresh store: Ray engine actor start, generation, verification on Ray
  tasks, Delta commits of trajectories, verifications and the ledger.

Two ratios: end to end (both sides count their engine load; rldata also its Ray actor start), and
steady state (the baseline without its load time against rldata's whole job).  Also the driver's
peak RSS for a growing number of tasks (it must stream: RSS should not grow with the task count).
Run: `python benchmarks/bench_sample.py --tasks 3500 --rss 1000,4000,16000`.
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
    from rldata.sample_data.arith import generate, load_bundled

    rows = (load_bundled("train") + load_bundled("heldout"))[:n]
    if len(rows) < n:  # more than the bundle: 2-digit, 3-operand expressions (millions of distinct ones)
        rows += generate(
            n - len(rows),
            seed=123,
            digits=2,
            n_operands=3,
            operators="+-*",
            exclude={r["prompt"] for r in rows},
        )
    return [
        {
            "task_id": f"b{i:07d}",
            "source": "arith",
            "domain": "math",
            "prompt": r["prompt"],
            "answer": r["answer"],
        }
        for i, r in enumerate(rows)
    ]


def bare(tasks: list[dict], spec, batch: int) -> tuple[float, float]:
    """(samples/s counting the engine load, samples/s of the generate loop alone)."""
    from rldata.engine import Engine

    t_load = time.perf_counter()
    eng = Engine(None, seed=0)
    t0 = time.perf_counter()
    done = 0
    for i in range(0, len(tasks), batch):
        chunk = tasks[i : i + batch]
        out = eng.generate(
            [t["prompt"] for t in chunk],
            spec,
            seeds=[spec.request_seed(t["task_id"]) for t in chunk],
            logprobs=True,
        )
        done += sum(len(g) for g in out)
    t1 = time.perf_counter()
    eng.close()
    return done / (t1 - t_load), done / (t1 - t0)


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
    print(json.dumps({"tasks": n_tasks, "samples": n_tasks * 16, "peak_rss_mib": round(_vm_hwm_mib(), 1)}))


def _vm_hwm_mib() -> float:
    """This process's peak RSS.  Not ``getrusage``: its ``ru_maxrss`` survives exec, so a child
    started from this benchmark would report the parent's peak (the baseline's loaded engine)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=3500)
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
    base_e2e, base_loop = bare(tasks, spec, a.batch)
    e2e, job = rldata_job(tasks, spec, a.batch)
    print(
        json.dumps(
            {
                "tasks": a.tasks,
                "samples": a.tasks * 16,
                "load_avg_1m": round(os.getloadavg()[0], 2),
                "bare_vllm_samples_per_s_with_load": round(base_e2e, 1),
                "bare_vllm_samples_per_s_loop": round(base_loop, 1),
                "rldata_end_to_end_samples_per_s": round(e2e, 1),
                "rldata_job_phase_samples_per_s": round(job, 1),
                "ratio_end_to_end": round(e2e / base_e2e, 3),
                "ratio_vs_bare_loop": round(e2e / base_loop, 3),
            }
        ),
        flush=True,
    )
    for n in [int(x) for x in a.rss.split(",") if x]:
        out = subprocess.run(
            [sys.executable, __file__, "--rss-child", str(n)], capture_output=True, text=True, check=False
        )
        print(out.stdout.strip().splitlines()[-1] if out.returncode == 0 else out.stderr[-2000:])


if __name__ == "__main__":
    main()
