"""Benchmark: filter and stratify over 1M tasks whose pass rates come from 16M verified samples.

    .venv/bin/python benchmarks/bench_filter.py [--tasks 1000000] [--n 16] [--keep DIR]

Builds (untimed) a real store in a temp dir: 1M tasks and 16M verification rows (one per sampled
trajectory; pass counts follow a mirrored-J distribution like Polaris').  Then each timed stage
runs in a fresh process, so its peak RSS is its own:

- ``aggregate``: the ledger's aggregation, a DuckDB GROUP BY of the 16M verifications per task,
  appended to ``passrates`` (1M rows).
- ``filter``: ``rldata.ledger.select.filter_store`` (band 0.1-0.9 decided from counts; 1M selection rows
  written in one commit).
- ``stratify``: ``rldata.ledger.select.stratify_store`` (three buckets; 1M rows rewritten in one commit,
  buckets.yaml written).
- ``baseline``: the naive filter, one DuckDB query comparing the float pass rate (no exact edges,
  no insufficient-samples rows, no provenance), written to the same table.

Seconds are the stage's own wall time after imports, cpu_seconds its CPU time (all threads: the
honest number when other work shares the cores; load_avg says how busy the machine was); peak RSS
is the whole process's.  Targets for filter + stratify on 2 cores: < 10 s and < 4 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BAND = (0.1, 0.9)
BUCKETS = "easy:0.7-0.9,medium:0.4-0.7,hard:0.1-0.4"


def _const(value, size: int):
    import numpy as np
    import pyarrow as pa

    return pa.array([value]).take(pa.array(np.zeros(size, dtype=np.int32)))  # (size,) without a Python list


def _build(root: str, tasks: int, n: int, seed: int = 0) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from rldata import open_store

    store = open_store(root)
    rng = np.random.default_rng(seed)
    ids = pc.binary_join_element_wise("t", pc.cast(pa.array(np.arange(tasks)), pa.string()), "")
    cats = pa.array(rng.choice(["add", "sub", "mul", "div", "algebra", "geometry"], tasks))
    store.append(
        "tasks",
        pa.table(
            {
                "task_id": ids,
                "source": _const("bench", tasks),
                "domain": _const("math", tasks),
                "category": cats,
                "prompt": _const("q", tasks),
            }
        ),
    )
    p = rng.beta(0.35, 0.5, tasks)  # most mass near 0, a tail near 1: the mirrored J
    k = rng.binomial(n, p)  # correct samples per task, shape (tasks,)
    chunk = max(1, 2_000_000 // n)  # tasks per append: 2M verification rows
    for start in range(0, tasks, chunk):
        stop = min(tasks, start + chunk)
        m = stop - start
        task_col = pa.array(np.repeat(ids.slice(start, m).to_numpy(zero_copy_only=False), n))  # (m*n,)
        idx = np.tile(np.arange(n), m)  # (m*n,)
        passed = idx < np.repeat(k[start:stop], n)  # (m*n,): the first k samples of a task pass
        traj = pc.binary_join_element_wise(task_col, pc.cast(pa.array(idx), pa.string()), "/")
        store.append(
            "verifications",
            pa.table(
                {
                    "traj_id": traj,
                    "task_id": task_col,
                    "verifier": _const("math", m * n),
                    "verifier_version": _const("0.9", m * n),
                    "layer": _const("answer", m * n),
                    "passed": pa.array(passed),
                    "score": pa.array(passed.astype("float64")),
                }
            ),
        )


def _stage(name: str, root: str) -> dict:
    import polars as pl

    from rldata import open_store

    store = open_store(root)
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    extra: dict = {}
    if name == "aggregate":
        rel = store.sql("""
            SELECT task_id, 'bench-model' AS model, 'p0' AS params_hash, verifier || '@' || verifier_version
                   AS verifier_key, CAST(count(passed) AS INTEGER) AS n,
                   CAST(count(*) FILTER (WHERE passed) AS INTEGER) AS n_correct,
                   CAST(count(*) - count(passed) AS INTEGER) AS n_error,
                   count(*) FILTER (WHERE passed) / count(passed) AS pass_rate
            FROM verifications GROUP BY task_id, verifier, verifier_version""")
        extra["rows"] = store.append("passrates", rel.to_arrow_table())
    elif name == "filter":
        from rldata.ledger.select import Band, filter_store

        res, _ = filter_store(store, name="bench", band=Band(*BAND))
        extra = {"kept": res.kept, "total": res.total}
    elif name == "stratify":
        from rldata.ledger.select import parse_buckets, stratify_store

        res = stratify_store(
            store, selection="bench", buckets=parse_buckets(BUCKETS), out=Path(root) / "buckets.yaml"
        )
        extra = {b.name: b.count for b in res.curriculum.buckets}
    elif name == "baseline":
        rel = store.sql(f"""
            SELECT 'naive' AS selection, task_id, CASE WHEN pass_rate BETWEEN {BAND[0]} AND {BAND[1]}
                   THEN 'keep' ELSE 'drop' END AS decision,
                   CASE WHEN pass_rate < {BAND[0]} THEN 'too_hard' WHEN pass_rate > {BAND[1]} THEN 'too_easy'
                   ELSE 'in_band' END AS reason, pass_rate, n, n_correct
            FROM passrates""")
        df = pl.from_arrow(rel.to_arrow_table())
        store.overwrite("selections", df, predicate="selection = 'naive'")
        extra = {"kept": int((df["decision"] == "keep").sum())}
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    load = max(load0, os.getloadavg()[0])
    return {
        "stage": name,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mb": round(rss_mb),
        "load_avg": round(load, 1),
        **extra,
    }


def _child(name: str, root: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--stage", name, "--root", root],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"stage {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--keep", help="build the store here and keep it (default: a temp dir, removed)")
    ap.add_argument("--stage", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stage:
        print(json.dumps(_stage(args.stage, args.root)))
        return
    root = args.keep or tempfile.mkdtemp(prefix="bench_filter_")
    try:
        t0 = time.perf_counter()
        _build(root, args.tasks, args.n)
        print(
            f"built {args.tasks:,} tasks x {args.n} = {args.tasks * args.n:,} verifications "
            f"in {time.perf_counter() - t0:.0f} s ({root})",
            flush=True,
        )
        results = {s: _child(s, root) for s in ("aggregate", "filter", "stratify", "baseline")}
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    for r in results.values():
        print(json.dumps(r))
    f, s, b = results["filter"], results["stratify"], results["baseline"]
    both = f["seconds"] + s["seconds"]
    peak = max(f["peak_rss_mb"], s["peak_rss_mb"])
    cpu = f["cpu_seconds"] + s["cpu_seconds"]
    print(
        f"filter + stratify: {both:.2f} s wall, {cpu:.2f} s CPU (target 10 s: ratio {both / 10:.2f} wall, "
        f"{cpu / 10:.2f} CPU), peak RSS {peak} MB (target 4096 MB: ratio {peak / 4096:.2f})"
    )
    print(
        f"filter vs naive one-query DuckDB filter: {f['seconds']:.2f} s / {b['seconds']:.2f} s = "
        f"{f['seconds'] / b['seconds']:.2f}x wall, {f['cpu_seconds'] / b['cpu_seconds']:.2f}x CPU"
    )


if __name__ == "__main__":
    main()
