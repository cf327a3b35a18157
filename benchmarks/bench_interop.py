"""Benchmark: `rldata export` and `rldata import-rollouts` against the naive way of doing each.

    .venv/bin/python benchmarks/bench_interop.py [--tasks 100000] [--rollouts 100000]

Builds (untimed) a store with ``--tasks`` tasks, a selection keeping half of them, and a veRL
rollout dump of ``--rollouts`` lines over those prompts (4 steps).  Then, timed:

- ``export verl``: :func:`rldata.interop.export_selection` (veRL's nested columns, ordered rows,
  content hash, file hashes, manifest).  Baseline: one DuckDB ``COPY`` of the selection joined with
  its tasks to Parquet (flat columns, no manifest).
- ``export hf``: the same for the HF layout (save_to_disk + Parquet shards).  Same baseline.
- ``import verl``: :func:`rldata.interop.import_rollouts` (parse and check every line, link to tasks
  by normalized prompt, trajectories + verifications, dedupe on commit).  Baseline: Polars
  ``read_ndjson`` of the dump and one plain append of flat trajectory rows (no checks, no linking,
  no verifications).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path


def _build(root: Path, tasks: int, rollouts: int):
    import pyarrow as pa

    from rldata import open_store

    store = open_store(root / "store")
    ids = [f"t{i:07d}" for i in range(tasks)]
    store.append(
        "tasks",
        pa.table(
            {
                "task_id": ids,
                "source": ["bench"] * tasks,
                "domain": ["math"] * tasks,
                "prompt": [f"{i} + {i % 97} =" for i in range(tasks)],
                "answer": [str(i + i % 97) for i in range(tasks)],
            }
        ),
    )
    store.append(
        "selections",
        pa.table(
            {
                "selection": ["band"] * tasks,
                "task_id": ids,
                "decision": ["keep" if i % 2 == 0 else "drop" for i in range(tasks)],
                "reason": ["in_band"] * tasks,
                "pass_rate": [0.5] * tasks,
                "bucket": ["easy" if i % 4 == 0 else "hard" for i in range(tasks)],
                "params": [json.dumps({"low": 0.1, "high": 0.9})] * tasks,
            }
        ),
    )
    dump = root / "dump"
    dump.mkdir()
    per_step = rollouts // 4
    for step in range(1, 5):
        with open(dump / f"{step}.jsonl", "w") as f:
            for j in range(per_step):
                i = (j * 7 + step) % tasks
                f.write(
                    json.dumps(
                        {
                            "input": f"{i} + {i % 97} =",
                            "output": str(j % 50),
                            "gts": str(i + i % 97),
                            "score": float(j % 3 == 0),
                            "step": step,
                            "acc": j % 3 == 0,
                        }
                    )
                    + "\n"
                )
    return store, dump


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--rollouts", type=int, default=100_000)
    a = ap.parse_args()

    import polars as pl

    from rldata.interop import ExportConfig, ImportConfig, export_selection, import_rollouts

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store, dump = _build(root, a.tasks, a.rollouts)

        def baseline_export():
            store.sql(
                "SELECT s.task_id, t.prompt, t.answer, t.source, s.bucket, s.pass_rate FROM selections s "
                "JOIN tasks t USING (task_id) WHERE s.selection = 'band' AND s.decision = 'keep' "
                "ORDER BY s.task_id"
            ).write_parquet(str(root / "baseline.parquet"))

        base_exp = _timed(baseline_export)
        verl = _timed(
            lambda: export_selection(store, ExportConfig(selection="band", format="verl", out=root / "verl"))
        )
        hf = _timed(
            lambda: export_selection(store, ExportConfig(selection="band", format="hf", out=root / "hf"))
        )

        def baseline_import():
            df = pl.concat([pl.read_ndjson(f) for f in sorted(dump.glob("*.jsonl"))])
            store.append(
                "trajectories",
                df.select(
                    pl.format("b{}", pl.int_range(pl.len())).alias("traj_id"),
                    pl.lit("t0000000").alias("task_id"),
                    pl.lit("baseline").alias("run_id"),
                    pl.lit(0, pl.Int32).alias("sample_idx"),
                    pl.lit("m").alias("model"),
                    pl.col("step").alias("policy_version"),
                    pl.lit("x").alias("params_hash"),
                    pl.col("input").alias("prompt"),
                    pl.col("output").alias("completion"),
                    pl.col("score").alias("reward"),
                ),
            )

        base_imp = _timed(baseline_import)
        imp = _timed(lambda: import_rollouts(store, ImportConfig(format="verl", path=dump)))

    kept = a.tasks // 2
    print(
        f"machine: {platform.machine()}, {__import__('os').cpu_count()} cores; tasks {a.tasks}, kept {kept}, "
        f"rollouts {a.rollouts}"
    )
    print(
        f"export verl  {verl:6.2f} s  ({kept / verl:8.0f} tasks/s)  baseline COPY {base_exp:5.2f} s  "
        f"ratio {verl / base_exp:4.1f}x"
    )
    print(
        f"export hf    {hf:6.2f} s  ({kept / hf:8.0f} tasks/s)  baseline COPY {base_exp:5.2f} s  "
        f"ratio {hf / base_exp:4.1f}x"
    )
    print(
        f"import verl  {imp:6.2f} s  ({a.rollouts / imp:8.0f} lines/s)  baseline read+append {base_imp:5.2f} s  "
        f"ratio {imp / base_imp:4.1f}x"
    )


if __name__ == "__main__":
    main()
