"""Sync against async GRPO when completion lengths vary widely within and across steps (issue 14 §4).

    python benchmarks/bench_async_varlen.py [--steps 5] [--warmup 1] [--modes sync,async1,async2]
                                            [--baseline-python PY] [--out benchmarks/bench_async_varlen.json]

The model is bench_grpo_vs_trl's scaled Llama (~27M parameters, random init, seed 0, the same
weights), but with the tokenizer's own eos: a random-init model samples it with probability ~1/27 per
token, so each completion stops at a geometric length, from 1 token to the 64-token cap (about one
in ten runs to the cap).  Lengths therefore vary widely inside every group and every step, and a
step's longest completion, which bounds its generation in sync mode, differs from step to step.  The
lengths come from the sampling itself, not from a schedule, and are the same kind of spread in both
modes; the rows record the distribution actually generated (quantiles, each step's mean and max).
Nothing is learned (rewards are all 0: the random model never answers the arithmetic right, and
with dynamic sampling off every group still trains): this measures wall-clock per step and
throughput, not learning.

Setup otherwise as bench_grpo_vs_trl (G=16, 4 prompts, 64 rollouts per step, one engine actor, one
learner actor, every rollout written to a Delta store).  Per mode: samples/s over the timed steps,
seconds per step (mean, min, max), the time split, idle fractions, staleness.  Run it under an
exclusive lock on a quiet machine; the load average is recorded per row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_grpo_vs_trl as base


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--modes", default="sync,async1,async2")
    ap.add_argument("--baseline-python", help="also run each mode with this interpreter's rldata")
    ap.add_argument("--out", default=str(HERE / "bench_async_varlen.json"))
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    base.WORK.mkdir(parents=True, exist_ok=True)
    if args.child:
        got = base.run_rldata(
            "scaled",
            args.steps,
            args.warmup,
            args.modes,
            model=str(base.scaled_model(stops=True)),
            lengths=True,
        )
        print(json.dumps(got))
        return
    base.scaled_model(stops=True)  # built once, outside the timed children
    results = {}
    pythons = ([("baseline", args.baseline_python)] if args.baseline_python else []) + [("rldata", None)]
    for mode in args.modes.split(","):
        for label, py in pythons:
            load = [round(x, 2) for x in os.getloadavg()]
            t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            got = _child(mode, args.steps, args.warmup, py)
            got["version"] = base.rldata_version(py)
            got |= {
                "load_avg_before": load,
                "load_avg_after": [round(x, 2) for x in os.getloadavg()],
                "date": t0,
            }
            results[f"varlen/{mode}" + ("/baseline" if label == "baseline" else "")] = got
            s = got.get("step_s") or [float("nan")]
            print(
                f"{label} {mode}: {got.get('samples_per_s', float('nan')):.2f} samples/s, step "
                f"{sum(s) / len(s):.2f} s ({min(s):.2f}-{max(s):.2f}); load {load}",
                flush=True,
            )
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


def _child(mode: str, steps: int, warmup: int, python: str | None) -> dict:
    import subprocess

    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [python or sys.executable, __file__, "--child", "--modes", mode, "--steps", str(steps)]
    p = subprocess.run([*cmd, "--warmup", str(warmup)], capture_output=True, text=True, env=env, check=False)
    if p.returncode:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
