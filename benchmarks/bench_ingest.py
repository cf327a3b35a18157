"""Ingest 1M synthetic tasks: rows/s, side by side with ``pyarrow.parquet.write_table`` of the same table.

    python benchmarks/bench_ingest.py [--rows 1000000] [--repeat 2]

The input (JSON lines and Parquet, {prompt, answer, source, domain, category, metadata}) is generated
once into benchmarks/_work.  Each repeat ingests into a fresh store (read, map, normalize, hash,
dedup against the store, one ``append(dedupe=True)`` commit); the baseline writes the resulting
``tasks`` Arrow table with ``pyarrow.parquet.write_table`` alone.  ratio = ingest rows/s / baseline
rows/s (higher is better; target >= 0.5).  Best of ``--repeat`` for both.  Also printed: process CPU
seconds (steadier than wall time on a shared machine) and the commit step alone
(``append(dedupe=True)`` of the finished table: a Delta merge), the floor under any ingest.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"
CATEGORIES = ["add/2d", "sub/2d", "mul/1d", "mix/3op"]


def make_input(rows: int) -> tuple[Path, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl, parquet = WORK / f"tasks_{rows}.jsonl", WORK / f"tasks_{rows}.parquet"
    if jsonl.exists() and parquet.exists():
        return jsonl, parquet
    WORK.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    records = []
    for i in range(rows):
        a, b = rng.randrange(1000), rng.randrange(1000)
        records.append(
            {
                "prompt": f"Task {i}: what is {a} + {b}? Give the final number.",
                "answer": str(a + b),
                "source": "synthetic",
                "domain": "math",
                "category": CATEGORIES[i % 4],
                "metadata": {"level": i % 5, "seed": i},
            }
        )
    tmp = jsonl.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    tmp.rename(jsonl)
    pq.write_table(pa.Table.from_pylist(records), parquet)
    return jsonl, parquet


def _fresh_store():
    from rldata import open_store

    root = WORK / "bench-ingest-store"
    shutil.rmtree(root, ignore_errors=True)
    return open_store(root)


def timed(fn) -> tuple[float, float, object]:
    """(wall seconds, process CPU seconds over all threads, result)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def time_ingest(path: Path):
    from rldata.ingest import ingest

    store = _fresh_store()
    wall, cpu, summary = timed(lambda: ingest(store, path, record_run=False))
    return wall, cpu, summary, store


def time_write_table(table) -> tuple[float, float]:
    import pyarrow.parquet as pq

    out = WORK / "baseline.parquet"
    wall, cpu, _ = timed(lambda: pq.write_table(table, out))
    out.unlink()
    return wall, cpu


def time_commit_only(table) -> tuple[float, float]:
    """The ingest's last step alone: ``append(dedupe=True)`` of the finished tasks table."""
    store = _fresh_store()
    wall, cpu, _ = timed(lambda: store.append("tasks", table, dedupe=True))
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    jsonl, parquet = make_input(args.rows)
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; rows: {args.rows:,}; "
        f"best of {args.repeat}; cpu = process CPU seconds, all threads"
    )
    for label, path in (("jsonl", jsonl), ("parquet", parquet)):
        ingest_t, base_t, commit_t = [], [], []
        for _ in range(args.repeat):
            wall, cpu, summary, store = time_ingest(path)
            assert summary.added == args.rows, summary
            ingest_t.append((wall, cpu))
            table = store.dataset("tasks").to_table()
            base_t.append(time_write_table(table))
            commit_t.append(time_commit_only(table))
        (t, tc), (b, bc), (c, cc) = min(ingest_t), min(base_t), min(commit_t)
        print(
            f"ingest {label:8s} {t:7.2f} s (cpu {tc:6.2f}) {args.rows / t:10,.0f} rows/s | write_table {b:6.2f} s "
            f"(cpu {bc:5.2f}) {args.rows / b:10,.0f} rows/s | ratio {b / t:.2f} (cpu {bc / tc:.2f}) | "
            f"commit alone {c:5.2f} s (cpu {cc:5.2f}), ratio {b / c:.2f}",
            flush=True,
        )
    from rldata.ingest import ingest

    wall, cpu, again = timed(lambda: ingest(store, parquet, record_run=False))
    print(
        f"re-ingest parquet into the full store (all duplicates, no commit): {wall:.2f} s (cpu {cpu:.2f}), "
        f"added {again.added}; load average {os.getloadavg()[0]:.1f}"
    )
    shutil.rmtree(WORK / "bench-ingest-store", ignore_errors=True)


if __name__ == "__main__":
    main()
