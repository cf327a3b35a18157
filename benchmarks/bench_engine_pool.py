"""A Python user's repeated ``rldata.sample`` on fresh engines against a warm pool (issue 40 §3).

One process, one store of bundled arithmetic tasks, one local Ray (started first, not timed).  Each
call samples a new slice of N, so every call does real work (no no-op):

- fresh: ``rldata.sample(store, n=k)`` starts its engines and stops them at the end, every call;
- pool: ``with rldata.engines(engines=E) as pool`` (its start timed on its own), then the same calls
  with ``engines=pool``.

Reported per call: the wall time of the call, the job's own engine-start time (``time_engine_start_s``:
for a pool, the loan: health check, reset, reseed), and the time to the first sample row (the wall
time minus sampling, verification and the ledger); ratios fresh / pool side by side.

    python benchmarks/bench_engine_pool.py --calls 3 --tasks 64 --out benchmarks/bench_engine_pool.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path


def _calls(store, calls: int, *, where: str, engines) -> list[dict]:
    """``calls`` samples of the same tasks, N = 2, 4, 6...: each draws two new samples per task."""
    import rldata

    out = []
    for i in range(calls):
        t0 = time.monotonic()
        r = rldata.sample(store, n=2 * (i + 1), max_tokens=8, where=where, engines=engines)
        wall = time.monotonic() - t0
        out.append(
            {
                "call": i + 1,
                "wall_s": round(wall, 3),
                "engine_start_s": r.time_engine_start_s,
                "sampling_s": r.time_sampling_s,
                "samples": r.samples,
                "engines": r.engines,
            }
        )
        print(json.dumps(out[-1]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

    import rldata
    from rldata.engine.actors import ensure_ray
    from rldata.ingest import sample_path

    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    ensure_ray(None, num_cpus=max(4, os.cpu_count() or 1))  # once, not timed: both variants share it
    res: dict = {"load_start": load, "cpus": os.cpu_count(), "tasks": args.tasks, "engines": args.engines}
    with tempfile.TemporaryDirectory() as tmp:
        where = f"task_id IN (SELECT task_id FROM tasks ORDER BY task_id LIMIT {args.tasks})"
        stores = {}
        for name in ("fresh", "pool"):
            stores[name] = rldata.open_store(Path(tmp) / name)
            rldata.ingest(stores[name], path=str(sample_path("arith")))
        res["fresh"] = _calls(stores["fresh"], args.calls, where=where, engines=args.engines)
        t0 = time.monotonic()
        with rldata.engines(engines=args.engines) as pool:
            res["pool_start_s"] = round(time.monotonic() - t0, 3)
            res["pool"] = _calls(stores["pool"], args.calls, where=where, engines=pool)
    res["load_end"] = Path("/proc/loadavg").read_text().split()[:3] if load else []
    res["commit"] = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    for i in range(args.calls):
        f, p = res["fresh"][i], res["pool"][i]
        print(
            f"call {i + 1}: engine start fresh {f['engine_start_s']:.2f}s pool {p['engine_start_s']:.3f}s; "
            f"wall fresh {f['wall_s']:.1f}s pool {p['wall_s']:.1f}s (x{f['wall_s'] / p['wall_s']:.2f})"
        )
    fresh_s = sum(c["wall_s"] for c in res["fresh"])
    pool_s = res["pool_start_s"] + sum(c["wall_s"] for c in res["pool"])
    res["total"] = {
        "fresh_s": round(fresh_s, 1),
        "pool_s": round(pool_s, 1),
        "ratio": round(fresh_s / pool_s, 2),
    }
    print(
        f"{args.calls} calls: fresh {fresh_s:.1f}s, pool {pool_s:.1f}s with its start "
        f"(x{fresh_s / pool_s:.2f}); load {' '.join(res['load_start'])} -> {' '.join(res['load_end'])}"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
