"""SQL at 10M trajectory rows: a GROUP BY and a join through ``Store.sql`` (what ``rldata sql`` runs),
side by side with pandas reading the same Parquet files.

    python benchmarks/bench_sql.py [--rows 10000000] [--repeat 2]

A store with ``--rows`` trajectories (16 samples per task) and one verification per trajectory is
generated once into benchmarks/_work/sql-store-<rows> through ``Store.append`` (validated, 1M rows a
commit).  Each query then runs in a fresh child process, which reports the query's seconds (best of
``--repeat``, result fetched as Arrow) and the process's peak RSS; the pandas child reads the
current version's Parquet files (only the columns the query needs) and computes the same result.
ratio = pandas seconds / rldata seconds.  Targets: < 3 s and < 4 GB on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

WORK = Path(__file__).resolve().parent / "_work"
SAMPLES_PER_TASK = 16
BATCH = 1_000_000

QUERIES = {
    "group_by": "SELECT task_id, count(*) AS n, avg(reward) AS mean_reward, sum(completion_tokens) AS tokens "
    "FROM trajectories GROUP BY task_id",
    "join": "SELECT t.task_id, count(*) AS n, avg(CAST(v.passed AS DOUBLE)) AS pass_rate "
    "FROM trajectories t JOIN verifications v ON t.traj_id = v.traj_id GROUP BY t.task_id",
}


def _batch(start: int, n: int):
    """Rows shaped like the sample job's: 32-hex traj_id, 64-hex task_id, 16 samples per task."""
    import duckdb

    rel = duckdb.sql(f"""
        SELECT md5('traj' || i) AS traj_id, sha256('task' || (i // {SAMPLES_PER_TASK})) AS task_id,
               'run0' AS run_id, (i % {SAMPLES_PER_TASK})::INTEGER AS sample_idx, 'tiny' AS model,
               0::BIGINT AS policy_version, 'p0' AS params_hash,
               'The answer is ' || (i % 997) || '.' AS completion,
               (4 + hash(i) % 60)::INTEGER AS completion_tokens, 'stop' AS finish_reason,
               hash(i * 7) % 10 < 3 AS passed
        FROM range({start}, {start + n}) t(i)""").to_arrow_table()
    trajectories = rel.drop_columns(["passed"]).append_column("reward", rel.column("passed").cast("float64"))
    verifications = rel.select(["traj_id", "task_id", "passed"]).append_column(
        "score", rel.column("passed").cast("float64")
    )
    for name, value in (("verifier", "math"), ("verifier_version", "1"), ("layer", "answer")):
        verifications = verifications.append_column(name, pa.array([value] * 1, pa.string()).take([0] * n))
    return trajectories, verifications


def make_store(rows: int) -> Path:
    from rldata import open_store

    root = WORK / f"sql-store-v2-{rows}"
    done = root / "_complete"
    if done.exists():
        return root
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    store = open_store(root)
    t0 = time.perf_counter()
    for start in range(0, rows, BATCH):
        trajectories, verifications = _batch(start, min(BATCH, rows - start))
        store.append("trajectories", trajectories)
        store.append("verifications", verifications)
        print(
            f"  generated {start + trajectories.num_rows:,} rows ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    done.write_text("ok\n")
    return root


def child_rldata(root: str, name: str, repeat: int) -> dict:
    from rldata import open_store

    store = open_store(root)
    best, cpu, rows = float("inf"), float("inf"), 0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = store.sql(QUERIES[name]).to_arrow_table()
        best, cpu = min(best, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
        rows = result.num_rows
    return {"seconds": best, "cpu_s": cpu, "rows": rows}


def child_pandas(root: str, name: str, repeat: int) -> dict:
    import pandas as pd

    from rldata import open_store

    store = open_store(root)
    files = {t: store.table(t).file_uris() for t in ("trajectories", "verifications")}

    def read(table: str, columns: list[str]):
        return pd.concat([pd.read_parquet(f, columns=columns) for f in files[table]], ignore_index=True)

    best, cpu, rows = float("inf"), float("inf"), 0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        if name == "group_by":
            df = read("trajectories", ["task_id", "reward", "completion_tokens"])
            out = df.groupby("task_id", sort=False).agg(
                n=("reward", "size"), mean_reward=("reward", "mean"), tokens=("completion_tokens", "sum")
            )
        else:
            t = read("trajectories", ["traj_id", "task_id"])
            v = read("verifications", ["traj_id", "passed"])
            j = t.merge(v, on="traj_id")
            j["passed"] = j["passed"].astype("float64")
            out = j.groupby("task_id", sort=False).agg(n=("passed", "size"), pass_rate=("passed", "mean"))
        best, cpu = min(best, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
        rows = len(out)
        del out
    return {"seconds": best, "cpu_s": cpu, "rows": rows}


def run_child(kind: str, root: Path, name: str, repeat: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--root",
        str(root),
        "--query",
        name,
        "--repeat",
        str(repeat),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cli_wall(root: Path, name: str) -> float:
    """The whole ``rldata sql`` command (start-up, query, writing the rows as Parquet)."""
    out = WORK / "cli-out.parquet"
    t0 = time.perf_counter()
    subprocess.run(
        [
            str(Path(sys.executable).parent / "rldata"),
            "--store",
            str(root),
            "sql",
            QUERIES[name],
            "--format",
            "parquet",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    elapsed = time.perf_counter() - t0
    out.unlink(missing_ok=True)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--child", choices=["rldata", "pandas"])
    ap.add_argument("--root")
    ap.add_argument("--query", choices=list(QUERIES))
    args = ap.parse_args()
    if args.child:
        fn = child_rldata if args.child == "rldata" else child_pandas
        res = fn(args.root, args.query, args.repeat)
        res["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
        print(json.dumps(res))
        return
    root = make_store(args.rows)
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; trajectories = "
        f"verifications = {args.rows:,} rows; best of {args.repeat}; cpu = process CPU seconds, all threads"
    )
    for name in QUERIES:
        r = run_child("rldata", root, name, args.repeat)
        p = run_child("pandas", root, name, args.repeat)
        assert r["rows"] == p["rows"], (r, p)
        print(
            f"{name:9s} rldata sql {r['seconds']:6.2f} s (cpu {r['cpu_s']:5.2f}) peak RSS {r['peak_rss_gb']:5.2f} GB"
            f" | pandas {p['seconds']:6.2f} s (cpu {p['cpu_s']:5.2f}) peak RSS {p['peak_rss_gb']:5.2f} GB"
            f" | ratio {p['seconds'] / r['seconds']:.1f}x | `rldata sql` command wall {cli_wall(root, name):.2f} s"
            f" | load {os.getloadavg()[0]:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
